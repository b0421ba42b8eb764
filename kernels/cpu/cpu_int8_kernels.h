/* What the int8 GEMV (cpu_int8.c) and GEMM (cpu_int8_gemm.c, _vnni.c, _amx.c) kernels share: x rounded to int16
 * per token, and the epilogue. Both compute y[t, n] = epi(((float)sum_k q[n, k] xq[t, k]) * sx[t])
 * with the integer sum exact, so every kernel gives the same bits. */
/* The kernel files include this header and nothing of cpu_int8.c, which calls them: cpu_int8.c's
 * own functions are declared in cpu_int8.h (tests/layering/check_cycles.sh). */
#ifndef TPGEN_CPU_INT8_KERNELS_H
#define TPGEN_CPU_INT8_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/common/tp_act.h"

/* x's int16 grid: sx = max|x| / XQ_MAX per token (cpu_int8.c, "GEMV kernels"). */
#define XQ_MAX 16383

/* ---- q's layout: panels of CPU_I8_NR rows, k pairs interleaved ----
 * Panel P holds rows [16 P, 16 P + 16) of q [N, K] as [KP][16][2] int8, KP = ceil(K / 2):
 * byte p * 32 + 2 j + h of the panel is q[16 P + j, 2 p + h], zero past N and past K. A k pair
 * of the panel's 16 rows is 32 contiguous bytes: what the GEMM's micro-kernel reads per step
 * (vpmovsxbw to int16, vpmaddwd against x's pair), so no kernel repacks q per call. The panels
 * follow each other, then the scales [N] f32 at a 64-byte-aligned offset (cpu_int8_q_bytes). */
#define CPU_I8_NR 16
static inline int cpu_i8_panels(int N) { return (N + CPU_I8_NR - 1) / CPU_I8_NR; }
static inline size_t cpu_i8_panel_bytes(int K) { return (size_t)((K + 1) / 2) * 2 * CPU_I8_NR; }
static inline const int8_t *cpu_i8_panel(const int8_t *q, int K, int P) {
    return q + (size_t)P * cpu_i8_panel_bytes(K);
}

/* ---- epilogue: v = sum * scale[n] (+ y) (+ bias[n]) (GELU), f32 ---- */
typedef struct {
    float *y;           /* [T, N] */
    const float *bias;  /* [N] or NULL */
    const float *scale; /* [N] */
    int N, accumulate, gelu;
} cpu_i8_epi;

static inline void cpu_i8_epi_store(const cpu_i8_epi *e, int t, int n, float sum) {
    float v = sum * e->scale[n];
    float *yp = e->y + (size_t)t * e->N + n;
    if (e->accumulate) v += *yp;
    if (e->bias) v += e->bias[n];
    if (e->gelu) v = tp_gelu_new(v);
    *yp = v;
}

/* An exact integer sum for token t, column n, through the epilogue. */
static inline void cpu_i8_store_int(const cpu_i8_epi *e, int t, int n, int64_t acc, const float *sx) {
    cpu_i8_epi_store(e, t, n, (float)acc * sx[t]);
}

/* Sums v [nn] of token t for rows [n0, n0 + nn) through the epilogue (v is scratch), stored:
 * cpu_i8_epi_store's operations in its order, one pass each (loops that vectorize; per element
 * with its branches, the epilogue was 12% of an int8 prefill, perf), the last pass writing y
 * (a separate copy became a libc memcpy per 16-32 floats: 7-11% of amx's GEMM). */
static inline void cpu_i8_epi_row(const cpu_i8_epi *e, int t, int n0, int nn, float *v) {
    float *yp = e->y + (size_t)t * e->N + n0;
    const float *sc = e->scale + n0, *b = e->bias ? e->bias + n0 : NULL;
    const int last = e->gelu ? 3 : b ? 2 : e->accumulate ? 1 : 0; /* the pass that stores */
    float *o = last == 0 ? yp : v;
    #pragma omp simd
    for (int j = 0; j < nn; j++) o[j] = v[j] * sc[j];
    if (e->accumulate) {
        o = last == 1 ? yp : v;
        #pragma omp simd
        for (int j = 0; j < nn; j++) o[j] = v[j] + yp[j];
    }
    if (b) {
        o = last == 2 ? yp : v;
        #pragma omp simd
        for (int j = 0; j < nn; j++) o[j] = v[j] + b[j];
    }
    if (e->gelu) {
        #pragma omp simd
        for (int j = 0; j < nn; j++) yp[j] = tp_gelu_new(v[j]);
    }
}

/* cpu_int8_gemm.c, AVX2 (the caller checks the CPU); xq needs 4 readable bytes past its end.
 * cpu_int8_gemm_avx2: y = epi(xq @ q^T) for all T tokens and N rows of q, threads split the
 * panels in groups and run x in chunks kept in L2 (batched steps, prefill).
 * cpu_int8_panels_avx2: panels [P0, P1) for all T tokens, on the calling thread (the GEMV path:
 * a thread's rows are one sequential read). */
void cpu_int8_gemm_avx2(const int16_t *xq, const float *sx, const int8_t *q, int T, int N, int K, const cpu_i8_epi *e,
                        int n_threads);
void cpu_int8_panels_avx2(const int16_t *xq, const float *sx, const int8_t *q, int T, int N, int K, int P0, int P1,
                          const cpu_i8_epi *e);

/* cpu_int8_vnni.c: the same, on AVX512-VNNI (zmm) and AVX-VNNI (ymm) vpdpwssd: the same bits. */
void cpu_int8_gemm_avx512vnni(const int16_t *xq, const float *sx, const int8_t *q, int T, int N, int K,
                              const cpu_i8_epi *e, int n_threads);
void cpu_int8_panels_avx512vnni(const int16_t *xq, const float *sx, const int8_t *q, int T, int N, int K, int P0,
                                int P1, const cpu_i8_epi *e);
void cpu_int8_gemm_avxvnni(const int16_t *xq, const float *sx, const int8_t *q, int T, int N, int K,
                           const cpu_i8_epi *e, int n_threads);
void cpu_int8_panels_avxvnni(const int16_t *xq, const float *sx, const int8_t *q, int T, int N, int K, int P0,
                             int P1, const cpu_i8_epi *e);

/* cpu_int8_amx.c: the GEMM on AMX tiles (tdpbssd / tdpbusd on x split in two bytes): the same
 * bits. The caller checks the CPU (cpu_features: amx_int8, which also asked Linux for the tiles). */
void cpu_int8_gemm_amx(const int16_t *xq, const float *sx, const int8_t *q, int T, int N, int K, const cpu_i8_epi *e,
                       int n_threads);

#endif
