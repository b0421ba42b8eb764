/* GEMM: y[T,N] = (accumulate ? y : 0) + x[T,K] @ W^T + bias, with W in HF layout [N, K].
 *
 * By T:
 *  - T = 1 (a decode step): OpenBLAS sgemv on W, memory-bound, W streamed once.
 *  - 2 <= T <= CPU_FEW_TOKENS (a decode batch): our kernel, gemm_rows: each pair of W rows is
 *    loaded once for every 4 tokens, so W still streams once. OpenBLAS sgemm packs all of W for
 *    a handful of rows and ran at a third of this speed (bench_cpu_ops, T = 8).
 *  - larger T: OpenBLAS sgemm (RowMajor, NoTrans x, Trans W).
 * The threads are ours: OpenBLAS runs single-threaded inside an OpenMP loop over slices of N
 * (or of T when N is narrow). One pool for every op: OpenBLAS's own threads spin after each
 * call and, next to OpenMP's, oversubscribe the cores (measured: element-wise ops between GEMMs
 * ran 10x slower).
 * The bias goes into y before the product so one call with beta = 1 adds both; without bias and
 * accumulate, beta = 0 (y is then never read, so stale or NaN contents do not leak). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/cpu_tune.h"

#define ROWS_TUNE_T 4              /* tokens the rows kernel's tiers are timed at */
#define ROWS_TUNE_MIN (1 << 20)    /* smaller matrices take the highest tier, unmeasured */

/* y [T,N] (f32) := bias broadcast over rows (accumulate = 0) or y += bias (accumulate = 1). */
static void bias_rows(tp_backend *b, float *y, const float *bias, int T, int N, int accumulate) {
    #pragma omp parallel for schedule(static) num_threads(cpu_threads(b)) if ((size_t)T * N >= CPU_PAR_MIN)
    for (int t = 0; t < T; t++) {
        float *yr = y + (size_t)t * N;
        if (accumulate) {
            #pragma omp simd
            for (int n = 0; n < N; n++) yr[n] += bias[n];
        } else {
            memcpy(yr, bias, (size_t)N * sizeof(float));
        }
    }
}

#define CPU_FEW_TOKENS 16

/* The path by T (the file comment); cpu_matmul_kernel names it. */
typedef enum { GEMM_SGEMV, GEMM_ROWS, GEMM_SGEMM } gemm_kind;
static gemm_kind gemm_pick(int T) { return T == 1 ? GEMM_SGEMV : T <= CPU_FEW_TOKENS ? GEMM_ROWS : GEMM_SGEMM; }

/* y[t, n] = (add ? y[t, n] : 0) + x[t,:] . W[n,:] for all t < T and rows n in [n0, n1).
 * Register block: 2 rows of W x 4 tokens, 8 accumulators of 8 lanes. Defined by a macro, once per
 * tier (the same source, compiled for the baseline, for AVX2 + FMA, and as the auto-dispatched
 * clones where the tiers are not x86). */
#define GEMM_ROWS_V8(NAME, ATTR) \
    ATTR static void NAME(float *y, const float *x, const float *W, int T, int N, int K, int n0, int n1, int add) { \
    const int K8 = K & ~7; \
    for (int n = n0; n < n1; n += 2) { \
        const int two = n + 1 < n1; \
        const float *w0 = W + (size_t)n * K, *w1 = two ? w0 + K : w0; \
        for (int t0 = 0; t0 < T; t0 += 4) { \
            const int m = T - t0 < 4 ? T - t0 : 4; /* tokens in this group; missing ones repeat x0 */ \
            const float *x0 = x + (size_t)t0 * K; \
            const float *xs[4] = {x0, m > 1 ? x0 + K : x0, m > 2 ? x0 + 2 * (size_t)K : x0, \
                                  m > 3 ? x0 + 3 * (size_t)K : x0}; \
            const float *x1 = xs[1], *x2 = xs[2], *x3 = xs[3]; \
            v8f a0 = v8_splat(0), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0; \
            for (int k = 0; k < K8; k += 8) { \
                const v8f wa = v8_load(w0 + k), wb = v8_load(w1 + k); \
                v8f xv = v8_load(x0 + k); \
                a0 += wa * xv; \
                b0 += wb * xv; \
                xv = v8_load(x1 + k); \
                a1 += wa * xv; \
                b1 += wb * xv; \
                xv = v8_load(x2 + k); \
                a2 += wa * xv; \
                b2 += wb * xv; \
                xv = v8_load(x3 + k); \
                a3 += wa * xv; \
                b3 += wb * xv; \
            } \
            float ra[4] = {v8_sum(a0), v8_sum(a1), v8_sum(a2), v8_sum(a3)}; \
            float rb[4] = {v8_sum(b0), v8_sum(b1), v8_sum(b2), v8_sum(b3)}; \
            for (int k = K8; k < K; k++) \
                for (int i = 0; i < 4; i++) { \
                    ra[i] += w0[k] * xs[i][k]; \
                    rb[i] += w1[k] * xs[i][k]; \
                } \
            for (int i = 0; i < m; i++) { \
                float *yp = y + (size_t)(t0 + i) * N + n; \
                yp[0] = add ? yp[0] + ra[i] : ra[i]; \
                if (two) yp[1] = add ? yp[1] + rb[i] : rb[i]; \
            } \
        } \
    } \
}
#if !defined(__x86_64__)
GEMM_ROWS_V8(gemm_rows, CPU_SIMD_CLONES)
#else
GEMM_ROWS_V8(gemm_rows_c, )
GEMM_ROWS_V8(gemm_rows_avx2, __attribute__((target("avx2,fma"))))

