/* The int8 CPU backend's own functions (cpu_int8.c): x's rounding to int16 and the GEMV choice.
 * The kernels it calls, and the panel layout and epilogue they share, are cpu_int8_kernels.h. */
#ifndef TPGEN_CPU_INT8_H
#define TPGEN_CPU_INT8_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/cpu_int8_kernels.h"

/* q [n] = x rounded on a grid of qmax steps each side: *scale = max|x| / qmax, q = rint(x * (qmax
 * / max|x|)) clamped to +-qmax. x with a NaN or an infinity: *scale NaN, q 0; all zero: *scale 0,
 * q 0. Inlined into its callers' SIMD clones (the same bits in each: an integer max, one product
 * and rint per element). The int8 family's tokens (XQ_MAX) and the int4 kernels' 8-bit groups. */
static inline void cpu_quantize_absmax(int16_t *q, float *scale, const float *x, int n, int qmax) {
    /* max |x| on the bit patterns of |x| (their order is the values' order; +inf and every NaN are
     * above the largest finite): one integer max, which both compilers vectorize (clang did not
     * vectorize the float form) */
    uint32_t mb = 0;
    #pragma omp simd reduction(max : mb)
    for (int k = 0; k < n; k++) {
        uint32_t u;
        memcpy(&u, x + k, sizeof u);
        u &= 0x7fffffffu;
        mb = u > mb ? u : mb;
    }
    const int bad = mb > 0x7f7fffffu; /* a NaN or +-inf */
    float m;
    memcpy(&m, &mb, sizeof m);
    if (bad || !(m > 0.0f)) {
        *scale = bad ? NAN : 0.0f;
        memset(q, 0, (size_t)n * sizeof *q);
        return;
    }
    *scale = m / (float)qmax;
    const float inv = (float)qmax / m, lim = (float)qmax;
    #pragma omp simd
    for (int k = 0; k < n; k++) {
        float r = rintf(x[k] * inv);
        r = r > lim ? lim : r < -lim ? -lim : r;
        q[k] = (int16_t)r;
    }
}

/* xq [T, K] int16 and sx [T]: each token's x rounded on a grid of its own (rows split across
 * n_threads). */
void cpu_int8_quantize_x(int16_t *xq, float *sx, const float *x, int T, int K, int n_threads);

/* cpu_int8.c: the GEMV kernel the backend chose for a [N, K] matrix ("c", "avx2", "avxvnni",
 * "avx512vnni"; amx has no GEMV) and how (measured, cached, forced by TPGEN_CPU_ISA, or the only one / below the
 * measured size): for tests and --verbose. NULL when b is not an int8 backend. */
struct tp_backend;
const char *cpu_int8_gemv_choice(struct tp_backend *b, int N, int K, const char **how);

#endif
