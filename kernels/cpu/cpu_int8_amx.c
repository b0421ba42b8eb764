/* int8 GEMM on AMX (AMX-TILE + AMX-INT8; --weights int8, T above the GEMV range): the same bits
 * as every other int8 kernel (cpu_int8_kernels.h), on Intel's tile unit.
 *
 * Scheme: exact, on the int16 x of the other tiers. AMX multiplies bytes only (tdpbssd: s8 x s8,
 * tdpbusd: u8 x s8, four products summed into an int32 lane), so each int16 x is split in two
 * bytes, x = 256 hi + lo with lo = x mod 256 in [0, 255] (unsigned) and hi = (x - lo) / 256 in
 * [-64, 63] (|x| <= XQ_MAX = 16383), and
 *     sum_k q x = 256 (sum_k q hi) + (sum_k q lo)
 * with both sums exact in int32 (|q| <= 128: a lane holds K * 128 * 255 < 2^31 for K <= 65,000;
 * longer K runs in chunks of KCH). The two are combined exactly (int32 or double, group()) and
 * rounded to f32 once: the c twin's arithmetic, so the same bits. CTranslate2's u8 x s8 (x
 * rounded to 8 bits) would run one tdp instead of two, and change every output (docs/KERNELS.md).
 *
 * Tiles (8 registers of 16 rows x 64 bytes): C: 4 (hi and lo sums x 2 panels, 16 tokens x 16
 * rows of q each, int32); A: 2 (hi and lo of 16 tokens x 64 k); B: 2 (2 panels, 64 k x 16 rows,
 * as 16 rows of 4 k-interleaved bytes: [k/4][16][4]). A k step of 64: 4 tile loads, 4 tdp
 * (16 x 16 x 64 products each).
 * q's panels ([KP][16][2], cpu_int8_kernels.h) are not B's layout ([K/4][16][4]): a thread repacks its
 * group of up to SP panels per call into a buffer of its own (one pass over the rows it reads
 * anyway; L2-sized: SP * 16 * K bytes, 256 KiB at K = 1024), then runs every 16-token block of
 * x through it. x's hi and lo bytes are made once per call, as A tiles (zero past T and K). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "kernels/cpu/cpu_int8_kernels.h"

#define NR CPU_I8_NR
#define TM 16      /* tokens a tile: rows of A and C */
#define TK 64      /* k a tile step: bytes of an A row */
#define SP 16      /* panels per thread group */
#define KCH 32768L /* k per int32 chunk: 32768 * 128 * 255 < 2^31 */

#if defined(__x86_64__)
#include <immintrin.h>

static long round_up(long v, long m) { return (v + m - 1) / m * m; }

#define AMX_FN __attribute__((target("amx-tile,amx-int8")))

/* The tile configuration (palette 1): 8 tiles of 16 rows x 64 bytes. */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

/* A constant in memory: gcc 12 drops stores to a local that only ldtilecfg reads. */
static const tile_config g_tiles = {
    .palette = 1,
    .colsb = {TK, TK, TK, TK, TK, TK, TK, TK},
    .rows = {TM, TM, TM, TM, TM, TM, TM, TM},
};
static AMX_FN void tiles_configure(void) { _tile_loadconfig(&g_tiles); }
static AMX_FN void tiles_release(void) { _tile_release(); }

/* hi and lo are stored as A tiles, one after the other: [Tp/TM][Kp/TK][TM][TK] bytes, so a tile
 * load is 1 KiB in a row (16 rows Kp apart ran ~1.4x slower: 16 streams for the prefetchers). */
static size_t a_tile(int t, long k, long Kp) {
    return ((size_t)(t / TM) * (size_t)(Kp / TK) + (size_t)(k / TK)) * TM * TK;
}

/* Token t of xq [T][K] split in bytes (file comment) into its row of the A tiles, zero past K;
 * the rows past T were zeroed by the caller. */
static void split_x(int8_t *hi, uint8_t *lo, const int16_t *xq, int t, int K, long Kp) {
    const int16_t *x = xq + (size_t)t * K;
    for (long k0 = 0; k0 < Kp; k0 += TK) {
        const size_t at = a_tile(t, k0, Kp) + (size_t)(t % TM) * TK;
        int8_t *h = hi + at;
        uint8_t *l = lo + at;
        const int n = K - k0 < TK ? (int)(K - k0) : TK;
        #pragma omp simd
        for (int k = 0; k < n; k++) {
            const int v = x[k0 + k], b = v & 255;
            l[k] = (uint8_t)b;
            h[k] = (int8_t)((v - b) / 256);
        }
        if (n < TK) {
            memset(h + n, 0, (size_t)(TK - n));
            memset(l + n, 0, (size_t)(TK - n));
        }
    }
}

