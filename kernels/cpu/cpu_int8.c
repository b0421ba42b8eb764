/* int8 weights on the CPU backend (--weights int8): activations, KV cache, embedding, norms and
 * biases stay f32 (the f32 backend's ops); every Linear weight is int8 with an f32 scale per
 * output row (kernels/common/tp_quant.h), quantized at load from the checkpoint's dtype, each
 * rank its own shard only.
 *
 * Matrix buffer: q [N, K] int8 (HF layout, K contiguous), then at a 64-byte-aligned offset the
 * scales [N] f32. y[t, n] = scale[n] * sum_k q[n, k] x[t, k] (+ y) (+ bias) (GELU), the sum in f32.
 *
 * GEMMs by T (tokens of the step):
 *  - T <= few_tokens (decode batches): GEMV kernels that read each int8 row once per step for
 *    every token (8 rows x 1 token at T = 1, 2 rows x 4 tokens otherwise), q widened to f32 in
 *    registers (vpmovsxbd + vcvtdq2ps), FMA on f32 x. Chosen by CPUID:
 *      avx2: the kernel built for x86-64-v3 (AVX2 + FMA);
 *      c:    the same C built for the baseline (any x86-64, or another CPU).
 *    There is no VNNI path: VNNI multiplies int8 by int8, which would quantize the activations
 *    too (not weight-only), and this machine has no AVX-512 to test one on.
 *  - larger T (batched steps, prefill): per thread, panels of 256 rows widened to f32 (exact
 *    integers), OpenBLAS sgemm into an f32 tile, then the scale and the epilogue: the GEMM is
 *    compute-bound there, so the widening is a small share of it.
 * TPGEN_INT8_ISA=avx2|c and TPGEN_INT8_GEMM=gemv|blas force a path (the op tests run each). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "kernels/common/tp_act.h"
#include "kernels/common/tp_quant.h"
#include "kernels/cpu/cpu_internal.h"

typedef enum { I8_ISA_C = 0, I8_ISA_AVX2 = 1 } i8_isa;
typedef enum { I8_GEMM_AUTO = 0, I8_GEMM_GEMV = 1, I8_GEMM_BLAS = 2 } i8_gemm;

typedef struct {
    int n_threads; /* first member: cpu_threads() of cpu_internal.h reads it */
    int verbose;
    i8_isa isa;
    i8_gemm force;
    int few_tokens;   /* T <= this: the GEMV kernels */
    unsigned printed; /* bit per (op, path) already reported under --verbose */
} tp_cpu_int8;

static tp_cpu_int8 *i8_impl(tp_backend *b) { return (tp_cpu_int8 *)b->impl; }

static const char *isa_name(i8_isa isa) {
    return isa == I8_ISA_AVX2 ? "avx2 (int8 widened to f32 in registers, FMA)" : "c (portable fallback)";
}

static void report(tp_backend *b, unsigned bit, const char *op, const char *path) {
    tp_cpu_int8 *c = i8_impl(b);
    if (!c->verbose || (c->printed & (1u << bit))) return;
    c->printed |= 1u << bit;
    tp_log0("cpu int8: %s -> %s\n", op, path);
}

/* ---- matrix layout ---- */
size_t cpu_int8_q_bytes(int N, int K) { return ((size_t)N * (size_t)K + 63) & ~(size_t)63; }
static const float *scales_of(const void *W, int N, int K) { return (const float *)((const char *)W + cpu_int8_q_bytes(N, K)); }

static size_t i8_matrix_bytes(tp_backend *b, int rows, int cols) {
    (void)b;
    return cpu_int8_q_bytes(rows, cols) + (size_t)rows * sizeof(float);
}

/* Row r of src (type st) -> f32 tmp [cols]. */
static void row_f32(float *tmp, const void *src, tp_dtype st, int r, int cols) {
    tp_convert_to_f32(tmp, (const char *)src + (size_t)r * cols * tp_dtype_size(st), st, (size_t)cols);
}

void cpu_int8_quantize_row(int8_t *q, float *scale, const float *w, int cols, float absmax) {
    const float s = tp_q8_scale(absmax);
    *scale = s;
    for (int k = 0; k < cols; k++) q[k] = tp_q8_quantize(w[k], s);
}

static void i8_matrix_upload_rowmax(tp_backend *b, void *dst, const void *src_host, tp_dtype st, int rows, int cols,
                                    const float *row_absmax) {
    int8_t *q = dst;
    float *sc = (float *)((char *)dst + cpu_int8_q_bytes(rows, cols));
    #pragma omp parallel num_threads(cpu_threads(b)) if ((size_t)rows * cols >= CPU_PAR_MIN)
    {
        float *tmp = tp_malloc((size_t)(cols > 0 ? cols : 1) * sizeof(float));
        #pragma omp for schedule(static)
        for (int r = 0; r < rows; r++) {
            row_f32(tmp, src_host, st, r, cols);
            const float m = row_absmax ? row_absmax[r] : tp_q8_absmax(tmp, cols);
            cpu_int8_quantize_row(q + (size_t)r * cols, &sc[r], tmp, cols, m);
        }
        free(tmp);
    }
}

