/* int8 weights on the CPU backend (--weights int8): activations, KV cache, embedding, norms and
 * biases stay f32 (the f32 backend's ops); every Linear weight is int8 with an f32 scale per
 * output row (kernels/common/tp_quant.h), quantized at load from the checkpoint's dtype, each
 * rank its own shard only.
 *
 * Matrix buffer: q [N, K] int8 (HF layout, K contiguous), then at a 64-byte-aligned offset the
 * scales [N] f32. y[t, n] = scale[n] * sum_k q[n, k] x[t, k] (+ y) (+ bias) (GELU): the sum exact
 * in integers on x rounded to int16 (GEMV, GEMM), or in f32 (panels); the epilogue in f32.
 *
 * GEMMs by T (tokens of the step):
 *  - T <= few_tokens (decode batches): GEMV kernels that read each int8 row once per step for
 *    every token, in exact integer arithmetic on x rounded to int16 per token (see below).
 *    Chosen by CPUID:
 *      avx2: vpmovsxbw + vpmaddwd + vpaddd, a row at a time for up to 4 tokens;
 *      c:    plain C, any CPU; the same bits (integer sums are exact in any order).
 *    There is no VNNI path: this machine has no AVX-512 or AVX-VNNI to test one on (VNNI's
 *    vpdpwssd would replace the vpmaddwd + vpaddd pair).
 *  - larger T (batches, prefill), AVX2: the int8 GEMM (cpu_int8_gemm.c, docs/KERNELS.md): the
 *    same int16 x and exact integer sums in 6-token x 16-row tiles, so the same bits as the GEMV.
 *  - larger T without AVX2: per thread, panels of up to 1024 rows widened to f32 (exact
 *    integers), OpenBLAS sgemm on f32 x into an f32 tile, then the scale and the epilogue (x is
 *    not rounded there); ~0.8x the f32 sgemm (x packed again per panel).
 * TPGEN_INT8_ISA=avx2|c and TPGEN_INT8_GEMM=gemv|gemm|blas force a path (the op tests run each). */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "kernels/common/tp_act.h"
#include "kernels/common/tp_quant.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/cpu_int8.h"

typedef enum { I8_ISA_C = 0, I8_ISA_AVX2 = 1 } i8_isa;
typedef enum { I8_GEMM_AUTO = 0, I8_GEMM_GEMV = 1, I8_GEMM_BLAS = 2, I8_GEMM_INT = 3 } i8_gemm;

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
    return isa == I8_ISA_AVX2 ? "avx2 (vpmaddwd on int8 rows and int16 x)" : "c (portable fallback, same integer sums)";
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

/* ---- GEMV kernels: rows [n0, n1) of q for all T tokens ----
 * Integer dot products: each token's x is rounded to int16 on a grid of its own, sx = max|x| /
 * 16383 (a relative step of 2^-14 of the row's largest value: ~100x finer than the weights'
 * int8 grid, so the outputs move by ~1% of the int8 error), then sum_k q xq is exact in
 * integers and y = sum * sx * scale. AVX2 does 16 products a step with vpmovsxbw + vpmaddwd +
 * vpaddd, half the instructions of widening q to f32 for FMAs (measured 1.6x at T = 1).
 * Being exact, the sum is the same bits on the avx2 and the c path, in any order. int32 lanes
 * hold KC / 16 vpmaddwd results of at most 2 * 127 * 16383 each (< 2^31 for KC = 4096), then
 * move to int64. Non-finite x: sx is NaN and so are the outputs, as in f32. */
#define I8_KC 4096

/* xq[t, :] and sx[t] for every token. The loops are `omp simd` (a max is exact in any order):
 * gcc left the plain ones scalar, 8% of an int8 prefill (perf). */
CPU_SIMD_CLONES static void quantize_rows(int16_t *xq, float *sx, const float *x, int t0, int t1, int K) {
    for (int t = t0; t < t1; t++) {
        const float *xr = x + (size_t)t * K;
        int16_t *qr = xq + (size_t)t * K;
        /* max |x| on the bit patterns of |x| (their order is the values' order; +inf and every
         * NaN are above the largest finite): one integer max, which both compilers vectorize
         * (clang did not vectorize the float form) */
        uint32_t mb = 0;
        #pragma omp simd reduction(max : mb)
        for (int k = 0; k < K; k++) {
            uint32_t u;
            memcpy(&u, xr + k, sizeof u);
            u &= 0x7fffffffu;
            mb = u > mb ? u : mb;
        }
        const int bad = mb > 0x7f7fffffu; /* a NaN or +-inf */
        float m;
        memcpy(&m, &mb, sizeof m);
        if (bad || !(m > 0.0f)) {
            sx[t] = bad ? NAN : 0.0f;
            memset(qr, 0, (size_t)K * sizeof *qr);
            continue;
        }
        sx[t] = m / (float)XQ_MAX;
        const float inv = (float)XQ_MAX / m;
        #pragma omp simd
        for (int k = 0; k < K; k++) {
            float r = rintf(xr[k] * inv);
            r = r > XQ_MAX ? XQ_MAX : r < -XQ_MAX ? -XQ_MAX : r;
            qr[k] = (int16_t)r;
        }
    }
}

