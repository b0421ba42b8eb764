/* The emulated CUDA runtime: the calls libtpgen-cuda's sources make, on host memory.
 *
 * Devices: TPGEN_EMU_DEVICES of them (default 8; ordinals as on a node, so two ranks on one node
 * with the same ordinal share a device UUID, as NCCL sees it), each of TPGEN_EMU_DEVICE_MB MiB
 * (default 2048) and TPGEN_EMU_SMS multiprocessors (default 132, an H100's). A process's
 * allocations all count against its current device's size.
 * Memory: each cudaMalloc is its own mapping, ending 16 bytes past the rounded-up size at a
 * PROT_NONE guard page, so a kernel or copy reading past the end faults; the fault handler names
 * the allocation and the running kernel. Fresh allocations are filled with 0xff bytes (NaN in
 * f16, bf16 and f32), so a read of memory never written shows in the results.
 * Streams: work runs at submission on the calling thread (every stream is thus ordered with every
 * other); a capturing stream records it instead, with its argument values, and a graph launch
 * replays those records in order. TPGEN_EMU_REPORT=FILE appends "NAME COUNT" per kernel run at
 * exit. TPGEN_EMU_MEM_REPORT=FILE appends, at exit, what the process's device memory saw:
 * "pid P peak BYTES" (the most cudaMalloc held at once, 16-byte rounded as counted against the
 * device), then "pid P alloc ID BYTES unwritten U" per cudaMalloc, freed or live, in allocation
 * order: U the bytes still in 2-byte words of the 0xff fill (never written as F16/BF16; "-" for
 * allocations above 64 MiB, which are not filled). */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tests/gpu/emu/emu.h"
#include "tests/gpu/emu/emu_rt.h"

extern "C" {
#include "util/log.h"
}

static std::mutex g_mu; /* the allocation table (the NCCL watchdog thread queries events) */

void emu_fatal(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tp_die("emulated CUDA: %s", msg);
}

static long env_long(const char *name, long def, long lo, long hi) {
    const char *s = getenv(name);
    if (!s || !*s) return def;
    char *end;
    const long v = strtol(s, &end, 10);
    if (*end || v < lo || v > hi) emu_fatal("%s=%s: must be an integer in %ld..%ld", name, s, lo, hi);
    return v;
}
static int n_devices(void) { return (int)env_long("TPGEN_EMU_DEVICES", 8, 1, 64); }
static size_t device_bytes(void) { return (size_t)env_long("TPGEN_EMU_DEVICE_MB", 2048, 1, 1L << 24) << 20; }

/* ---- errors ---- */

static thread_local cudaError_t t_last = cudaSuccess;
static thread_local int t_device = 0;
static cudaError_t fail(cudaError_t e) {
    t_last = e;
    return e;
}

extern "C" cudaError_t cudaGetLastError(void) {
    const cudaError_t e = t_last;
    t_last = cudaSuccess;
    return e;
}
extern "C" cudaError_t cudaPeekAtLastError(void) { return t_last; }

extern "C" const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
    default: return "unknown error";
    }
}
extern "C" const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    default: return "cudaErrorUnknown";
    }
}

/* ---- devices ---- */

extern "C" cudaError_t cudaGetDeviceCount(int *n) {
    *n = n_devices();
    return cudaSuccess;
}
extern "C" cudaError_t cudaSetDevice(int d) {
    if (d < 0 || d >= n_devices()) return fail(cudaErrorInvalidDevice);
    t_device = d;
    return cudaSuccess;
}
extern "C" cudaError_t cudaGetDevice(int *d) {
    *d = t_device;
    return cudaSuccess;
}

