/* The CUDA backend: creation, device memory, host<->device copies and weight upload.
 *
 * Activations, weights and the KV cache are F16 or BF16 (b->act) in device memory; every op
 * accumulates in f32. Copies go through two pinned staging buffers used in turn, each guarded by
 * an event, so the host fills one while the DMA engine drains the other (weights of a 16B model
 * stream from the mmapped checkpoint at the speed of the host memcpy). Uploads of another dtype
 * (F32 checkpoints, or BF16 into an F16 backend) land raw in a device buffer and are converted
 * there by a kernel: the host never converts. The ops live in the other files of this folder. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cuda/cuda_internal.h"

#define STAGE_BYTES TPC_STAGE_BYTES         /* per staging buffer (sizes: cuda_plan.h) */
#define CUBLAS_WS_BYTES TPC_CUBLAS_WS_BYTES /* cuBLAS workspace */

static const double MiB = 1048576.0;

/* Host waits on the stream are timestamped, so the NCCL watchdog (comm/comm_nccl.c) can tell a
 * step stuck in a collective (a CUDA graph replays its all-reduces where the communicator does
 * not see them) from one that is merely running. */
static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
#define TPC_WAIT(c, call)                                                                          \
    do {                                                                                           \
        __atomic_store_n(&(c)->wait_since_ns, now_ns(), __ATOMIC_RELAXED);                         \
        cudaError_t w_ = (call);                                                                   \
        __atomic_store_n(&(c)->wait_since_ns, (int64_t)0, __ATOMIC_RELAXED);                       \
        CUDA_CHECK(w_);                                                                            \
    } while (0)

double tp_cuda_host_wait_seconds(tp_backend *b) {
    const int64_t t = __atomic_load_n(&tpc(b)->wait_since_ns, __ATOMIC_RELAXED);
    return t ? (double)(now_ns() - t) * 1e-9 : 0.0;
}

void tpc_no_capture(tp_cuda *c, const char *what) {
    if (c->capturing)
        tp_die("cuda backend: %s cannot run inside a CUDA graph capture (graph_begin(%d) .. graph_end): only "
               "ops and the NCCL all-reduce may be captured; with --comm mpi and TP > 1 the all-reduce copies "
               "to the host, so decode graphs need --comm nccl",
               what, c->capture_key);
}

float *tpc_attn_part(tp_cuda *c, size_t bytes) {
    if (bytes <= c->attn_part_bytes) return c->attn_part;
    if (c->scratch_reserved)
        tp_die("cuda attention: this step needs %.1f MiB of split-K partials but the memory plan reserved %.1f MiB "
               "for steps of <= %d tokens, %d sequences, context <= %d (rank %d): a step beyond the limits given "
               "at start",
               bytes / MiB, c->attn_part_bytes / MiB, c->limits.max_tokens, c->limits.max_seqs, c->limits.max_ctx,
               c->rank);
    size_t nb = c->attn_part_bytes * 2;
    if (nb < bytes) nb = bytes;
    void *p = NULL;
    /* No plan (op tests): grow. cudaMalloc is allowed during a relaxed-mode capture
     * (cuda_graphs.cu); the old buffer may be referenced by graphs already made, so it is kept
     * until destroy. */
    cudaError_t e = cudaMalloc(&p, nb);
    if (e != cudaSuccess) {
        size_t fr = 0, tot = 0;
        cudaGetLastError();
        cudaMemGetInfo(&fr, &tot);
        tp_die("out of device memory: attention partials need %.1f MiB, %.1f MiB free on device %d (rank %d)",
               nb / MiB, fr / MiB, c->device, c->rank);
    }
    if (c->attn_part) {
        if (c->n_graveyard == TPC_MAX_GRAVEYARD)
            tp_die("cuda backend: attention scratch regrown more than %d times", TPC_MAX_GRAVEYARD);
        c->graveyard[c->n_graveyard++] = c->attn_part;
    }
    c->attn_part = (float *)p;
    c->attn_part_bytes = nb;
    return c->attn_part;
}

/* ---- the memory plan's scratch (sizes: cuda_plan.c, shared with the CPU test of the plan) ---- */