/* The same with 16-float vectors (AVX-512F): 2 rows x 4 tokens, 8 zmm accumulators. */
typedef float v16f __attribute__((vector_size(64)));
typedef float v16f_u __attribute__((vector_size(64), aligned(4), may_alias));
#define v16_load(p) (*(const v16f_u *)(p))
/* lanes summed as two v8 halves added, then v8_sum's fixed order */
#define v16_sum(v) __extension__({ const v16f v16_ = (v); \
    const v8f h_ = {v16_[0] + v16_[8], v16_[1] + v16_[9], v16_[2] + v16_[10], v16_[3] + v16_[11], \
                    v16_[4] + v16_[12], v16_[5] + v16_[13], v16_[6] + v16_[14], v16_[7] + v16_[15]}; \
    v8_sum(h_); })
__attribute__((target("avx512f,avx512vl,avx2,fma"))) static void gemm_rows_avx512(float *y, const float *x,
                                                                                   const float *W, int T, int N, int K,
                                                                                   int n0, int n1, int add) {
    const int K16 = K & ~15;
    for (int n = n0; n < n1; n += 2) {
        const int two = n + 1 < n1;
        const float *w0 = W + (size_t)n * K, *w1 = two ? w0 + K : w0;
        for (int t0 = 0; t0 < T; t0 += 4) {
            const int m = T - t0 < 4 ? T - t0 : 4;
            const float *x0 = x + (size_t)t0 * K;
            const float *xs[4] = {x0, m > 1 ? x0 + K : x0, m > 2 ? x0 + 2 * (size_t)K : x0,
                                  m > 3 ? x0 + 3 * (size_t)K : x0};
            v16f a[4] = {{0}}, c[4] = {{0}};
            for (int k = 0; k < K16; k += 16) {
                const v16f wa = v16_load(w0 + k), wb = v16_load(w1 + k);
                for (int i = 0; i < 4; i++) {
                    const v16f xv = v16_load(xs[i] + k);
                    a[i] += wa * xv;
                    c[i] += wb * xv;
                }
            }
            float ra[4], rb[4];
            for (int i = 0; i < 4; i++) {
                ra[i] = v16_sum(a[i]);
                rb[i] = v16_sum(c[i]);
            }
            for (int k = K16; k < K; k++)
                for (int i = 0; i < 4; i++) {
                    ra[i] += w0[k] * xs[i][k];
                    rb[i] += w1[k] * xs[i][k];
                }
            for (int i = 0; i < m; i++) {
                float *yp = y + (size_t)(t0 + i) * N + n;
                yp[0] = add ? yp[0] + ra[i] : ra[i];
                if (two) yp[1] = add ? yp[1] + rb[i] : rb[i];
            }
        }
    }
}
#endif

/* ---- the rows kernel's tier (cpu_isa.h): per shape, measured at its first use (tune_rows),
 * or TPGEN_CPU_ISA's cap; elsewhere than x86, the clones ---- */
static const char *const g_rows_names[F32_N_TIER] = {"c", "avx2", "avx512"};
static void rows_run(f32_tier t, float *y, const float *x, const float *W, int T, int N, int K, int n0, int n1,
                     int add) {
#if defined(__x86_64__)
    if (t == F32_TIER_AVX512) gemm_rows_avx512(y, x, W, T, N, K, n0, n1, add);
    else if (t == F32_TIER_AVX2) gemm_rows_avx2(y, x, W, T, N, K, n0, n1, add);
    else gemm_rows_c(y, x, W, T, N, K, n0, n1, add);
#else
    (void)t;
    gemm_rows(y, x, W, T, N, K, n0, n1, add);
#endif
}

