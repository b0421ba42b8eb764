/* GEMM: y[T,N] = (accumulate ? y : 0) + x[T,K] @ W^T + bias, with W in HF layout [N, K].
 *
 * OpenBLAS does the arithmetic: sgemm (RowMajor, NoTrans x, Trans W) for T > 1, sgemv on W for
 * T = 1 (a decode step: memory-bound, W streamed once). The threads are ours: OpenBLAS runs
 * single-threaded inside an OpenMP loop over slices of N (or of T when N is narrow). One pool
 * for every op: OpenBLAS's own threads spin after each call and, next to OpenMP's, oversubscribe
 * the cores (measured: element-wise ops between GEMMs ran 10x slower).
 * The bias goes into y before the product so one BLAS call with beta = 1 adds both; without
 * bias and accumulate, beta = 0 (BLAS then never reads y, so stale or NaN contents do not leak). */
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
    if (nt == 1 || work < 1 << 17) { /* small: one call */
        if (T == 1) cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, 1.0f, W, K, x, 1, beta, y, 1);
        else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, N, K, 1.0f, x, K, W, K, beta, y, N);
        return;
    }
    if (N >= 64 * nt || T < 4 * nt) { /* slices of N (rows of W): each thread streams its own rows */
        const int chunk = ((N + nt - 1) / nt + 15) & ~15;
        #pragma omp parallel for schedule(static) num_threads(nt)
        for (int n0 = 0; n0 < N; n0 += chunk) {
            const int nn = N - n0 < chunk ? N - n0 : chunk;
            if (T == 1)
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