/* dst [Kp/4][16][4]: panel src ([KP][16][2], pairs past KP zero) with k pairs 2g and 2g + 1 of
 * each row side by side: a 16-bit interleave of two 32-byte pair rows. */
static void repack_panel(int8_t *dst, const int8_t *src, int K, long Kp) {
    const long KP = (K + 1) / 2, G = Kp / 4;
    long g = 0;
    for (; 2 * g + 1 < KP; g++) {
        const __m128i *a = (const __m128i *)(src + 2 * g * 2 * NR), *b = (const __m128i *)(src + (2 * g + 1) * 2 * NR);
        const __m128i a0 = _mm_loadu_si128(a), a1 = _mm_loadu_si128(a + 1);
        const __m128i b0 = _mm_loadu_si128(b), b1 = _mm_loadu_si128(b + 1);
        __m128i *d = (__m128i *)(dst + g * 4 * NR);
        _mm_storeu_si128(d, _mm_unpacklo_epi16(a0, b0)); /* rows 0-3: (pair 2g, pair 2g + 1) */
        _mm_storeu_si128(d + 1, _mm_unpackhi_epi16(a0, b0));
        _mm_storeu_si128(d + 2, _mm_unpacklo_epi16(a1, b1));
        _mm_storeu_si128(d + 3, _mm_unpackhi_epi16(a1, b1));
    }
    for (; g < G; g++) /* the last pair alone (odd KP), then zeros to Kp */
        for (int j = 0; j < NR; j++)
            for (int i = 0; i < 4; i++) {
                const long p = 2 * g + i / 2;
                dst[g * 4 * NR + 4 * j + i] = p < KP ? src[p * 2 * NR + 2 * j + i % 2] : 0;
            }
}

/* The sums of a block of TM tokens (hi, lo: its first A tile) against panels [0, np) (np 1 or
 * 2) of B (bp bytes a panel) over k [k0, k1): s[0 / 1][t][r] the hi sums of panel 0 / 1, s[2 /
 * 3] the lo sums. */
static AMX_FN void block_sums(const int8_t *hi, const uint8_t *lo, const int8_t *B, size_t bp, int np, long k0,
                              long k1, int32_t s[4][TM][NR]) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (long k = k0; k < k1; k += TK) {
        _tile_loadd(4, hi + k * TM, TK); /* the block's A tile k / TK */
        _tile_loadd(5, lo + k * TM, TK);
        _tile_loadd(6, B + 16 * k, 4 * NR); /* rows k/4 .. k/4 + 15 of [Kp/4][16][4] */
        _tile_dpbssd(0, 4, 6);
        _tile_dpbusd(2, 5, 6);
        if (np == 2) {
            _tile_loadd(7, B + bp + 16 * k, 4 * NR);
            _tile_dpbssd(1, 4, 7);
            _tile_dpbusd(3, 5, 7);
        }
    }
    _tile_stored(0, s[0], 4 * NR);
    _tile_stored(2, s[2], 4 * NR);
    if (np == 2) {
        _tile_stored(1, s[1], 4 * NR);
        _tile_stored(3, s[3], 4 * NR);
    }
}

/* Panels [P0, P0 + npan) (repacked in B, bp bytes each) for all T tokens, then the epilogue.
 * The exact sum 256 hi + lo is rounded to f32 once: in int32 where neither it nor 256 (sum q hi)
 * can overflow (K <= K32: K * 127 * 16384 < 2^31, |q| <= 127 from the quantizer, |hi| <= 64),
 * else in double (exact below 2^53) over the KCH chunks; either way the nearest float to the
 * exact integer, as the c twin's int64. */