/* The highest tier allowed (CPUID capped by TPGEN_CPU_ISA), the candidates (bit per tier), and
 * whether forced. Dies on a bad TPGEN_CPU_ISA (cpu_matmul_check_env reports it at creation). */
static f32_tier rows_cap(unsigned *cands, int *forced) {
    char err[256];
    cpu_tier cap;
    if (cpu_tier_forced(&cap, forced, err, sizeof err)) tp_die_all("%s", err);
    const cpu_features *f = cpu_features_get();
#if defined(__x86_64__)
    const int have[F32_N_TIER] = {1, f->avx2_fma, f->avx512};
#else
    (void)f;
    const int have[F32_N_TIER] = {1, 0, 0};
#endif
    const cpu_tier need[F32_N_TIER] = {CPU_TIER_C, CPU_TIER_AVX2, CPU_TIER_AVX512};
    f32_tier top = F32_TIER_C;
    *cands = 0;
    for (int i = 0; i < F32_N_TIER; i++)
        if (have[i] && need[i] <= cap) {
            *cands |= 1u << i;
            top = (f32_tier)i;
        }
    return top;
}

int cpu_matmul_check_env(char *err, size_t err_size) {
    cpu_tier cap;
    int forced;
    return cpu_tier_forced(&cap, &forced, err, err_size);
}

typedef struct {
    const float *W, *x;
    float *y;
    int N, K;
    f32_tier tier[F32_N_TIER];
} rows_tune_ctx;
static double rows_tune_run(void *ctx, int cand) {
    const rows_tune_ctx *t = ctx;
    rows_run(t->tier[cand], t->y, t->x, t->W, ROWS_TUNE_T, t->N, t->K, 0, t->N, 0);
    return -1.0; /* one thread: cpu_tune times it */
}

/* The tier for [N, K]: the first call of a shape picks it (the rows kernel only runs from 2
 * tokens on, and f32 weights may come from fill_random, which knows no shape: so at first use,
 * not at upload), timing the candidates at ROWS_TUNE_T tokens on W and the call's T rows of x,
 * repeated to ROWS_TUNE_T rows in scratch (the call may have fewer: reading past them overran x). */
static f32_tier rows_tier(tp_backend *b, const float *x, const float *W, int T, int N, int K) {
    tp_cpu *c = (tp_cpu *)b->impl;
    for (int i = 0; i < c->n_rows_shapes; i++)
        if (c->rows_shapes[i].N == N && c->rows_shapes[i].K == K) return (f32_tier)c->rows_shapes[i].tier;
    unsigned cands;
    int forced;
    f32_tier top = rows_cap(&cands, &forced);
    if (forced || (size_t)N * K < ROWS_TUNE_MIN || c->n_rows_shapes == CPU_ROWS_SHAPES) return top;
    float *xt = tp_malloc((size_t)ROWS_TUNE_T * K * sizeof *xt); /* [ROWS_TUNE_T, K] */
    for (int i = 0; i < ROWS_TUNE_T; i++) memcpy(xt + (size_t)i * K, x + (size_t)(i % T) * K, (size_t)K * sizeof *xt);
    rows_tune_ctx t = {.W = W, .x = xt, .N = N, .K = K};
    const char *names[F32_N_TIER];
    int n = 0;
    for (int i = F32_N_TIER - 1; i >= 0; i--)
        if (cands & (1u << i)) {
            t.tier[n] = (f32_tier)i;
            names[n++] = g_rows_names[i];
        }
    t.y = tp_malloc((size_t)ROWS_TUNE_T * N * sizeof *t.y);
    const cpu_tune_key key = {.family = "f32-rows", .kernel_set = "f32k1", .N = N, .K = K, .T = ROWS_TUNE_T, .n_cand = n,
                              .names = names};
    char how[512];
    const f32_tier pick = t.tier[cpu_tune_pick(&key, rows_tune_run, &t, how, sizeof how)];
    free(t.y);
    free(xt);
    c->rows_shapes[c->n_rows_shapes].N = N;
    c->rows_shapes[c->n_rows_shapes].K = K;
    c->rows_shapes[c->n_rows_shapes++].tier = (int)pick;
    c->rows_used |= 1u << pick;
    return pick;
}