/* Rows split across the threads (a prefill's x is T * K: one thread alone took 5% of it). */
void cpu_int8_quantize_x(int16_t *xq, float *sx, const float *x, int T, int K, int n_threads) {
    const int per = (T + n_threads - 1) / n_threads;
    #pragma omp parallel for schedule(static) num_threads(n_threads) if (n_threads > 1 && T > 1 && (size_t)T * K >= CPU_PAR_MIN)
    for (int t0 = 0; t0 < T; t0 += per) quantize_rows(xq, sx, x, t0, T - t0 < per ? T : t0 + per, K);
}

/* c: one (row, token) at a time, exact int64 sums. */
static void rows_c(const int16_t *xq, const float *sx, const int8_t *W, int T, int K, int n0, int n1, const cpu_i8_epi *e) {
    for (int n = n0; n < n1; n++) {
        const int8_t *w = W + (size_t)n * K;
        for (int t = 0; t < T; t++) {
            const int16_t *xr = xq + (size_t)t * K;
            int64_t acc = 0;
            for (int k = 0; k < K; k++) acc += (int32_t)w[k] * xr[k];
            cpu_i8_store_int(e, t, n, acc, sx);
        }
    }
}

#if defined(__x86_64__)
#include <immintrin.h>
#define AVX2_FN static inline __attribute__((always_inline, target("avx2,fma")))
#define I8_UNROLL _Pragma("GCC unroll 8")

AVX2_FN int64_t hsum_epi32(__m256i v) { /* in int64: 8 lanes of up to 2^31 */
    const __m256i s = _mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(v)),
                                       _mm256_cvtepi32_epi64(_mm256_extracti128_si256(v, 1)));
    const __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    return _mm_cvtsi128_si64(s2) + _mm_extract_epi64(s2, 1);
}

/* s[t] += q row w . xq row xs[t] over k in [0, K16), MT tokens. One row at a time: a single
 * sequential stream, which the hardware prefetcher follows at the full read rate (8 rows
 * interleaved read at half of it, measured), plus a software prefetch 1 KiB ahead. UK partial
 * sums per token over successive 16-element steps keep MT * UK >= 4 vpmaddwd chains in flight. */
AVX2_FN void row_avx2(const int16_t *const *xs, const int8_t *w, int K16, const int MT, int64_t s[4]) {
    const int UK = MT == 1 ? 4 : MT == 2 ? 2 : 1;
    for (int k0 = 0; k0 < K16; k0 += I8_KC) {
        const int k1 = K16 - k0 < I8_KC ? K16 : k0 + I8_KC;
        __m256i acc[4][4];
        I8_UNROLL for (int u = 0; u < UK; u++)
            I8_UNROLL for (int t = 0; t < MT; t++) acc[u][t] = _mm256_setzero_si256();
        int k = k0;
        for (; k + 16 * UK <= k1; k += 16 * UK) {
            _mm_prefetch((const char *)(w + k + 1024), _MM_HINT_T0);
            I8_UNROLL for (int u = 0; u < UK; u++) {
                const __m256i wv = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + k + 16 * u)));
                I8_UNROLL for (int t = 0; t < MT; t++)
                    acc[u][t] = _mm256_add_epi32(
                        acc[u][t], _mm256_madd_epi16(wv, _mm256_loadu_si256((const __m256i *)(xs[t] + k + 16 * u))));
            }
        }
        for (; k < k1; k += 16) {
            const __m256i wv = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + k)));
            I8_UNROLL for (int t = 0; t < MT; t++)
                acc[0][t] = _mm256_add_epi32(acc[0][t], _mm256_madd_epi16(wv, _mm256_loadu_si256((const __m256i *)(xs[t] + k))));
        }
        I8_UNROLL for (int u = 0; u < UK; u++)
            I8_UNROLL for (int t = 0; t < MT; t++) s[t] += hsum_epi32(acc[u][t]);
    }
}

