/* Element-wise and per-row ops: embedding gather, layer norm, RMS norm, gelu_new, SiLU-gated
 * product, add, row gather. */
#include <math.h>
#include <string.h>

#include "kernels/common/tp_act.h"
#include "kernels/cpu/cpu_internal.h"

void cpu_embed(tp_backend *b, void *x, const void *wte, const int32_t *ids, int T, int E) {
    float *xo = (float *)x;
    const float *w = (const float *)wte;
    #pragma omp parallel for schedule(static) num_threads(cpu_threads(b)) if ((size_t)T * E >= CPU_PAR_MIN)
    for (int t = 0; t < T; t++) memcpy(xo + (size_t)t * E, w + (size_t)ids[t] * E, (size_t)E * sizeof(float));
}

/* Mean and biased variance in double (two passes: no cancellation), then y in f32. HF computes
 * them in f32; the double sums are at least as exact and keep the CPU a clean reference. */
void cpu_layernorm(tp_backend *b, void *y, const void *x, const void *g, const void *beta, int T, int E,
                   float eps) {
    float *yo = (float *)y;
    const float *xi = (const float *)x, *gg = (const float *)g, *bb = (const float *)beta;
    #pragma omp parallel for schedule(static) num_threads(cpu_threads(b)) if ((size_t)T * E >= CPU_PAR_MIN)
    for (int t = 0; t < T; t++) {
        const float *xr = xi + (size_t)t * E;
        float *yr = yo + (size_t)t * E;
        double s = 0.0;
        #pragma omp simd reduction(+ : s)
        for (int e = 0; e < E; e++) s += xr[e];
        const double mean = s / E;
        double v = 0.0;
        #pragma omp simd reduction(+ : v)
        for (int e = 0; e < E; e++) {
            double d = xr[e] - mean;
            v += d * d;
        }
        const float m = (float)mean, rstd = (float)(1.0 / sqrt(v / E + (double)eps));
        #pragma omp simd
        for (int e = 0; e < E; e++) yr[e] = (xr[e] - m) * rstd * gg[e] + bb[e];
    }
}

/* HF LlamaRMSNorm: x * rsqrt(mean(x^2) + eps) in f32, then weight * that (in f32 both products
 * round to f32 as HF's do). The mean of squares summed in double, as the layer norm's statistics. */
void cpu_rmsnorm(tp_backend *b, void *y, const void *x, const void *g, int T, int E, float eps) {
    float *yo = (float *)y;
    const float *xi = (const float *)x, *gg = (const float *)g;
    #pragma omp parallel for schedule(static) num_threads(cpu_threads(b)) if ((size_t)T * E >= CPU_PAR_MIN)
    for (int t = 0; t < T; t++) {
        const float *xr = xi + (size_t)t * E;
        float *yr = yo + (size_t)t * E;
        double s = 0.0;
        #pragma omp simd reduction(+ : s)
        for (int e = 0; e < E; e++) s += (double)xr[e] * xr[e];
        const float r = (float)(1.0 / sqrt(s / E + (double)eps));
        #pragma omp simd
        for (int e = 0; e < E; e++) yr[e] = gg[e] * (xr[e] * r);
    }
}

/* y[t, i] = silu(gu[t, i]) * gu[t, N + i] (tp_silu_mul, kernels/common/tp_act.h). */
CPU_SIMD_CLONES void cpu_silu_mul(tp_backend *b, void *y, const void *gu, int T, int N) {
    float *yo = (float *)y;
    const float *in = (const float *)gu;
    #pragma omp parallel for schedule(static) num_threads(cpu_threads(b)) if ((size_t)T * N >= CPU_PAR_MIN)
    for (int t = 0; t < T; t++) {
        const float *gr = in + (size_t)t * 2 * N, *ur = gr + N;
        float *yr = yo + (size_t)t * N;
        #pragma omp simd
        for (int i = 0; i < N; i++) yr[i] = tp_silu_mul(gr[i], ur[i]);
    }
}

/* gelu_new: kernels/common/tp_act.h (the exp form of HF's tanh formula, shared with the CUDA
 * backend; agrees with HF's f32 tanh form to f32 rounding). */
CPU_SIMD_CLONES void cpu_gelu_new(tp_backend *b, void *x, size_t n) {
    float *v = (float *)x;
    #pragma omp parallel for simd schedule(static) num_threads(cpu_threads(b)) if (n >= CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++) v[i] = tp_gelu_new(v[i]);
}

/* fc_in + GELU: f32 throughout on the CPU, so fusing changes nothing; two passes. */
void cpu_matmul_gelu(tp_backend *b, void *y, const void *x, const void *W, const void *bias, int T, int N, int K) {
    cpu_matmul(b, y, x, W, bias, T, N, K, 0);
    cpu_gelu_new(b, y, (size_t)T * N);
}

void cpu_add(tp_backend *b, void *y, const void *x, size_t n) {
    float *yo = (float *)y;
    const float *xi = (const float *)x;
    #pragma omp parallel for simd schedule(static) num_threads(cpu_threads(b)) if (n >= CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++) yo[i] += xi[i];
}

/* Rows are independent unless dst == src (the engine compacting rows in place, where
 * rows[i] >= i): then copy in order on one thread, which is correct for that case. */
void cpu_gather_rows(tp_backend *b, void *dst, const void *src, const int32_t *rows_host, int n, int E) {
    float *d = (float *)dst;
    const float *s = (const float *)src;
    const size_t row = (size_t)E * sizeof(float);
    if (d == s) {
        for (int i = 0; i < n; i++)
            if (rows_host[i] != i) memmove(d + (size_t)i * E, s + (size_t)rows_host[i] * E, row);
        return;
    }
    #pragma omp parallel for schedule(static) num_threads(cpu_threads(b)) if ((size_t)n * E >= CPU_PAR_MIN)
    for (int i = 0; i < n; i++) memcpy(d + (size_t)i * E, s + (size_t)rows_host[i] * E, row);
}
