/* int4 GEMV and GEMM tiles on AVX2 (vpmaddwd + vpaddd) and AVX-VNNI (vpdpwssd ymm): the
 * arithmetic of cpu_int4_kernels.h, so the plain-C twin's bits. One template (cpu_int4_ymm.h),
 * built once per tier; the scheme is cpu_int4_avx512.c's on ymm halves of a panel's lines.
 * GEMV tiles of up to 2 tokens (8 int32 chains), GEMM tiles of 4, the lines prefetched as the zmm
 * tiles' (cpu_i4_prefetch). 8-bit x (--int4-activations
 * int8): byte dot products (vpmaddubsw + vpmaddwd; vpdpbusd ymm), half the 16-bit tiles' count. */
#include <string.h>

#include "util/log.h"
#include "kernels/cpu/cpu_int4_kernels.h"

#define NR CPU_I4_NR
#define YMR 4 /* tokens a GEMM tile */

#if defined(__x86_64__)
#include <immintrin.h>

#define YUNROLL _Pragma("GCC unroll 8")

typedef void ytile_fn(const cpu_i4_x *x, const uint8_t *p0, int t0, float o[YMR][NR]);

/* Panels [P0, P1), tokens [t0, t1) in tiles of mr, each through the epilogue (built for AVX2). */
__attribute__((target("avx2,fma"))) static void ypanels(ytile_fn *const *tiles, const cpu_i4_x *x, const uint8_t *q, int N, int P0, int P1, int t0,
                    int t1, const cpu_i4_epi *e, int mr) {
    float o[YMR][NR];
    for (int P = P0; P < P1; P++) {
        const int n0 = P * NR, nn = N - n0 < NR ? N - n0 : NR;
        for (int t = t0; t < t1; t += mr) {
            const int m = t1 - t < mr ? t1 - t : mr;
            tiles[m](x, cpu_i4_panel(q, x->K, x->KG, P), t, o);
            for (int i = 0; i < m; i++) cpu_i4_epi_row(e, t + i, x->sx[t + i], n0, nn, o[i]);
        }
    }
}

#define Y_SFX avx2
#define Y_TARGET "avx2,fma"
#define Y_DP(a, x, w) _mm256_add_epi32((a), _mm256_madd_epi16((x), (w)))
#define Y_DPB(a, w, x) _mm256_add_epi32((a), _mm256_madd_epi16(_mm256_maddubs_epi16((w), (x)), _mm256_set1_epi16(1)))
#include "kernels/cpu/cpu_int4_ymm.h"
#undef Y_SFX
#undef Y_TARGET
#undef Y_DP
#undef Y_DPB

#define Y_SFX avxvnni
#define Y_TARGET "avx2,fma,avxvnni"
#define Y_DP(a, x, w) _mm256_dpwssd_avx_epi32((a), (x), (w))
#define Y_DPB(a, w, x) _mm256_dpbusd_avx_epi32((a), (w), (x))
#include "kernels/cpu/cpu_int4_ymm.h"
#else
#define NOT_X86(fn, name)                                                                                              \
    void fn(const cpu_i4_x *x, const uint8_t *q, int N, int P0, int P1, int t0, int t1, const cpu_i4_epi *e) {        \
        (void)x, (void)q, (void)N, (void)P0, (void)P1, (void)t0, (void)t1, (void)e;                                    \
        tp_die_all("cpu int4: the %s kernel was called on a CPU other than x86-64", name);                             \
    }
NOT_X86(cpu_int4_gemv_avx2, "avx2")
NOT_X86(cpu_int4_gemm_avx2, "avx2")
NOT_X86(cpu_int4_gemv_avxvnni, "avxvnni")
NOT_X86(cpu_int4_gemm_avxvnni, "avxvnni")
#endif