static void cuda_plan_scratch(tp_backend *b, const tp_step_limits *lim, tp_mem_plan *plan) {
    tpc_plan_scratch(lim, tpc(b)->sm_count, plan);
}

static void cuda_reserve_scratch(tp_backend *b, const tp_step_limits *lim) {
    tp_cuda *c = tpc(b);
    tpc_no_capture(c, "reserve_scratch");
    if (c->n_graphs) tp_die("internal: reserve_scratch after CUDA graphs were captured");
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
    if (c->attn_part) CUDA_CHECK(cudaFree(c->attn_part));
    if (c->lg_dev) CUDA_CHECK(cudaFree(c->lg_dev));
    tpc_scratch s;
    tpc_scratch_reserve(b, lim, c->sm_count, &s);
    c->attn_part = (float *)s.attn_part;
    c->attn_part_bytes = s.attn_part_bytes;
    c->lg_dev = s.lg;
    c->lg_bytes = s.lg_bytes;
    c->limits = *lim;
    c->scratch_reserved = 1;
}

/* ---- memory ---- */

static void *cuda_alloc(tp_backend *b, size_t bytes, const char *what) {
    tp_cuda *c = tpc(b);
    tpc_no_capture(c, "alloc");
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 256);
    if (e != cudaSuccess) {
        size_t fr = 0, tot = 0;
        cudaGetLastError(); /* allocation failures are not sticky; clear it */
        cudaMemGetInfo(&fr, &tot);
        tp_die("out of device memory: %s needs %.1f MiB, %.1f MiB free on device %d (rank %d; %.1f MiB total; %s)",
               what ? what : "(unnamed buffer)", bytes / MiB, fr / MiB, c->device, c->rank, tot / MiB,
               cudaGetErrorString(e));
    }
    return p;
}

static void cuda_free(tp_backend *b, void *p) {
    if (!p) return;
    tpc_no_capture(tpc(b), "free");
    CUDA_CHECK(cudaFree(p));
}

static size_t cuda_mem_available(tp_backend *b) {
    (void)b;
    size_t fr = 0, tot = 0;
    CUDA_CHECK(cudaMemGetInfo(&fr, &tot));
    return fr;
}

/* Device-to-device, ordered on the stream like an op (capturable). */
static void cuda_copy(tp_backend *b, void *dst, const void *src, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, tpc(b)->stream));
}

static void cuda_sync(tp_backend *b) {
    tp_cuda *c = tpc(b);
    TPC_WAIT(c, cudaStreamSynchronize(c->stream));
    CUDA_CHECK(cudaGetLastError());
}

static void *cuda_host_alloc(tp_backend *b, size_t bytes, const char *what) {
    void *p = NULL;
    cudaError_t e = cudaMallocHost(&p, bytes ? bytes : 64);
    if (e != cudaSuccess) {
        cudaGetLastError();
        tp_die("cannot allocate %.1f MiB of pinned host memory for %s (rank %d): %s", bytes / MiB,
               what ? what : "(unnamed buffer)", tpc(b)->rank, cudaGetErrorString(e));
    }
    return p;
}

static void cuda_host_free(tp_backend *b, void *p) {
    (void)b;
    if (p) CUDA_CHECK(cudaFreeHost(p));
}

/* ---- copies ---- */

/* Room for n <= stage_bytes bytes in the current staging buffer (or the other one, once the
 * device has finished copying out of it). Returns the buffer index; *off is the offset. The
 * caller records stage_ev[index] after issuing its copy. */
static int stage_take(tp_cuda *c, size_t n, size_t *off) {
    if (c->stage_used + n > c->stage_bytes) {
        c->stage_cur ^= 1;
        TPC_WAIT(c, cudaEventSynchronize(c->stage_ev[c->stage_cur]));
        c->stage_used = 0;
    }
    *off = c->stage_used;
    c->stage_used += (n + 255) & ~(size_t)255;
    return c->stage_cur;
}

/* Large copies out of memory that is already pinned (the engine's weight staging buffer, from
 * host_alloc) skip the extra host memcpy: one DMA, waited for before returning because the
 * caller may refill its buffer as soon as we return. */
