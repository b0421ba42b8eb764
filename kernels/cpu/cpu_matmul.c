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
#include <string.h>

#include "kernels/cpu/cpu_internal.h"

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

const char *cpu_matmul_kernel(int T) {
    const gemm_kind k = gemm_pick(T);
    if (k == GEMM_ROWS) return strcmp(cpu_clone_isa(), "avx2") == 0 ? "rows-f32-avx2" : "rows-f32-c";
    return k == GEMM_SGEMV ? "openblas-sgemv-f32" : "openblas-sgemm-f32";
}

/* y[t, n] = (add ? y[t, n] : 0) + x[t,:] . W[n,:] for all t < T and rows n in [n0, n1).
 * Register block: 2 rows of W x 4 tokens, 8 accumulators of 8 lanes. */
CPU_SIMD_CLONES
static void gemm_rows(float *y, const float *x, const float *W, int T, int N, int K, int n0, int n1, int add) {
    const int K8 = K & ~7;
    for (int n = n0; n < n1; n += 2) {
        const int two = n + 1 < n1;
        const float *w0 = W + (size_t)n * K, *w1 = two ? w0 + K : w0;
        for (int t0 = 0; t0 < T; t0 += 4) {
            const int m = T - t0 < 4 ? T - t0 : 4; /* tokens in this group; missing ones repeat x0 */
            const float *x0 = x + (size_t)t0 * K;
            const float *xs[4] = {x0, m > 1 ? x0 + K : x0, m > 2 ? x0 + 2 * (size_t)K : x0,
                                  m > 3 ? x0 + 3 * (size_t)K : x0};
            const float *x1 = xs[1], *x2 = xs[2], *x3 = xs[3];
            v8f a0 = v8_splat(0), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
            for (int k = 0; k < K8; k += 8) {
                const v8f wa = v8_load(w0 + k), wb = v8_load(w1 + k);
                v8f xv = v8_load(x0 + k);
                a0 += wa * xv;
                b0 += wb * xv;
                xv = v8_load(x1 + k);
                a1 += wa * xv;
                b1 += wb * xv;
                xv = v8_load(x2 + k);
                a2 += wa * xv;
                b2 += wb * xv;
                xv = v8_load(x3 + k);
                a3 += wa * xv;
                b3 += wb * xv;
            }
            float ra[4] = {v8_sum(a0), v8_sum(a1), v8_sum(a2), v8_sum(a3)};
            float rb[4] = {v8_sum(b0), v8_sum(b1), v8_sum(b2), v8_sum(b3)};
            for (int k = K8; k < K; k++)
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
        if (nt == 1 || work < 1 << 17) {
            gemm_rows(y, x, W, T, N, K, 0, N, add);
            return;
        }
        const int chunk = ((N + nt - 1) / nt + 15) & ~15;
        #pragma omp parallel for schedule(static) num_threads(nt)
        for (int n0 = 0; n0 < N; n0 += chunk) gemm_rows(y, x, W, T, N, K, n0, N - n0 < chunk ? N : n0 + chunk, add);
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