extern "C" cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d) {
    if (d < 0 || d >= n_devices()) return fail(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "tpgen emulated device %d", d);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    uint64_t h = 1469598103934665603ull; /* FNV-1a of the host name, then the ordinal */
    for (const char *c = host; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    memcpy(p->uuid.bytes, &h, 8);
    const uint64_t o = (uint64_t)d + 1;
    memcpy(p->uuid.bytes + 8, &o, 8);
    p->totalGlobalMem = device_bytes();
    p->sharedMemPerBlock = 48 << 10;
    p->sharedMemPerBlockOptin = 227 << 10;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = 1024, p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 0x7fffffff, p->maxGridSize[1] = 65535, p->maxGridSize[2] = 65535;
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = (int)env_long("TPGEN_EMU_SMS", 132, 1, 1024);
    p->unifiedAddressing = 1;
    return cudaSuccess;
}

/* ---- memory ---- */

struct alloc_rec {
    char *base;     /* the caller's pointer */
    size_t bytes;   /* asked for */
    char *map;      /* the mapping, guard page included */
    size_t map_bytes;
    long id;        /* 1, 2, ... in allocation order */
    int pinned;     /* cudaMallocHost (host memory the device may read) */
};
static std::map<uintptr_t, alloc_rec> g_allocs; /* by base */
static size_t g_used, g_peak;
static long g_next_id;
static const size_t FILL_MAX = (size_t)64 << 20; /* fresh allocations up to this size are 0xff-filled */

/* ---- the memory report (TPGEN_EMU_MEM_REPORT) ---- */

struct mem_line {
    long id;
    size_t bytes;
    long unwritten; /* -1: not filled, unknown */
};
static std::vector<mem_line> g_mem_lines; /* freed allocations (live ones are added at exit) */

static int mem_report_on(void) {
    const char *p = getenv("TPGEN_EMU_MEM_REPORT");
    return p && *p;
}

/* Bytes of a in 2-byte words still 0xffff, the fill: never written as F16/BF16 (caller holds g_mu). */
static mem_line mem_line_of(const alloc_rec &a) {
    if (a.bytes > FILL_MAX) return mem_line{a.id, a.bytes, -1};
    long n = 0;
    const unsigned char *u = (const unsigned char *)a.base;
    for (size_t i = 0; i + 1 < a.bytes; i += 2) n += (u[i] == 0xff && u[i + 1] == 0xff) ? 2 : 0;
    return mem_line{a.id, a.bytes, n};
}

static void write_mem_report(void) {
    const char *path = getenv("TPGEN_EMU_MEM_REPORT");
    std::lock_guard<std::mutex> l(g_mu);
    std::vector<mem_line> lines = g_mem_lines;
    for (const auto &kv : g_allocs)
        if (!kv.second.pinned) lines.push_back(mem_line_of(kv.second));
    std::sort(lines.begin(), lines.end(), [](const mem_line &x, const mem_line &y) { return x.id < y.id; });
    FILE *f = fopen(path, "a");
    if (!f) {
        fprintf(stderr, "emulated CUDA: TPGEN_EMU_MEM_REPORT=%s: %s\n", path, strerror(errno));
        return;
    }
    const long pid = (long)getpid();
    fprintf(f, "pid %ld peak %zu\n", pid, g_peak);
    for (const mem_line &m : lines) {
        if (m.unwritten < 0) fprintf(f, "pid %ld alloc %ld %zu unwritten -\n", pid, m.id, m.bytes);
        else fprintf(f, "pid %ld alloc %ld %zu unwritten %ld\n", pid, m.id, m.bytes, m.unwritten);
    }
    if (fclose(f) != 0) fprintf(stderr, "emulated CUDA: TPGEN_EMU_MEM_REPORT=%s: %s\n", path, strerror(errno));
}

/* The allocation whose [base, base + bytes] holds p (caller holds g_mu). */
static const alloc_rec *find_locked(const void *p) {
    auto it = g_allocs.upper_bound((uintptr_t)p);
    if (it == g_allocs.begin()) return NULL;
    --it;
    const alloc_rec &a = it->second;
    return (const char *)p <= a.base + a.bytes ? &a : NULL;
}

int emu_is_device(const void *p) {
    std::lock_guard<std::mutex> l(g_mu);
    const alloc_rec *a = find_locked(p);
    return a && !a->pinned;
}

void emu_check_device(const char *call, const char *what, const void *p, size_t bytes) {
    std::lock_guard<std::mutex> l(g_mu);
    const alloc_rec *a = find_locked(p);
    if (!a || a->pinned)
        emu_fatal("%s: %s %p is host memory%s, not device memory", call, what, p,
                  a ? " (pinned, from cudaMallocHost)" : "");
    const size_t off = (size_t)((const char *)p - a->base);
    if (bytes > a->bytes - off)
        emu_fatal("%s: %s spans %zu bytes from offset %zu of device allocation #%ld (%zu bytes): %zu bytes past its "
                  "end", call, what, bytes, off, a->id, a->bytes, bytes - (a->bytes - off));
}

static const size_t PAGE = 4096;

static void *map_alloc(size_t bytes, int pinned) {
    const size_t body = (bytes + 15) & ~(size_t)15, pages = (body + PAGE - 1) / PAGE;
    const size_t map_bytes = (pages + 1) * PAGE;
    char *m = (char *)mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return NULL;
    if (mprotect(m + pages * PAGE, PAGE, PROT_NONE) != 0) emu_fatal("mprotect of a guard page: %s", strerror(errno));
    char *base = m + pages * PAGE - body; /* 16-byte aligned, ending at the guard page */
    if (!pinned && bytes <= FILL_MAX) memset(base, 0xff, body);
    std::lock_guard<std::mutex> l(g_mu);
    static int reg;
    if (!pinned && !reg++ && mem_report_on()) atexit(write_mem_report);
    g_allocs[(uintptr_t)base] = alloc_rec{base, bytes, m, map_bytes, ++g_next_id, pinned};
    if (!pinned) g_used += body;
    if (g_used > g_peak) g_peak = g_used;
    return base;
}

static cudaError_t unmap_alloc(void *p, int pinned, const char *call) {
    if (!p) return cudaSuccess;
    std::lock_guard<std::mutex> l(g_mu);
    auto it = g_allocs.find((uintptr_t)p);
    if (it == g_allocs.end() || it->second.pinned != pinned)
        emu_fatal("%s(%p): not the start of a live %s allocation", call, p, pinned ? "cudaMallocHost" : "cudaMalloc");
    const alloc_rec a = it->second;
    if (!pinned && mem_report_on()) g_mem_lines.push_back(mem_line_of(a));
    g_allocs.erase(it);
    if (!pinned) g_used -= (a.bytes + 15) & ~(size_t)15;
    munmap(a.map, a.map_bytes);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMalloc(void **p, size_t bytes) {
    *p = NULL;
    size_t used;
    {
        std::lock_guard<std::mutex> l(g_mu);
        used = g_used;
    }
    if (bytes > device_bytes() || ((bytes + 15) & ~(size_t)15) > device_bytes() - used)
        return fail(cudaErrorMemoryAllocation);
    *p = map_alloc(bytes ? bytes : 1, 0);
    return *p ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}
extern "C" cudaError_t cudaFree(void *p) { return unmap_alloc(p, 0, "cudaFree"); }
extern "C" cudaError_t cudaMallocHost(void **p, size_t bytes) {
    *p = map_alloc(bytes ? bytes : 1, 1);
    return *p ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}
extern "C" cudaError_t cudaFreeHost(void *p) { return unmap_alloc(p, 1, "cudaFreeHost"); }

extern "C" cudaError_t cudaMemGetInfo(size_t *fr, size_t *total) {
    std::lock_guard<std::mutex> l(g_mu);
    *total = device_bytes();
    *fr = *total - g_used;
    return cudaSuccess;
}

extern "C" cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *at, const void *p) {
    memset(at, 0, sizeof *at);
    std::lock_guard<std::mutex> l(g_mu);
    const alloc_rec *a = find_locked(p);
    at->type = !a ? cudaMemoryTypeUnregistered : a->pinned ? cudaMemoryTypeHost : cudaMemoryTypeDevice;
    at->device = t_device;
    at->devicePointer = a ? (void *)p : NULL;
    at->hostPointer = a && a->pinned ? (void *)p : NULL;
    return cudaSuccess;
}

/* A fault in a guard page: which allocation the access ran past. */
static void on_segv(int sig, siginfo_t *si, void *) {
    const char *addr = (const char *)si->si_addr;
    for (const auto &kv : g_allocs) { /* dying: no lock (the holder may be this thread) */
        const alloc_rec &a = kv.second;
        const char *guard = a.map + a.map_bytes - PAGE;
        if (addr >= guard && addr < guard + PAGE)
            emu_fatal("%s: an access at %p, %zu bytes past the end of %s allocation #%ld (%zu bytes at %p)",
                      emu_current_work(), addr, (size_t)(addr - a.base) - a.bytes, a.pinned ? "pinned host" : "device",
                      a.id, a.bytes, a.base);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

__attribute__((constructor)) static void install_segv(void) {
    static char alt[64 << 10];
    stack_t ss;
    memset(&ss, 0, sizeof ss);
    ss.ss_sp = alt;
    ss.ss_size = sizeof alt;
    sigaltstack(&ss, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, NULL);
}

/* ---- copies ---- */

static const char *kind_name(cudaMemcpyKind k) {
    switch (k) {
    case cudaMemcpyHostToHost: return "cudaMemcpyHostToHost";
    case cudaMemcpyHostToDevice: return "cudaMemcpyHostToDevice";
    case cudaMemcpyDeviceToHost: return "cudaMemcpyDeviceToHost";
    case cudaMemcpyDeviceToDevice: return "cudaMemcpyDeviceToDevice";
    default: return "cudaMemcpyDefault";
    }
}

static void check_host(const char *call, const char *what, const void *p) {
    if (emu_is_device(p)) emu_fatal("%s: %s %p is device memory, not host memory", call, what, p);
}

static cudaError_t memcpy_any(const char *name, void *dst, const void *src, size_t n, cudaMemcpyKind k, cudaStream_t s) {
    char call[160];
    snprintf(call, sizeof call, "%s(%p, %p, %zu, %s)", name, dst, src, n, kind_name(k));
    if (k == cudaMemcpyDefault) k = (cudaMemcpyKind)((emu_is_device(src) ? 2 : 0) + (emu_is_device(dst) ? 1 : 0));
    if (k == cudaMemcpyHostToDevice || k == cudaMemcpyDeviceToDevice) emu_check_device(call, "the destination", dst, n);
    else check_host(call, "the destination", dst);
    if (k == cudaMemcpyDeviceToHost || k == cudaMemcpyDeviceToDevice) emu_check_device(call, "the source", src, n);
    else check_host(call, "the source", src);
    if (n) emu_submit(s, NULL, [=]() { memmove(dst, src, n); });
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind k, cudaStream_t s) {
    return memcpy_any("cudaMemcpyAsync", dst, src, n, k, s);
}
extern "C" cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind k) {
    return memcpy_any("cudaMemcpy", dst, src, n, k, NULL);
}
extern "C" cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
    char call[96];
    snprintf(call, sizeof call, "cudaMemsetAsync(%p, %d, %zu)", p, v, n);
    emu_check_device(call, "the buffer", p, n);
    if (n) emu_submit(s, NULL, [=]() { memset(p, v, n); });
    return cudaSuccess;
}
extern "C" cudaError_t cudaMemset(void *p, int v, size_t n) { return cudaMemsetAsync(p, v, n, NULL); }

/* ---- streams, events, capture and graphs ---- */

struct node {
    const char *kernel; /* NULL: not a kernel */
    std::function<void()> run;
};
struct CUstream_st {
    int capturing;
    std::vector<node> rec;
};
struct CUevent_st {
    int unused;
};
struct CUgraph_st {
    std::vector<node> nodes;
};
struct CUgraphExec_st {
    std::vector<node> nodes;
};

static std::map<std::string, long> g_launches; /* kernel -> runs (the launch report) */
static thread_local const char *t_work = "host code";
const char *emu_current_work(void) { return t_work; }

static void write_report(void) {
    const char *path = getenv("TPGEN_EMU_REPORT");
    if (!path || !*path) return;
    FILE *f = fopen(path, "a");
    if (!f) {
        fprintf(stderr, "emulated CUDA: TPGEN_EMU_REPORT=%s: %s\n", path, strerror(errno));
        return;
    }
    for (const auto &kv : g_launches) fprintf(f, "%s %ld\n", kv.first.c_str(), kv.second);
    if (fclose(f) != 0) fprintf(stderr, "emulated CUDA: TPGEN_EMU_REPORT=%s: %s\n", path, strerror(errno));
}

static void run_node(const node &n) {
    static int reg;
    if (!reg++) atexit(write_report);
    const char *prev = t_work;
    char what[192];
    if (n.kernel) {
        g_launches[n.kernel]++;
        snprintf(what, sizeof what, "kernel %s", n.kernel);
        t_work = what;
    }
    n.run();
    t_work = prev;
}

int emu_capturing(cudaStream_t s) { return s && s->capturing; }

void emu_submit(cudaStream_t s, const char *kernel, std::function<void()> run) {
    node n{kernel, std::move(run)};
    if (emu_capturing(s)) s->rec.push_back(std::move(n));
    else run_node(n);
}

extern "C" cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int) {
    *s = new CUstream_st();
    return cudaSuccess;
}
extern "C" cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, 0); }
extern "C" cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (!s) return fail(cudaErrorInvalidValue);
    if (s->capturing) emu_fatal("cudaStreamDestroy of a stream that is capturing");
    delete s;
    return cudaSuccess;
}
extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    if (emu_capturing(s)) emu_fatal("cudaStreamSynchronize on a capturing stream (the driver refuses it and invalidates "
                                    "the capture)");
    return cudaSuccess;
}
extern "C" cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
extern "C" cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode) {
    if (!s) return fail(cudaErrorStreamCaptureUnsupported); /* the legacy stream cannot capture */
    if (s->capturing) return fail(cudaErrorIllegalState);
    s->capturing = 1;
    s->rec.clear();
    return cudaSuccess;
}
extern "C" cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g) {
    if (!s || !s->capturing) return fail(cudaErrorIllegalState);
    *g = new CUgraph_st{std::move(s->rec)};
    s->rec.clear();
    s->capturing = 0;
    return cudaSuccess;
}
extern "C" cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *st) {
    *st = emu_capturing(s) ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}
