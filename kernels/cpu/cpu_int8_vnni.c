/* int8 GEMV and GEMM on VNNI (--weights int8): AVX512-VNNI (zmm) and AVX-VNNI (ymm, VEX).
 *
 * Scheme: the AVX2 kernels' (cpu_int8_kernels.h): q int8 in 16-row panels with k pairs interleaved, x
 * rounded to int16 per token, exact integer sums, the f32 epilogue. vpdpwssd adds the two int16
 * products of each pair to an int32 lane in one instruction (exact: no saturation in the non-"s"
 * form), where AVX2 needs vpmaddwd + vpaddd. So these kernels give the same bits as the AVX2
 * ones and the plain-C twin: no new error bound (the int16 x grid's, docs/KERNELS.md). We chose
 * this over CTranslate2's u8 x s8 vpdpbusd (x rounded to 8 bits, + 128 and a per-row correction
 * of 128 sum_k q) because that moves x's rounding step from 2^-14 to 2^-7 of its row maximum
 * and changes every output; vpdpwssd keeps the numerics of every other tier.
 *
 * avx512vnni: a pair of the panel's 16 rows is 32 bytes -> one vpmovsxbw zmm (16 rows x 2 k),
 *   then per token one vpdpwssd with x's pair broadcast: 32 products an instruction, 4x the
 *   AVX2 tile's. Tiles of up to 8 tokens x 2 panels; for <= 4 tokens the even and odd pairs
 *   go to separate accumulators (4+ chains hide the instruction's latency at T = 1).
 * avxvnni: the AVX2 tile (2 ymm of 8 rows a pair) with vpdpwssd for vpmaddwd + vpaddd; up to
 *   6 tokens, even/odd split for <= 3.
 * Int32 lanes: pairs summed in blocks of KB = 512 (a pair product < 2^22, so a block < 2^31),
 * the blocks in double (exact), rounded to f32 once: the AVX2 kernels' arithmetic.
 * The GEMM (T above the GEMV range) runs the same tiles over the AVX2 GEMM's blocking (groups
 * of panels per thread, x in chunks kept in L2). */
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "kernels/cpu/cpu_int8_kernels.h"

#define NR CPU_I8_NR
#define KB 512 /* pairs per int32 block */
#define SP 16  /* panels per thread group in the GEMM (cpu_int8_gemm.c) */
#define XC_BYTES (192 << 10)
#define PF 1024 /* bytes of prefetch distance along a panel (the AVX2 GEMV's, cpu_int8_gemm.c) */

#if defined(__x86_64__)
#include <immintrin.h>

#define Z_FN static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define Y_FN static inline __attribute__((always_inline, target("avx2,fma,avxvnni")))
#define UNROLL _Pragma("GCC unroll 8")

/* x's pair p of token t as a 32-bit value (past K on odd K, where the panel is zero). */
static inline int32_t x_pair(const int16_t *x, int K, int t, long p) {
    int32_t v;
    memcpy(&v, x + (size_t)t * K + 2 * p, sizeof v);
    return v;
}

/* ---- avx512vnni: MT tokens x NP panels (16 rows each), pairs [0, np) from bp (panel 0) and bp +
 * pb (panel 1); S = 2: even and odd pairs in separate accumulators. o[t][16 j + r]. ---- */