static void i8_matrix_upload(tp_backend *b, void *dst, const void *src_host, tp_dtype st, int rows, int cols) {
    i8_matrix_upload_rowmax(b, dst, src_host, st, rows, cols, NULL);
}

/* ---- epilogue ---- */
typedef struct {
    float *y;          /* [T, N] */
    const float *bias; /* [N] or NULL */
    const float *scale; /* [N] */
    int N, accumulate, gelu;
} epi;

static inline void epi_store(const epi *e, int t, int n, float sum) {
    float v = sum * e->scale[n];
    float *yp = e->y + (size_t)t * e->N + n;
    if (e->accumulate) v += *yp;
    if (e->bias) v += e->bias[n];
    if (e->gelu) v = tp_gelu_new(v);
    *yp = v;
}

/* ---- GEMV kernels: rows [n0, n1) of q for all T tokens ----
 * cpu_int8_rows.inc holds the kernel; it is included twice, for AVX2 (int8 -> f32 by
 * vpmovsxbd + vcvtdq2ps intrinsics: GCC 12 scalarizes the same conversion written with vector
 * types) and for the baseline (plain C, which any CPU runs). */
typedef int8_t v8i8 __attribute__((vector_size(8)));
V8_INLINE v8f v8_i8_c(const int8_t *p) { /* 8 int8 -> 8 f32 (exact) */
    v8i8 h;
    __builtin_memcpy(&h, p, sizeof h);
    return __builtin_convertvector(h, v8f);
}
#define I8_ROWS rows_c
#define I8_TARGET
#define I8_INLINE V8_INLINE
#define I8_LOADW v8_i8_c
#include "kernels/cpu/cpu_int8_rows.inc"

#if defined(__x86_64__)
#include <immintrin.h>
#undef I8_ROWS
#undef I8_TARGET
#undef I8_INLINE
#undef I8_LOADW
#define I8_ROWS rows_avx2
#define I8_TARGET __attribute__((target("arch=x86-64-v3")))
#define I8_INLINE static inline __attribute__((always_inline, target("arch=x86-64-v3")))
I8_INLINE v8f v8_i8_avx2(const int8_t *p) {
    const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
    v8f r;
    __builtin_memcpy(&r, &f, sizeof r);
    return r;
}
#define I8_LOADW v8_i8_avx2
#include "kernels/cpu/cpu_int8_rows.inc"
#endif

static void gemv_path(tp_backend *b, const float *x, const int8_t *W, int T, int N, int K, const epi *e) {
    tp_cpu_int8 *c = i8_impl(b);
    const int nt = c->n_threads;
    const int chunk = ((N + nt - 1) / nt + 15) & ~15;
    #pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && (double)T * N * K >= 1 << 17)
    for (int n0 = 0; n0 < N; n0 += chunk) {
        const int n1 = N - n0 < chunk ? N : n0 + chunk;
#if defined(__x86_64__)
        if (c->isa == I8_ISA_AVX2) rows_avx2(x, W, T, K, n0, n1, e);
        else
#endif
            rows_c(x, W, T, K, n0, n1, e);
    }
}

CPU_SIMD_CLONES static void widen(float *dst, const int8_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = (float)src[i];
}

/* Batched: per thread, PANEL rows of q widened to f32, sgemm into an f32 tile, the epilogue
 * (which applies the row scales). 256 rows: as the bf16 backend's panels (cpu_bf16_gemm.c). */
#define PANEL 256
static void blas_path(tp_backend *b, const float *x, const int8_t *W, int T, int N, int K, const epi *e) {
    const int nt = cpu_threads(b);
    #pragma omp parallel num_threads(nt)
    {
        float *wf = tp_malloc((size_t)PANEL * K * sizeof(float)), *tile = tp_malloc((size_t)T * PANEL * sizeof(float));
        #pragma omp for schedule(dynamic, 1)
        for (int n0 = 0; n0 < N; n0 += PANEL) {
            const int nn = N - n0 < PANEL ? N - n0 : PANEL;
            widen(wf, W + (size_t)n0 * K, (size_t)nn * K);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, nn, K, 1.0f, x, K, wf, K, 0.0f, tile, PANEL);
            for (int t = 0; t < T; t++)
                for (int j = 0; j < nn; j++) epi_store(e, t, n0 + j, tile[(size_t)t * PANEL + j]);
        }
        free(wf);
        free(tile);
    }
}