static int is_pinned(const void *p) {
    cudaPointerAttributes at;
    if (cudaPointerGetAttributes(&at, p) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return at.type == cudaMemoryTypeHost;
}

static void cuda_to_device(tp_backend *b, void *dst, const void *src_host, size_t bytes) {
    tp_cuda *c = tpc(b);
    tpc_no_capture(c, "to_device");
    if (bytes >= ((size_t)1 << 20) && is_pinned(src_host)) {
        CUDA_CHECK(cudaMemcpyAsync(dst, src_host, bytes, cudaMemcpyHostToDevice, c->stream));
        TPC_WAIT(c, cudaStreamSynchronize(c->stream));
        return;
    }
    for (size_t done = 0; done < bytes;) {
        size_t n = bytes - done < c->stage_bytes ? bytes - done : c->stage_bytes, off;
        int i = stage_take(c, n, &off);
        memcpy((char *)c->stage[i] + off, (const char *)src_host + done, n);
        CUDA_CHECK(cudaMemcpyAsync((char *)dst + done, (char *)c->stage[i] + off, n, cudaMemcpyHostToDevice,
                                   c->stream));
        CUDA_CHECK(cudaEventRecord(c->stage_ev[i], c->stream));
        done += n;
    }
}

/* Synchronous. Chunk i+1 is in flight while the host copies chunk i out of the other buffer. */
static void cuda_to_host(tp_backend *b, void *dst_host, const void *src, size_t bytes) {
    tp_cuda *c = tpc(b);
    tpc_no_capture(c, "to_host");
    if (bytes == 0) return;
    size_t n_chunks = (bytes + c->stage_bytes - 1) / c->stage_bytes;
    for (size_t k = 0; k <= n_chunks; k++) {
        if (k < n_chunks) { /* issue chunk k */
            size_t off = k * c->stage_bytes, n = bytes - off < c->stage_bytes ? bytes - off : c->stage_bytes;
            int i = (int)(k & 1);
            CUDA_CHECK(cudaMemcpyAsync(c->stage[i], (const char *)src + off, n, cudaMemcpyDeviceToHost, c->stream));
            CUDA_CHECK(cudaEventRecord(c->stage_ev[i], c->stream));
        }
        if (k > 0) { /* drain chunk k-1 */
            size_t off = (k - 1) * c->stage_bytes, n = bytes - off < c->stage_bytes ? bytes - off : c->stage_bytes;
            int i = (int)((k - 1) & 1);
            TPC_WAIT(c, cudaEventSynchronize(c->stage_ev[i]));
            memcpy((char *)dst_host + off, c->stage[i], n);
        }
    }
    CUDA_CHECK(cudaGetLastError());
    c->stage_used = c->stage_bytes; /* both buffers were reused above: next take switches and waits */
}

void tpc_upload_convert(tp_cuda *c, void *dst, const void *src, tp_dtype st, size_t n) {
    tp_dtype act = c->base.act;
    if (st == act) {
        cuda_to_device(&c->base, dst, src, n * tp_dtype_size(act));
        return;
    }
    tpc_no_capture(c, "upload");
    const size_t ss = tp_dtype_size(st), as = tp_dtype_size(act), chunk = c->stage_bytes / ss;
    for (size_t done = 0; done < n; done += chunk) {
        size_t m = n - done < chunk ? n - done : chunk, off;
        int i = stage_take(c, m * ss, &off);
        void *raw = (char *)c->conv[i] + off;
        memcpy((char *)c->stage[i] + off, (const char *)src + done * ss, m * ss);
        CUDA_CHECK(cudaMemcpyAsync(raw, (char *)c->stage[i] + off, m * ss, cudaMemcpyHostToDevice, c->stream));
        tpc_convert(c, (char *)dst + done * as, act, raw, st, m);
        CUDA_CHECK(cudaEventRecord(c->stage_ev[i], c->stream)); /* guards stage[i] and conv[i] */
    }
}

static void cuda_upload(tp_backend *b, void *dst, const void *src_host, tp_dtype st, size_t n) {
    tpc_upload_convert(tpc(b), dst, src_host, st, n);
}

/* ---- lifetime ---- */

/* kernel_name: the choices matmul_t (cuda_matmul.cu) and attention_t (cuda_attention.cu) make,
 * for a model's GEMMs (K % 8 == 0, arena pointers 16-byte aligned: the GEMV's conditions hold).
 * Above gemv_max_t: cuBLAS (cublasLt with the bias/GELU epilogue for fc_in and fc_out,
 * cublasGemmEx for the GEMMs without a bias and the f32 logits). Attention: the split-K decode
 * kernel when tpc_attn_is_decode (T queries of one sequence), the tiled prefill kernel otherwise. */
const char *tpc_kernel_name(tp_backend *b, tp_op_class op, int T, int D) {
    const int f16 = b->act == TP_F16;
    if (op == TP_OP_ATTENTION) {
        if (!tpc_attn_is_decode(T, 1)) return f16 ? "prefill-f16" : "prefill-bf16";
        if (D % 8 == 0) return f16 ? "decode-vec8-f16" : "decode-vec8-bf16";
        return f16 ? "decode-f16" : "decode-bf16";
    }
    if (T <= tpc(b)->gemv_max_t) return f16 ? "gemv-f16" : "gemv-bf16";
    if (op == TP_OP_LOGITS) return f16 ? "cublas-gemmex-f16" : "cublas-gemmex-bf16";
    return f16 ? "cublas-f16" : "cublas-bf16";
}

static void cuda_destroy(tp_backend *b) {
    tp_cuda *c = tpc(b);
    if (!c) return;
    CUDA_CHECK(cudaSetDevice(c->device));
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
    tpc_graphs_destroy(c);
    for (int i = 0; i < 2; i++) {
        CUDA_CHECK(cudaEventDestroy(c->stage_ev[i]));
        CUDA_CHECK(cudaFreeHost(c->stage[i]));
        CUDA_CHECK(cudaFree(c->conv[i]));
    }
    for (int i = 0; i < c->n_graveyard; i++) CUDA_CHECK(cudaFree(c->graveyard[i]));
    if (c->attn_part) CUDA_CHECK(cudaFree(c->attn_part));
    if (c->lg_dev) CUDA_CHECK(cudaFree(c->lg_dev));
    tpc_matmul_destroy(c);
    CUBLAS_CHECK(cublasDestroy(c->cublas));
    CUDA_CHECK(cudaFree(c->cublas_ws));
    CUDA_CHECK(cudaStreamDestroy(c->stream));
    free(c);
}

cudaStream_t tp_cuda_stream(tp_backend *b) {
    if (!b || !b->name || strcmp(b->name, "cuda") != 0)
        tp_die("internal: tp_cuda_stream on the %s backend", b && b->name ? b->name : "(null)");
    return tpc(b)->stream;
}

int tp_cuda_device(tp_backend *b) {
    if (!b || !b->name || strcmp(b->name, "cuda") != 0)
        tp_die("internal: tp_cuda_device on the %s backend", b && b->name ? b->name : "(null)");
    return tpc(b)->device;
}

/* The module's entry points (kernels/cuda_module.h): extern "C" through cuda_internal.h. */
TP_CUDA_EXPORT const char *tpcuda_interface(void) { return TPGEN_CUDA_IFACE; }

TP_CUDA_EXPORT int tpcuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* no driver / no device: not an error for this question */
        return 0;
    }
    return n;
}