extern "C" cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long) {
    *e = new CUgraphExec_st{g->nodes};
    return cudaSuccess;
}
extern "C" cudaError_t cudaGraphDestroy(cudaGraph_t g) {
    delete g;
    return cudaSuccess;
}
extern "C" cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e) {
    delete e;
    return cudaSuccess;
}
extern "C" cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s) {
    if (emu_capturing(s)) emu_fatal("cudaGraphLaunch on a capturing stream (not emulated)");
    for (const node &n : e->nodes) run_node(n);
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int) {
    *e = new CUevent_st();
    return cudaSuccess;
}
extern "C" cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }
extern "C" cudaError_t cudaEventDestroy(cudaEvent_t e) {
    delete e;
    return cudaSuccess;
}
/* Work runs at submission: an event is complete as soon as it is recorded. */
extern "C" cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t) { return e ? cudaSuccess : fail(cudaErrorInvalidValue); }
extern "C" cudaError_t cudaEventSynchronize(cudaEvent_t e) { return e ? cudaSuccess : fail(cudaErrorInvalidValue); }
extern "C" cudaError_t cudaEventQuery(cudaEvent_t e) { return e ? cudaSuccess : fail(cudaErrorInvalidValue); }

/* ---- kernels ---- */

static std::map<const void *, int> g_smem_optin; /* cudaFuncAttributeMaxDynamicSharedMemorySize per kernel */