#define K32 1032
static AMX_FN void group(const int8_t *hi, const uint8_t *lo, const float *sx, const int8_t *B, size_t bp, int T,
                         int N, int K, long Kp, int P0, int npan, const cpu_i8_epi *e) {
    for (int t0 = 0; t0 < T; t0 += TM) {
        const int m = T - t0 < TM ? T - t0 : TM;
        for (int pp = 0; pp < npan; pp += 2) {
            const int np = npan - pp < 2 ? 1 : 2, n0 = (P0 + pp) * NR;
            const int nn = N - n0 < np * NR ? N - n0 : np * NR;
            int32_t s[4][TM][NR];
            float f[TM][2 * NR];
            if (K <= K32) {
                block_sums(hi + a_tile(t0, 0, Kp), lo + a_tile(t0, 0, Kp), B + pp * bp, bp, np, 0, Kp, s);
                for (int t = 0; t < m; t++)
                    for (int h = 0; h < np; h++) {
                        const int32_t *sh = s[h][t], *sl = s[2 + h][t];
                        float *o = f[t] + h * NR;
                        #pragma omp simd
                        for (int j = 0; j < NR; j++) o[j] = (float)(256 * sh[j] + sl[j]) * sx[t0 + t];
                    }
            } else {
                double d[TM][2 * NR];
                memset(d, 0, sizeof d);
                for (long k0 = 0; k0 < Kp; k0 += KCH) {
                    block_sums(hi + a_tile(t0, 0, Kp), lo + a_tile(t0, 0, Kp), B + pp * bp, bp, np, k0,
                               Kp - k0 < KCH ? Kp : k0 + KCH, s);
                    for (int t = 0; t < m; t++)
                        for (int h = 0; h < np; h++) {
                            const int32_t *sh = s[h][t], *sl = s[2 + h][t];
                            double *o = d[t] + h * NR;
                            #pragma omp simd
                            for (int j = 0; j < NR; j++) o[j] += 256.0 * sh[j] + sl[j];
                        }
                }
                for (int t = 0; t < m; t++)
                    for (int j = 0; j < np * NR; j++) f[t][j] = (float)d[t][j] * sx[t0 + t];
            }
            for (int t = 0; t < m; t++) cpu_i8_epi_row(e, t0 + t, n0, nn, f[t]);
        }
    }
}

void cpu_int8_gemm_amx(const int16_t *xq, const float *sx, const int8_t *q, int T, int N, int K, const cpu_i8_epi *e,
                       int n_threads) {
    const long Kp = round_up(K, TK), Tp = round_up(T, TM);
    const int np = cpu_i8_panels(N);
    int sp = (np + n_threads - 1) / n_threads;
    sp = sp < 1 ? 1 : sp > SP ? SP : sp;
    const int groups = (np + sp - 1) / sp;
    int8_t *hi = tp_malloc((size_t)(Tp * Kp));
    uint8_t *lo = tp_malloc((size_t)(Tp * Kp));
    if (Tp > T) { /* the last block's rows past T: zero (their sums are not stored) */
        const size_t last = a_tile((int)Tp - TM, 0, Kp);
        memset(hi + last, 0, (size_t)(TM * Kp));
        memset(lo + last, 0, (size_t)(TM * Kp));
    }
    #pragma omp parallel for schedule(static) num_threads(n_threads) if (n_threads > 1 && T > 1)
    for (int t = 0; t < T; t++) split_x(hi, lo, xq, t, K, Kp);
    const size_t bp = (size_t)Kp * NR; /* a repacked panel */
    #pragma omp parallel num_threads(n_threads) if (n_threads > 1 && groups > 1)
    {
        int8_t *B = tp_malloc((size_t)sp * bp);
        tiles_configure(); /* per thread: the tile state is the thread's */
        #pragma omp for schedule(static)
        for (int g = 0; g < groups; g++) {
            const int P0 = g * sp, npan = np - P0 < sp ? np - P0 : sp;
            for (int i = 0; i < npan; i++) repack_panel(B + i * bp, cpu_i8_panel(q, K, P0 + i), K, Kp);
            group(hi, lo, sx, B, bp, T, N, K, Kp, P0, npan, e);
        }
        tiles_release();
        free(B);
    }
    free(hi);
    free(lo);
}
#else
void cpu_int8_gemm_amx(const int16_t *xq, const float *sx, const int8_t *q, int T, int N, int K, const cpu_i8_epi *e,
                       int n_threads) {
    (void)xq, (void)sx, (void)q, (void)T, (void)N, (void)K, (void)e, (void)n_threads;
    tp_die_all("cpu int8: the amx kernel was called on a CPU other than x86-64");
}
#endif