static void gemm(tp_backend *b, float *y, const float *x, const void *W, const float *bias, int T, int N, int K,
                 int accumulate, int gelu, unsigned bit, const char *op) {
    if (T <= 0 || N <= 0) return;
    tp_cpu_int8 *c = i8_impl(b);
    const epi e = {y, bias, scales_of(W, N, K), N, accumulate, gelu};
    char path[160];
    if (K <= 0) {
        for (int t = 0; t < T; t++)
            for (int n = 0; n < N; n++) epi_store(&e, t, n, 0.0f);
        return;
    }
    const int gemv = c->force == I8_GEMM_GEMV || (c->force == I8_GEMM_AUTO && T <= c->few_tokens);
    if (gemv) {
        snprintf(path, sizeof path, "GEMV %s (T <= %d)", isa_name(c->isa), c->few_tokens);
        report(b, bit, op, path);
        gemv_path(b, x, W, T, N, K, &e);
    } else {
        snprintf(path, sizeof path, "OpenBLAS sgemm on f32 panels of the int8 rows (T > %d)", c->few_tokens);
        report(b, bit + 1, op, path);
        blas_path(b, x, W, T, N, K, &e);
    }
}

static void i8_matmul(tp_backend *b, void *y, const void *x, const void *W, const void *bias, int T, int N, int K,
                      int accumulate) {
    gemm(b, y, x, W, bias, T, N, K, accumulate, 0, 0, "matmul");
}
static void i8_matmul_f32out(tp_backend *b, float *y, const void *x, const void *W, const void *bias, int T, int N,
                             int K) {
    gemm(b, y, x, W, bias, T, N, K, 0, 0, 2, "matmul_f32out (logits)");
}
static void i8_matmul_gelu(tp_backend *b, void *y, const void *x, const void *W, const void *bias, int T, int N,
                           int K) {
    gemm(b, y, x, W, bias, T, N, K, 0, 1, 4, "matmul_gelu (fc_in)");
}

static i8_isa isa_pick(char *err, size_t err_size) {
    i8_isa best = I8_ISA_C;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) best = I8_ISA_AVX2;
#endif
    const char *e = getenv("TPGEN_INT8_ISA");
    if (!e || !*e) return best;
    i8_isa want;
    if (strcmp(e, "avx2") == 0) want = I8_ISA_AVX2;
    else if (strcmp(e, "c") == 0) want = I8_ISA_C;
    else {
        snprintf(err, err_size, "TPGEN_INT8_ISA=%s: expected avx2 or c", e);
        return (i8_isa)-1;
    }
    if (want > best) {
        snprintf(err, err_size, "TPGEN_INT8_ISA=%s: this CPU does not support it (best here: %s)", e, isa_name(best));
        return (i8_isa)-1;
    }
    return want;
}

int tp_backend_cpu_use_int8(tp_backend *b, int verbose, char *err, size_t err_size) {
    if (b->act != TP_F32) {
        snprintf(err, err_size, "--weights int8 on the CPU runs with f32 activations: it cannot be combined with "
                                "--dtype %s (drop --dtype, or use --dtype f32)", b->act == TP_BF16 ? "bf16" : "f16");
        return -1;
    }
    const i8_isa isa = isa_pick(err, err_size);
    if ((int)isa < 0) return -1;
    i8_gemm force = I8_GEMM_AUTO;
    const char *g = getenv("TPGEN_INT8_GEMM");
    if (g && *g) {
        if (strcmp(g, "gemv") == 0) force = I8_GEMM_GEMV;
        else if (strcmp(g, "blas") == 0) force = I8_GEMM_BLAS;
        else {
            snprintf(err, err_size, "TPGEN_INT8_GEMM=%s: expected gemv or blas", g);
            return -1;
        }
    }
    tp_cpu_int8 *c = tp_calloc(1, sizeof *c);
    c->n_threads = cpu_threads(b);
    c->verbose = verbose;
    c->isa = isa;
    c->force = force;
    const char *ft = getenv("TPGEN_INT8_GEMV_MAX_T"); /* the GEMV / panel-GEMM crossover */
    c->few_tokens = ft && *ft ? atoi(ft) : 16;
    free(b->impl);
    b->impl = c;
    if (verbose)
        tp_log0("cpu int8: weights int8 with f32 row scales; GEMV (T <= %d) -> %s; batched (T > %d) -> OpenBLAS "
                "sgemm on widened panels%s\n",
                c->few_tokens, isa_name(isa), c->few_tokens,
                force == I8_GEMM_GEMV ? " (TPGEN_INT8_GEMM=gemv: GEMV for every T)"
                : force == I8_GEMM_BLAS ? " (TPGEN_INT8_GEMM=blas: panels for every T)" : "");
    b->weights = "int8";
    b->matrix_bytes = i8_matrix_bytes;
    b->matrix_upload = i8_matrix_upload;
    b->matrix_upload_rowmax = i8_matrix_upload_rowmax;
    b->matrix_fill_random = cpu_int8_fill_random;
    b->matmul = i8_matmul;
    b->matmul_f32out = i8_matmul_f32out;
    b->matmul_gelu = i8_matmul_gelu;
    return 0;
}
