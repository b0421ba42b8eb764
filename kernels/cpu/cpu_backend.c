/* The CPU backend: creation, memory, copies and weight upload.
 *
 * "Device" memory is host memory, 64-byte aligned (a cache line, and the widest vector loads).
 * Everything is f32: upload and matrix_upload convert F16/BF16 checkpoints once at load, and
 * Linear weights keep their HF layout [N, K] (matmul hands them to cblas as W^T). */
#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "util/log.h"
#include "kernels/cpu/cpu_attn.h"
#include "util/threads.h"
#include "kernels/cpu/cpu_internal.h"

/* OpenBLAS's own thread count (declared in its cblas.h; repeated here so this file does not
 * depend on which cblas.h the include path finds first). Set to 1: matmul runs OpenBLAS inside
 * our OpenMP threads (see cpu_matmul.c). */
void openblas_set_num_threads(int num_threads);

/* Large buffers (weights, KV cache) are 2 MiB aligned and asked to use transparent huge pages:
 * the KV cache is read a few hundred bytes per 4 KiB page (one head's row of a slot), so 4 KiB
 * pages cost a TLB miss per row. madvise is advice: failure (no THP) changes nothing. */
#define CPU_HUGE_MIN ((size_t)4 << 20)
#define CPU_HUGE_ALIGN ((size_t)2 << 20)

static void *cpu_alloc(tp_backend *b, size_t bytes, const char *what) {
    (void)b;
    void *p = NULL;
    const size_t align = bytes >= CPU_HUGE_MIN ? CPU_HUGE_ALIGN : 64;
    const size_t rounded = (bytes + align - 1) & ~(align - 1);
    int rc = posix_memalign(&p, align, rounded ? rounded : align);
    if (rc != 0 || !p)
        tp_die("cpu backend: cannot allocate %zu bytes (%.1f MiB) for %s: %s", bytes, bytes / 1048576.0,
               what ? what : "(unnamed buffer)", strerror(rc ? rc : ENOMEM));
#ifdef MADV_HUGEPAGE
    if (align == CPU_HUGE_ALIGN) (void)madvise(p, rounded, MADV_HUGEPAGE);
#endif
    return p;
}

static void cpu_free(tp_backend *b, void *p) {
    (void)b;
    free(p);
}

/* MemAvailable from /proc/meminfo (the kernel's estimate of what can be allocated without
 * swapping); 0 when it cannot be read. */
static size_t cpu_mem_available(tp_backend *b) {
    (void)b;
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long v;
        if (sscanf(line, "MemAvailable: %llu kB", &v) == 1) {
            kb = (size_t)v;
            break;
        }
    }
    fclose(f);
    return kb * 1024;
}

static void cpu_copy(tp_backend *b, void *dst, const void *src, size_t bytes) {
    (void)b;
    if (bytes) memcpy(dst, src, bytes);
}

static void cpu_sync(tp_backend *b) { (void)b; }

/* n elements of st -> f32, in parallel chunks (a 16B-model matrix is ~150M elements). */
static void cpu_upload(tp_backend *b, void *dst, const void *src_host, tp_dtype st, size_t n) {
    const size_t chunk = 1 << 20;
    const size_t n_chunks = (n + chunk - 1) / chunk;
    const size_t es = tp_dtype_size(st);
    #pragma omp parallel for schedule(static) num_threads(cpu_threads(b)) if (n_chunks > 1)
    for (size_t c = 0; c < n_chunks; c++) {
        size_t i0 = c * chunk, m = n - i0 < chunk ? n - i0 : chunk;
        tp_convert_to_f32((float *)dst + i0, (const char *)src_host + i0 * es, st, m);
    }
}

static size_t cpu_matrix_bytes(tp_backend *b, int rows, int cols) {
    (void)b;
    return (size_t)rows * (size_t)cols * sizeof(float);
}

/* [rows, cols] = HF [N, K], kept as is. */
static void cpu_matrix_upload(tp_backend *b, void *dst, const void *src_host, tp_dtype st, int rows, int cols) {
    cpu_upload(b, dst, src_host, st, (size_t)rows * (size_t)cols);
}

const char *cpu_kernel_name(tp_backend *b, tp_op_class op, int T, int D) {
    (void)D;
    return op == TP_OP_ATTENTION ? cpu_attention_kernel(T, b->kv == TP_BF16) : cpu_matmul_kernel(b, T);
}

static void cpu_destroy(tp_backend *b) {
    if (!b) return;
    free(b->impl);
    free(b);
}

tp_backend *tp_backend_cpu_create(int n_threads) {
    if (n_threads <= 0) n_threads = omp_get_num_procs();
    if (n_threads <= 0) n_threads = 1;
    omp_set_num_threads(n_threads);
    if (!tp_threads_user_blas()) openblas_set_num_threads(1); /* the user's OPENBLAS_NUM_THREADS wins */

    tp_backend *b = tp_calloc(1, sizeof *b);
    tp_cpu *c = tp_calloc(1, sizeof *c);
    c->n_threads = n_threads;
    b->impl = c;
    b->name = "cpu";
    b->act = TP_F32;
    b->kv = TP_F32;
    b->alloc = cpu_alloc;
    b->free = cpu_free;
    b->mem_available = cpu_mem_available;
    b->to_device = cpu_copy;
    b->to_host = cpu_copy;
    b->sync = cpu_sync;
    b->copy = cpu_copy;
    b->host_alloc = cpu_alloc;
    b->host_free = cpu_free;
    b->upload = cpu_upload;
    b->matrix_bytes = cpu_matrix_bytes;
    b->matrix_upload = cpu_matrix_upload;
    b->fill_random = cpu_fill_random;
    b->embed = cpu_embed;
    b->layernorm = cpu_layernorm;
    b->matmul = cpu_matmul;
    b->matmul_f32out = cpu_matmul_f32out;
    b->matmul_gelu = cpu_matmul_gelu;
    b->gelu_new = cpu_gelu_new;
    b->rmsnorm = cpu_rmsnorm;
    b->silu_mul = cpu_silu_mul;
    b->add = cpu_add;
    b->gather_rows = cpu_gather_rows;
    b->rotary_kv_write = cpu_rotary_kv_write;
    b->attention = cpu_attention;
    b->attention_tune = cpu_attention_tune; /* the bf16 and int8 backends keep it */
    (void)cpu_attn_isa_pick(); /* a bad TPGEN_CPU_ATTN ends the run here, before any step */
    char isa_err[256];
    if (cpu_matmul_check_env(isa_err, sizeof isa_err)) tp_die_all("%s", isa_err); /* TPGEN_CPU_ISA, likewise */
    b->logits_stats = cpu_logits_stats;
    /* graph_launch/begin/end stay NULL (calloc): the CPU replays no graphs */
    b->kernel_name = cpu_kernel_name;
    b->destroy = cpu_destroy;
    return b;
}