/* avx2: each row once per step, for up to 4 tokens at a time. */
__attribute__((target("avx2,fma"))) static void rows_avx2(const int16_t *xq, const float *sx, const int8_t *W, int T,
                                                          int K, int n0, int n1, const cpu_i8_epi *e) {
    const int K16 = K & ~15;
    for (int n = n0; n < n1; n++) {
        const int8_t *w = W + (size_t)n * K;
        for (int t0 = 0; t0 < T; t0 += 4) {
            const int m = T - t0 < 4 ? T - t0 : 4;
            const int16_t *x0 = xq + (size_t)t0 * K;
            const int16_t *xs[4] = {x0, m > 1 ? x0 + K : x0, m > 2 ? x0 + 2 * (size_t)K : x0,
                                    m > 3 ? x0 + 3 * (size_t)K : x0};
            int64_t s[4] = {0, 0, 0, 0};
            switch (m) {
            case 4: row_avx2(xs, w, K16, 4, s); break;
            case 3: row_avx2(xs, w, K16, 3, s); break;
            case 2: row_avx2(xs, w, K16, 2, s); break;
            default: row_avx2(xs, w, K16, 1, s); break;
            }
            for (int i = 0; i < m; i++) {
                for (int k = K16; k < K; k++) s[i] += (int32_t)w[k] * xs[i][k];
                cpu_i8_store_int(e, t0 + i, n, s[i], sx);
            }
        }
    }
}
#endif

static void gemv_path(tp_backend *b, const int16_t *xq, const float *sx, const int8_t *W, int T, int N, int K,
                      const cpu_i8_epi *e) {
    tp_cpu_int8 *c = i8_impl(b);
    const int nt = c->n_threads;
    const int chunk = ((N + nt - 1) / nt + 15) & ~15;
    #pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && (double)T * N * K >= 1 << 17)
    for (int n0 = 0; n0 < N; n0 += chunk) {
        const int n1 = N - n0 < chunk ? N : n0 + chunk;
#if defined(__x86_64__)
        if (c->isa == I8_ISA_AVX2) rows_avx2(xq, sx, W, T, K, n0, n1, e);
        else
#endif
            rows_c(xq, sx, W, T, K, n0, n1, e);
    }
}

CPU_SIMD_CLONES static void widen_int8(float *dst, const int8_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = (float)src[i];
}

/* Batched: per thread, panels of q rows widened to f32, sgemm into an f32 tile, the epilogue
 * (which applies the row scales). Up to 1024 rows a panel (4 Mi floats at most): OpenBLAS packs
 * x again for every call, and 256-row panels ran 5% slower at T = 512. */
static void blas_path(tp_backend *b, const float *x, const int8_t *W, int T, int N, int K, const cpu_i8_epi *e) {
    const int nt = cpu_threads(b);
    int P = (int)(((size_t)4 << 20) / (size_t)K) & ~63;
    P = P < 64 ? 64 : P > 1024 ? 1024 : P;
    const int even = ((N + nt - 1) / nt + 63) & ~63; /* at least one panel per thread */
    if (P > even) P = even;
    #pragma omp parallel num_threads(nt)
    {
        float *wf = tp_malloc((size_t)P * K * sizeof(float)), *tile = tp_malloc((size_t)T * P * sizeof(float));
        #pragma omp for schedule(dynamic, 1)
        for (int n0 = 0; n0 < N; n0 += P) {
            const int nn = N - n0 < P ? N - n0 : P;
            widen_int8(wf, W + (size_t)n0 * K, (size_t)nn * K);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, nn, K, 1.0f, x, K, wf, K, 0.0f, tile, P);
            for (int t = 0; t < T; t++) cpu_i8_epi_row(e, t, n0, nn, tile + (size_t)t * P);
        }
        free(wf);
        free(tile);
    }
}

/* The path at T tokens (the file comment); i8_kernel_name names it. */
static i8_gemm path_pick(const tp_cpu_int8 *c, int T) {
    if (c->force) return c->force;
    if (T <= c->few_tokens) return I8_GEMM_GEMV;
    return c->isa == I8_ISA_AVX2 ? I8_GEMM_INT : I8_GEMM_BLAS;
}

static const char *i8_kernel_name(tp_backend *b, tp_op_class op, int T, int D) {
    if (op == TP_OP_ATTENTION) return cpu_kernel_name(b, op, T, D); /* activations and KV stay f32 */
    const tp_cpu_int8 *c = i8_impl(b);
    switch (path_pick(c, T)) {
    case I8_GEMM_BLAS: return "openblas-sgemm-int8-panels";
    case I8_GEMM_INT: return "gemm-int8-avx2";
    default: return c->isa == I8_ISA_AVX2 ? "gemv-int8-avx2" : "gemv-int8-c";
    }
}