TP_CUDA_EXPORT tp_backend *tpcuda_backend_create(int device, tp_dtype act, char *err, size_t err_size) {
    const int rank = tp_log_rank();
    if (act != TP_F16 && act != TP_BF16) {
        snprintf(err, err_size, "the CUDA backend computes in F16 or BF16 (--dtype f16|bf16), not %s",
                 tp_dtype_name(act));
        return NULL;
    }
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        cudaGetLastError();
        snprintf(err, err_size, "rank %d: no CUDA GPU is visible (cudaGetDeviceCount: %s)", rank,
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return NULL;
    }
    if (device < 0 || device >= n) {
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        snprintf(err, err_size,
                 "rank %d on this node has local rank %d but only %d GPU%s visible (CUDA_VISIBLE_DEVICES=%s); "
                 "start at most %d ranks per node",
                 rank, device, n, n == 1 ? " is" : "s are", vis ? vis : "unset", n);
        return NULL;
    }
    CUDA_CHECK(cudaSetDevice(device));
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    if (prop.major < 8) {
        snprintf(err, err_size,
                 "rank %d: GPU %d (%s) has compute capability %d.%d; the CUDA backend needs 8.0 or newer "
                 "(BF16 tensor cores; this build has code for sm_80 and sm_90)",
                 rank, device, prop.name, prop.major, prop.minor);
        return NULL;
    }

    tp_cuda *c = (tp_cuda *)calloc(1, sizeof *c);
    if (!c) tp_die("out of host memory creating the CUDA backend");
    c->device = device;
    c->rank = rank;
    c->sm_count = prop.multiProcessorCount;
    CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasCreate(&c->cublas));
    CUBLAS_CHECK(cublasSetStream(c->cublas, c->stream));
    /* Keep every reduction in f32, including split-K reductions of F16/BF16 outputs. */
    CUBLAS_CHECK(cublasSetMathMode(c->cublas, (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                                                             CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
    CUDA_CHECK(cudaMalloc(&c->cublas_ws, CUBLAS_WS_BYTES));
    CUBLAS_CHECK(cublasSetWorkspace(c->cublas, c->cublas_ws, CUBLAS_WS_BYTES));

    c->stage_bytes = STAGE_BYTES;
    for (int i = 0; i < 2; i++) {
        CUDA_CHECK(cudaMallocHost(&c->stage[i], c->stage_bytes));
        CUDA_CHECK(cudaMalloc(&c->conv[i], c->stage_bytes));
        CUDA_CHECK(cudaEventCreateWithFlags(&c->stage_ev[i], cudaEventDisableTiming));
    }
    /* attn_part and lg_dev: reserve_scratch (from the memory plan), or on demand without one */

    c->gemv_max_t = 4;
    const char *gm = getenv("TPGEN_GEMV_MAX_T");
    if (gm && *gm) {
        int v = atoi(gm);
        if (v < 0 || v > 4) tp_die("TPGEN_GEMV_MAX_T=%s: must be 0..4 (0 = always cuBLAS)", gm);
        c->gemv_max_t = v;
    }
    tpc_attention_init(c);
    tpc_matmul_init(c);

    tp_backend *b = &c->base;
    b->name = "cuda";
    b->act = act;
    b->alloc = cuda_alloc;
    b->free = cuda_free;
    b->mem_available = cuda_mem_available;
    b->to_device = cuda_to_device;
    b->to_host = cuda_to_host;
    b->sync = cuda_sync;
    b->copy = cuda_copy;
    b->host_alloc = cuda_host_alloc;
    b->host_free = cuda_host_free;
    b->plan_scratch = cuda_plan_scratch;
    b->reserve_scratch = cuda_reserve_scratch;
    b->upload = cuda_upload;
    b->matrix_bytes = tpc_matrix_bytes;
    b->matrix_upload = tpc_matrix_upload;
    b->fill_random = tpc_fill_random;
    b->embed = tpc_embed;
    b->layernorm = tpc_layernorm;
    b->matmul = tpc_matmul;
    b->matmul_f32out = tpc_matmul_f32out;
    b->matmul_gelu = tpc_matmul_gelu;
    b->gelu_new = tpc_gelu_new;
    b->rmsnorm = tpc_rmsnorm;
    b->silu_mul = tpc_silu_mul;
    b->add = tpc_add;
    b->gather_rows = tpc_gather_rows;
    b->rotary_kv_write = tpc_rotary_kv_write;
    b->attention = tpc_attention;
    b->logits_stats = tpc_logits_stats;
    b->graph_launch = tpc_graph_launch;
    b->graph_begin = tpc_graph_begin;
    b->graph_end = tpc_graph_end;
    b->kernel_name = tpc_kernel_name;
    b->destroy = cuda_destroy;
    b->impl = c;
    return b;
}