const char *cpu_matmul_kernel(tp_backend *b, int T) {
    const gemm_kind k = gemm_pick(T);
    if (k != GEMM_ROWS) return k == GEMM_SGEMV ? "openblas-sgemv-f32" : "openblas-sgemm-f32";
#if defined(__x86_64__)
    tp_cpu *c = (tp_cpu *)b->impl;
    unsigned used = c->rows_used, cands;
    int forced;
    if (!used) used = 1u << rows_cap(&cands, &forced);
    snprintf(c->rows_name, sizeof c->rows_name, "rows-f32-");
    for (int i = 0, first = 1; i < F32_N_TIER; i++)
        if (used & (1u << i)) {
            snprintf(c->rows_name + strlen(c->rows_name), sizeof c->rows_name - strlen(c->rows_name), "%s%s",
                     first ? "" : "+", g_rows_names[i]);
            first = 0;
        }
    return c->rows_name;
#else
    (void)b;
    return strcmp(cpu_clone_isa(), "avx2") == 0 ? "rows-f32-avx2" : "rows-f32-c";
#endif
}

static void gemm_f32(tp_backend *b, float *y, const float *x, const float *W, const float *bias, int T, int N,
                     int K, int accumulate) {
    if (T <= 0 || N <= 0) return;
    float beta = accumulate ? 1.0f : 0.0f;
    if (bias) {
        bias_rows(b, y, bias, T, N, accumulate);
        beta = 1.0f;
    }
    if (K <= 0) { /* empty product: y is bias (or 0), plus y when accumulating */
        if (beta == 0.0f) memset(y, 0, (size_t)T * N * sizeof(float));
        return;
    }
    const int nt = cpu_threads(b);
    const double work = (double)T * N * K;
    const gemm_kind kind = gemm_pick(T);
    if (kind == GEMM_ROWS) { /* slices of N, 2 rows at a time */
        const int add = beta != 0.0f;
        const f32_tier tier = rows_tier(b, x, W, T, N, K);
        ((tp_cpu *)b->impl)->rows_used |= 1u << tier;
        if (nt == 1 || work < 1 << 17) {
            rows_run(tier, y, x, W, T, N, K, 0, N, add);
            return;
        }
        const int chunk = ((N + nt - 1) / nt + 15) & ~15;
        #pragma omp parallel for schedule(static) num_threads(nt)
        for (int n0 = 0; n0 < N; n0 += chunk) rows_run(tier, y, x, W, T, N, K, n0, N - n0 < chunk ? N : n0 + chunk, add);
        return;
    }
    if (nt == 1 || work < 1 << 17) { /* small: one call */
        if (kind == GEMM_SGEMV) cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, 1.0f, W, K, x, 1, beta, y, 1);
        else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, N, K, 1.0f, x, K, W, K, beta, y, N);
        return;
    }
    if (N >= 64 * nt || T < 4 * nt) { /* slices of N (rows of W): each thread streams its own rows */
        const int chunk = ((N + nt - 1) / nt + 15) & ~15;
        #pragma omp parallel for schedule(static) num_threads(nt)
        for (int n0 = 0; n0 < N; n0 += chunk) {
            const int nn = N - n0 < chunk ? N - n0 : chunk;
            if (kind == GEMM_SGEMV)
                cblas_sgemv(CblasRowMajor, CblasNoTrans, nn, K, 1.0f, W + (size_t)n0 * K, K, x, 1, beta, y + n0, 1);
            else
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, nn, K, 1.0f, x, K, W + (size_t)n0 * K, K,
                            beta, y + n0, N);
        }
    } else { /* narrow N, many tokens: slices of T */
        const int chunk = (T + nt - 1) / nt;
        #pragma omp parallel for schedule(static) num_threads(nt)
        for (int t0 = 0; t0 < T; t0 += chunk) {
            const int tt = T - t0 < chunk ? T - t0 : chunk;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, tt, N, K, 1.0f, x + (size_t)t0 * K, K, W, K, beta,
                        y + (size_t)t0 * N, N);
        }
    }
}

void cpu_matmul(tp_backend *b, void *y, const void *x, const void *W, const void *bias, int T, int N, int K,
                int accumulate) {
    gemm_f32(b, (float *)y, (const float *)x, (const float *)W, (const float *)bias, T, N, K, accumulate);
}

void cpu_matmul_f32out(tp_backend *b, float *y, const void *x, const void *W, const void *bias, int T, int N,
                       int K) {
    gemm_f32(b, y, (const float *)x, (const float *)W, (const float *)bias, T, N, K, 0);
}