extern "C" cudaError_t cudaFuncSetAttribute(const void *f, enum cudaFuncAttribute attr, int v) {
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return fail(cudaErrorInvalidValue);
    if (v < 0 || v > (227 << 10)) return fail(cudaErrorInvalidValue);
    g_smem_optin[f] = v;
    return cudaSuccess;
}

void emu_check_smem(const char *kernel, const void *f, size_t smem) {
    if (smem <= (48u << 10)) return;
    auto it = g_smem_optin.find(f);
    if (it == g_smem_optin.end() || smem > (size_t)it->second)
        emu_fatal("kernel %s: %zu bytes of dynamic shared memory exceed 48 KiB and the %d bytes allowed by "
                  "cudaFuncSetAttribute (the launch fails on a GPU)",
                  kernel, smem, it == g_smem_optin.end() ? 0 : it->second);
}

void emu_check_arg(const char *kernel, int i, const void *p) {
    if (!p) return;
    std::lock_guard<std::mutex> l(g_mu);
    const alloc_rec *a = find_locked(p);
    if (!a) emu_fatal("kernel %s: argument %d (%p) is a host pointer, not device memory", kernel, i + 1, p);
}

/* The module's mark (kernels/cuda_module.h tp_cuda_module_emulated): `tpgen info` says so. */
extern "C" __attribute__((visibility("default"))) int tpcuda_emulated(void) { return 1; }