#define ZMR 8
Z_FN void ztile(const int16_t *x, int K, const int8_t *bp, size_t pb, long np, const int MT, const int NP,
                const int S, int32_t o[ZMR][2 * NR]) {
    __m512i a[2][ZMR][2];
    UNROLL for (int s = 0; s < S; s++) UNROLL for (int t = 0; t < MT; t++) UNROLL for (int j = 0; j < NP; j++)
        a[s][t][j] = _mm512_setzero_si512();
    long p = 0;
    for (; p + S <= np; p += S)
        UNROLL for (int s = 0; s < S; s++) {
            if (S == 2 ? s == 0 : (p & 1) == 0) /* a cache line is 2 pairs: one prefetch a line a panel */
                UNROLL for (int j = 0; j < NP; j++) _mm_prefetch((const char *)(bp + j * pb + p * 2 * NR + PF), _MM_HINT_T0);
            __m512i w[2];
            UNROLL for (int j = 0; j < NP; j++)
                w[j] = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(bp + j * pb + (p + s) * 2 * NR)));
            UNROLL for (int t = 0; t < MT; t++) {
                const __m512i xv = _mm512_set1_epi32(x_pair(x, K, t, p + s));
                UNROLL for (int j = 0; j < NP; j++) a[s][t][j] = _mm512_dpwssd_epi32(a[s][t][j], xv, w[j]);
            }
        }
    for (; p < np; p++) { /* S = 2, an odd count: the last pair */
        __m512i w[2];
        UNROLL for (int j = 0; j < NP; j++)
            w[j] = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(bp + j * pb + p * 2 * NR)));
        UNROLL for (int t = 0; t < MT; t++) {
            const __m512i xv = _mm512_set1_epi32(x_pair(x, K, t, p));
            UNROLL for (int j = 0; j < NP; j++) a[0][t][j] = _mm512_dpwssd_epi32(a[0][t][j], xv, w[j]);
        }
    }
    UNROLL for (int t = 0; t < MT; t++) UNROLL for (int j = 0; j < NP; j++) {
        __m512i v = a[0][t][j];
        if (S == 2) v = _mm512_add_epi32(v, a[1][t][j]); /* < 2^31: the whole block's sum */
        _mm512_storeu_si512((void *)(o[t] + NR * j), v);
    }
}
typedef void ztile_fn(const int16_t *x, int K, const int8_t *bp, size_t pb, long np, int32_t o[ZMR][2 * NR]);
#define ZTILE(M, NP, S)                                                                                                \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"), noinline)) static void ztile_##M##_##NP(         \
        const int16_t *x, int K, const int8_t *bp, size_t pb, long np, int32_t o[ZMR][2 * NR]) {                       \
        ztile(x, K, bp, pb, np, M, NP, S, o);                                                                          \
    }
ZTILE(1, 1, 2) ZTILE(2, 1, 2) ZTILE(3, 1, 2) ZTILE(4, 1, 2) ZTILE(5, 1, 1) ZTILE(6, 1, 1) ZTILE(7, 1, 1) ZTILE(8, 1, 1)
ZTILE(1, 2, 2) ZTILE(2, 2, 2) ZTILE(3, 2, 2) ZTILE(4, 2, 2) ZTILE(5, 2, 1) ZTILE(6, 2, 1) ZTILE(7, 2, 1) ZTILE(8, 2, 1)
static ztile_fn *const g_ztiles[2][ZMR + 1] = {
    {NULL, ztile_1_1, ztile_2_1, ztile_3_1, ztile_4_1, ztile_5_1, ztile_6_1, ztile_7_1, ztile_8_1},
    {NULL, ztile_1_2, ztile_2_2, ztile_3_2, ztile_4_2, ztile_5_2, ztile_6_2, ztile_7_2, ztile_8_2}};

/* ---- avxvnni: MT tokens x one panel (2 ymm of 8 rows), S as above. ---- */
#define YMR 6
Y_FN void ytile(const int16_t *x, int K, const int8_t *bp, long np, const int MT, const int S,
                int32_t o[ZMR][2 * NR]) {
    __m256i a[2][YMR][2];
    UNROLL for (int s = 0; s < S; s++) UNROLL for (int t = 0; t < MT; t++) UNROLL for (int h = 0; h < 2; h++)
        a[s][t][h] = _mm256_setzero_si256();
    long p = 0;
    for (; p + S <= np; p += S)
        UNROLL for (int s = 0; s < S; s++) {
            __m256i w[2];
            UNROLL for (int h = 0; h < 2; h++)
                w[h] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(bp + (p + s) * 2 * NR + 16 * h)));
            UNROLL for (int t = 0; t < MT; t++) {
                const __m256i xv = _mm256_set1_epi32(x_pair(x, K, t, p + s));
                UNROLL for (int h = 0; h < 2; h++) a[s][t][h] = _mm256_dpwssd_avx_epi32(a[s][t][h], xv, w[h]);
            }
        }
    for (; p < np; p++) {
        __m256i w[2];
        UNROLL for (int h = 0; h < 2; h++)
            w[h] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(bp + p * 2 * NR + 16 * h)));
        UNROLL for (int t = 0; t < MT; t++) {
            const __m256i xv = _mm256_set1_epi32(x_pair(x, K, t, p));
            UNROLL for (int h = 0; h < 2; h++) a[0][t][h] = _mm256_dpwssd_avx_epi32(a[0][t][h], xv, w[h]);
        }
    }
    UNROLL for (int t = 0; t < MT; t++) UNROLL for (int h = 0; h < 2; h++) {
        __m256i v = a[0][t][h];
        if (S == 2) v = _mm256_add_epi32(v, a[1][t][h]);
        _mm256_storeu_si256((__m256i *)(o[t] + 8 * h), v);
    }
}
#define YTILE(M, S)                                                                                                    \
    __attribute__((target("avx2,fma,avxvnni"), noinline)) static void ytile_##M(                                    \
        const int16_t *x, int K, const int8_t *bp, size_t pb, long np, int32_t o[ZMR][2 * NR]) {                       \
        (void)pb;                                                                                                      \
        ytile(x, K, bp, np, M, S, o);                                                                                  \
    }
