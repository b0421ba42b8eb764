/* int4 GEMV and GEMM tiles on AVX-512 VNNI (zmm): the arithmetic of cpu_int4_kernels.h, so the
 * plain-C twin's bits.
 *
 * A 64-byte line of a panel is k [8 s, 8 s + 8) of its 16 rows as 32 words of 4 nibbles
 * (cpu_int4_kernels.h): one load, then (w >> 4 i) & 15 for i = 0..3 (vpsrlw + vpandd; the last
 * needs no mask) are four zmm of int16, each k pair 4 s + i of the 16 rows interleaved, which
 * vpdpwssd multiplies by x's pair (broadcast, 32 bits) and adds into 16 int32 lanes, a row each:
 * 32 products an instruction, exact (non-saturating form). 7 ALU operations unpack 64 weights
 * from 32 bytes, which is cheap next to the memory they come from at T = 1 and shared by every
 * token of a tile above it.
 * Per group: the lanes hold sum q xq (wrapping int32), minus zero * sum xq (vpmulld, the zeros
 * widened from bytes, x's group sum broadcast) = the exact s (cpu_int4_kernels.h); then
 * acc = vfmadd(cvt(s), scale, acc): the twin's fmaf, one rounding.
 * Tiles: MT tokens x NP panels (2: two streams, 32 rows), all of K, the f32 sums to o; the int32
 * lanes split by nibble index in S chains at MT <= 2 (vpdpwssd's latency: 8 chains at T = 1).
 * GEMV (T <= few): MT <= 4, a thread's range of panels one sequential read, a pair of panels at a
 * time, its tokens in tiles of 4. GEMM: MT = 8 (16 int32 accumulators), the caller's blocking
 * (groups of panels, x in chunks kept in L2: cpu_int4.c). */
#include <string.h>

#include "util/log.h"
#include "kernels/cpu/cpu_int4_kernels.h"

#define NR CPU_I4_NR
#define ZMR 8 /* tokens a GEMM tile */
#define GMR 4 /* tokens a GEMV tile */

#if defined(__x86_64__)
#include <immintrin.h>

#define Z_TARGET "avx512f,avx512bw,avx512vl,avx512vnni"
#define Z_FN static inline __attribute__((always_inline, target(Z_TARGET)))
#define UNROLL _Pragma("GCC unroll 8")

static inline int32_t x_pair(const int16_t *x, long p) {
    int32_t v;
    memcpy(&v, x + 2 * p, sizeof v);
    return v;
}

/* o[t][16 j + r] = the f32 sums (acc, before sx) of token t0 + t, row r of panel j (p0 + j pb). */
Z_FN void ztile(const cpu_i4_x *x, const uint8_t *p0, size_t pb, int t0, const int MT, const int NP, const int S,
                float o[ZMR][2 * NR]) {
    const int K = x->K, KG = x->KG, ng = K / KG, steps = KG / 8;
    const int16_t *xr = x->xq + (size_t)t0 * K;
    const int32_t *xs = x->xsum + (size_t)t0 * ng;
    const __m512i m4 = _mm512_set1_epi16(15);
    const float *sc[2];
    const uint8_t *zp[2];
    UNROLL for (int j = 0; j < NP; j++) {
        sc[j] = cpu_i4_scales(p0 + j * pb, K);
        zp[j] = cpu_i4_zeros(p0 + j * pb, K, KG);
    }
    __m512 f[ZMR][2];
    UNROLL for (int t = 0; t < MT; t++) UNROLL for (int j = 0; j < NP; j++) f[t][j] = _mm512_setzero_ps();
    for (int g = 0; g < ng; g++) {
        __m512i a[4][ZMR][2];
        UNROLL for (int c = 0; c < S; c++) UNROLL for (int t = 0; t < MT; t++) UNROLL for (int j = 0; j < NP; j++)
            a[c][t][j] = _mm512_setzero_si512();
        const uint8_t *line = p0 + (size_t)g * KG * 8;
        const long pg = (long)g * KG / 2; /* x's first pair of the group */
        for (int s = 0; s < steps; s++, line += 64) {
            __m512i raw[2];
            UNROLL for (int j = 0; j < NP; j++) raw[j] = _mm512_load_si512((const void *)(line + j * pb));
            UNROLL for (int i = 0; i < 4; i++) {
                __m512i w[2];
                UNROLL for (int j = 0; j < NP; j++) w[j] = i == 3 ? _mm512_srli_epi16(raw[j], 12)
                                                          : i == 0 ? _mm512_and_si512(raw[j], m4)
                                                                   : _mm512_and_si512(_mm512_srli_epi16(raw[j], 4 * i), m4);
                UNROLL for (int t = 0; t < MT; t++) {
                    const __m512i xv = _mm512_set1_epi32(x_pair(xr + (size_t)t * K, pg + 4 * s + i));
                    UNROLL for (int j = 0; j < NP; j++) a[i % S][t][j] = _mm512_dpwssd_epi32(a[i % S][t][j], xv, w[j]);
                }
            }
        }
        UNROLL for (int j = 0; j < NP; j++) {
            const __m512i z = _mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(zp[j] + g * NR)));
            const __m512 scv = _mm512_load_ps(sc[j] + g * NR);
            UNROLL for (int t = 0; t < MT; t++) {
                __m512i v = a[0][t][j];
                UNROLL for (int c = 1; c < S; c++) v = _mm512_add_epi32(v, a[c][t][j]);
                v = _mm512_sub_epi32(v, _mm512_mullo_epi32(z, _mm512_set1_epi32(xs[(size_t)t * ng + g])));
                f[t][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), scv, f[t][j]);
            }
        }
    }
    UNROLL for (int t = 0; t < MT; t++) UNROLL for (int j = 0; j < NP; j++) _mm512_storeu_ps(o[t] + NR * j, f[t][j]);
}