static void gemm(tp_backend *b, float *y, const float *x, const void *W, const float *bias, int T, int N, int K,
                 int accumulate, int gelu, unsigned bit, const char *op) {
    if (T <= 0 || N <= 0) return;
    tp_cpu_int8 *c = i8_impl(b);
    const cpu_i8_epi e = {y, bias, scales_of(W, N, K), N, accumulate, gelu};
    char path[160];
    if (K <= 0) {
        for (int t = 0; t < T; t++)
            for (int n = 0; n < N; n++) cpu_i8_epi_store(&e, t, n, 0.0f);
        return;
    }
    const i8_gemm pk = path_pick(c, T);
    if (pk == I8_GEMM_GEMV || pk == I8_GEMM_INT) {
        const char *how = pk == I8_GEMM_GEMV ? "gemv" : "gemm";
        if (pk == I8_GEMM_GEMV) snprintf(path, sizeof path, "GEMV %s", isa_name(c->isa));
        else snprintf(path, sizeof path, "GEMM avx2 (vpmaddwd, 6 tokens x 16 rows a tile, the GEMV's bits)");
        if (c->force) snprintf(path + strlen(path), sizeof path - strlen(path), " (TPGEN_INT8_GEMM=%s)", how);
        else snprintf(path + strlen(path), sizeof path - strlen(path), " (T %s %d)", pk == I8_GEMM_GEMV ? "<=" : ">",
                      c->few_tokens);
        report(b, pk == I8_GEMM_GEMV ? bit : bit + 8, op, path);
        int16_t *xq = tp_malloc((size_t)T * K * sizeof *xq + 64); /* + 64: the GEMM's 32-bit reads past K */
        float *sx = tp_malloc((size_t)T * sizeof *sx);
        cpu_int8_quantize_x(xq, sx, x, T, K, c->n_threads);
        if (pk == I8_GEMM_GEMV) gemv_path(b, xq, sx, W, T, N, K, &e);
        else cpu_int8_gemm_avx2(xq, sx, W, T, N, K, &e, c->n_threads);
        free(xq);
        free(sx);
    } else {
        if (c->force) snprintf(path, sizeof path, "OpenBLAS sgemm on f32 panels of the int8 rows (TPGEN_INT8_GEMM=blas)");
        else snprintf(path, sizeof path, "OpenBLAS sgemm on f32 panels of the int8 rows (T > %d)", c->few_tokens);
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
        else if (strcmp(g, "gemm") == 0) force = I8_GEMM_INT;
        else if (strcmp(g, "blas") == 0) force = I8_GEMM_BLAS;
        else {
            snprintf(err, err_size, "TPGEN_INT8_GEMM=%s: expected gemv, gemm or blas", g);
            return -1;
        }
        if (force == I8_GEMM_INT && isa != I8_ISA_AVX2) {
            snprintf(err, err_size, "TPGEN_INT8_GEMM=gemm: the int8 GEMM kernel needs AVX2 (the ISA here is %s)",
                     isa_name(isa));
            return -1;
        }
    }
    tp_cpu_int8 *c = tp_calloc(1, sizeof *c);
    c->n_threads = cpu_threads(b);
    c->verbose = verbose;
    c->isa = isa;
    c->force = force;
    const char *ft = getenv("TPGEN_INT8_GEMV_MAX_T"); /* the GEMV / panel-GEMM crossover */
    c->few_tokens = ft && *ft ? atoi(ft) : 16; /* Zen 3: the GEMV ahead at T = 16 (bench_int8_gemm), the GEMM at 32 (bench) */
    free(b->impl);
    b->impl = c;
    if (verbose)
        tp_log0("cpu int8: weights int8 with f32 row scales; GEMV (T <= %d) -> %s; batched (T > %d) -> %s%s\n",
                c->few_tokens, isa_name(isa), c->few_tokens,
                isa == I8_ISA_AVX2 ? "the int8 GEMM (vpmaddwd)" : "OpenBLAS sgemm on widened panels",
                force == I8_GEMM_GEMV   ? " (TPGEN_INT8_GEMM=gemv: GEMV for every T)"
                : force == I8_GEMM_INT  ? " (TPGEN_INT8_GEMM=gemm: the int8 GEMM for every T)"
                : force == I8_GEMM_BLAS ? " (TPGEN_INT8_GEMM=blas: panels for every T)" : "");
    b->weights = "int8";
    b->matrix_bytes = i8_matrix_bytes;
    b->matrix_upload = i8_matrix_upload;
    b->matrix_upload_rowmax = i8_matrix_upload_rowmax;
    b->matrix_fill_random = cpu_int8_fill_random;
    b->matmul = i8_matmul;
    b->matmul_f32out = i8_matmul_f32out;
    b->matmul_gelu = i8_matmul_gelu;
    b->kernel_name = i8_kernel_name;
    return 0;
}