YTILE(1, 2) YTILE(2, 2) YTILE(3, 2) YTILE(4, 1) YTILE(5, 1) YTILE(6, 1)
static ztile_fn *const g_ytiles[YMR + 1] = {NULL, ytile_1, ytile_2, ytile_3, ytile_4, ytile_5, ytile_6};

/* One tier's tiles: up to mr tokens x np_max panels a call. */
typedef struct {
    ztile_fn *const *tiles; /* [np_max][mr + 1] flattened: tiles[(np - 1) * (mr + 1) + m] */
    int mr, np_max;
} vnni_tier;
static ztile_fn *tier_tile(const vnni_tier *v, int np, int m) { return v->tiles[(np - 1) * (v->mr + 1) + m]; }
static const vnni_tier Z_TIER = {&g_ztiles[0][0], ZMR, 2}, Y_TIER = {g_ytiles, YMR, 1};

/* Tokens [t0, t1) of panels [P, P + npan) (npan <= the tier's), then the epilogue: (float) of
 * the exact sum times sx, as the AVX2 kernels (cpu_int8_gemm.c, panel_tokens). */
static void panel_tokens(const vnni_tier *v, const int16_t *xq, const float *sx, const int8_t *q, int t0, int t1,
                         int N, int K, int P, int npan, const cpu_i8_epi *e) {
    const long KP = (K + 1) / 2;
    const size_t pb = cpu_i8_panel_bytes(K);
    const int8_t *bp = cpu_i8_panel(q, K, P);
    const int n0 = P * NR, nn = N - n0 < npan * NR ? N - n0 : npan * NR;
    for (; t0 < t1; t0 += v->mr) {
        const int m = t1 - t0 < v->mr ? t1 - t0 : v->mr;
        const int16_t *x = xq + (size_t)t0 * K;
        ztile_fn *fn = tier_tile(v, npan, m);
        int32_t o[ZMR][2 * NR];
        float f[ZMR][2 * NR];
        if (KP <= KB) {
            fn(x, K, bp, pb, KP, o);
            for (int t = 0; t < m; t++)
                for (int j = 0; j < nn; j++) f[t][j] = (float)o[t][j] * sx[t0 + t];
        } else {
            double d[ZMR][2 * NR];
            memset(d, 0, sizeof d);
            for (long p0 = 0; p0 < KP; p0 += KB) {
                fn(x + 2 * p0, K, bp + p0 * 2 * NR, pb, KP - p0 < KB ? KP - p0 : KB, o);
                for (int t = 0; t < m; t++)
                    for (int j = 0; j < nn; j++) d[t][j] += o[t][j];
            }
            for (int t = 0; t < m; t++)
                for (int j = 0; j < nn; j++) f[t][j] = (float)d[t][j] * sx[t0 + t];
        }
        for (int t = 0; t < m; t++) cpu_i8_epi_row(e, t0 + t, n0, nn, f[t]);
    }
}