typedef void ztile_fn(const cpu_i4_x *x, const uint8_t *p0, size_t pb, int t0, float o[ZMR][2 * NR]);
#define ZTILE(M, NP, S)                                                                                                \
    __attribute__((target(Z_TARGET), noinline)) static void ztile_##M##_##NP(const cpu_i4_x *x, const uint8_t *p0,   \
                                                                             size_t pb, int t0, float o[ZMR][2 * NR]) { \
        ztile(x, p0, pb, t0, M, NP, S, o);                                                                             \
    }
ZTILE(1, 1, 4) ZTILE(2, 1, 4) ZTILE(3, 1, 2) ZTILE(4, 1, 2) ZTILE(5, 1, 1) ZTILE(6, 1, 1) ZTILE(7, 1, 1) ZTILE(8, 1, 1)
ZTILE(1, 2, 4) ZTILE(2, 2, 2) ZTILE(3, 2, 1) ZTILE(4, 2, 1) ZTILE(5, 2, 1) ZTILE(6, 2, 1) ZTILE(7, 2, 1) ZTILE(8, 2, 1)
static ztile_fn *const g_ztiles[2][ZMR + 1] = {
    {NULL, ztile_1_1, ztile_2_1, ztile_3_1, ztile_4_1, ztile_5_1, ztile_6_1, ztile_7_1, ztile_8_1},
    {NULL, ztile_1_2, ztile_2_2, ztile_3_2, ztile_4_2, ztile_5_2, ztile_6_2, ztile_7_2, ztile_8_2}};

/* Panels [P0, P1) two at a time, tokens [t0, t1) in tiles of mr, each tile through the epilogue. */
static void zpanels(const cpu_i4_x *x, const uint8_t *q, int N, int P0, int P1, int t0, int t1, const cpu_i4_epi *e,
                    int mr) {
    const int K = x->K, KG = x->KG;
    const size_t pb = cpu_i4_panel_bytes(K, KG);
    float o[ZMR][2 * NR];
    for (int P = P0; P < P1; P += 2) {
        const int np = P1 - P < 2 ? 1 : 2, n0 = P * NR, nn = N - n0 < np * NR ? N - n0 : np * NR;
        for (int t = t0; t < t1; t += mr) {
            const int m = t1 - t < mr ? t1 - t : mr;
            g_ztiles[np - 1][m](x, cpu_i4_panel(q, K, KG, P), pb, t, o);
            for (int i = 0; i < m; i++) cpu_i4_epi_row(e, t + i, x->sx[t + i], n0, nn, o[i]);
        }
    }
}

void cpu_int4_gemv_avx512vnni(const cpu_i4_x *x, const uint8_t *q, int N, int P0, int P1, int t0, int t1,
                              const cpu_i4_epi *e) {
    zpanels(x, q, N, P0, P1, t0, t1, e, GMR);
}
void cpu_int4_gemm_avx512vnni(const cpu_i4_x *x, const uint8_t *q, int N, int P0, int P1, int t0, int t1,
                              const cpu_i4_epi *e) {
    zpanels(x, q, N, P0, P1, t0, t1, e, ZMR);
}
#else
void cpu_int4_gemv_avx512vnni(const cpu_i4_x *x, const uint8_t *q, int N, int P0, int P1, int t0, int t1,
                              const cpu_i4_epi *e) {
    (void)x, (void)q, (void)N, (void)P0, (void)P1, (void)t0, (void)t1, (void)e;
    tp_die_all("cpu int4: the avx512vnni kernel was called on a CPU other than x86-64");
}
void cpu_int4_gemm_avx512vnni(const cpu_i4_x *x, const uint8_t *q, int N, int P0, int P1, int t0, int t1,
                              const cpu_i4_epi *e) {
    cpu_int4_gemv_avx512vnni(x, q, N, P0, P1, t0, t1, e);
}
#endif