/* Panels [P0, P1) for tokens [t0, t1), np_max at a time. */
static void panels(const vnni_tier *v, const int16_t *xq, const float *sx, const int8_t *q, int t0, int t1, int N,
                   int K, int P0, int P1, const cpu_i8_epi *e) {
    for (int P = P0; P < P1; P += v->np_max) {
        const int npan = P1 - P < v->np_max ? P1 - P : v->np_max;
        panel_tokens(v, xq, sx, q, t0, t1, N, K, P, npan, e);
    }
}

void cpu_int8_panels_avx512vnni(const int16_t *xq, const float *sx, const int8_t *q, int T, int N, int K, int P0,
                                int P1, const cpu_i8_epi *e) {
    panels(&Z_TIER, xq, sx, q, 0, T, N, K, P0, P1, e);
}
void cpu_int8_panels_avxvnni(const int16_t *xq, const float *sx, const int8_t *q, int T, int N, int K, int P0,
                             int P1, const cpu_i8_epi *e) {
    panels(&Y_TIER, xq, sx, q, 0, T, N, K, P0, P1, e);
}

/* The AVX2 GEMM's blocking (cpu_int8_gemm.c): threads take groups of up to SP panels; each
 * group runs x in chunks of mc tokens kept in L2. */
static void gemm(const vnni_tier *v, const int16_t *xq, const float *sx, const int8_t *q, int T, int N, int K,
                 const cpu_i8_epi *e, int n_threads) {
    const int np = cpu_i8_panels(N);
    int sp = (np + n_threads - 1) / n_threads;
    sp = sp < 1 ? 1 : sp > SP ? SP : sp;
    const int groups = (np + sp - 1) / sp;
    int mc = (int)(XC_BYTES / (2 * (size_t)K)) / v->mr * v->mr;
    mc = mc < v->mr ? v->mr : mc;
    #pragma omp parallel for schedule(static) num_threads(n_threads) if (n_threads > 1 && groups > 1)
    for (int g = 0; g < groups; g++) {
        const int P0 = g * sp, P1 = np - P0 < sp ? np : P0 + sp;
        for (int t0 = 0; t0 < T; t0 += mc) panels(v, xq, sx, q, t0, T - t0 < mc ? T : t0 + mc, N, K, P0, P1, e);
    }
}
void cpu_int8_gemm_avx512vnni(const int16_t *xq, const float *sx, const int8_t *q, int T, int N, int K,
                              const cpu_i8_epi *e, int n_threads) {
    gemm(&Z_TIER, xq, sx, q, T, N, K, e, n_threads);
}
void cpu_int8_gemm_avxvnni(const int16_t *xq, const float *sx, const int8_t *q, int T, int N, int K,
                           const cpu_i8_epi *e, int n_threads) {
    gemm(&Y_TIER, xq, sx, q, T, N, K, e, n_threads);
}
#else
#define NOT_X86(name)                                                                                                  \
    tp_die_all("cpu int8: the %s kernel was called on a CPU other than x86-64", name)
void cpu_int8_panels_avx512vnni(const int16_t *xq, const float *sx, const int8_t *q, int T, int N, int K, int P0,
                                int P1, const cpu_i8_epi *e) {
    (void)xq, (void)sx, (void)q, (void)T, (void)N, (void)K, (void)P0, (void)P1, (void)e;
    NOT_X86("avx512vnni");
}
void cpu_int8_panels_avxvnni(const int16_t *xq, const float *sx, const int8_t *q, int T, int N, int K, int P0,
                             int P1, const cpu_i8_epi *e) {
    (void)xq, (void)sx, (void)q, (void)T, (void)N, (void)K, (void)P0, (void)P1, (void)e;
    NOT_X86("avxvnni");
}
void cpu_int8_gemm_avx512vnni(const int16_t *xq, const float *sx, const int8_t *q, int T, int N, int K,
                              const cpu_i8_epi *e, int n_threads) {
    (void)xq, (void)sx, (void)q, (void)T, (void)N, (void)K, (void)e, (void)n_threads;
    NOT_X86("avx512vnni");
}
void cpu_int8_gemm_avxvnni(const int16_t *xq, const float *sx, const int8_t *q, int T, int N, int K,
                           const cpu_i8_epi *e, int n_threads) {
    (void)xq, (void)sx, (void)q, (void)T, (void)N, (void)K, (void)e, (void)n_threads;
    NOT_X86("avxvnni");
}
#endif
