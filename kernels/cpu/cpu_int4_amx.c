/* int4 GEMM on AMX (AMX-TILE + AMX-INT8; --weights int4, T above the GEMV range): the arithmetic
 * of cpu_int4_kernels.h, so the plain-C twin's bits, on Intel's tile unit.
 *
 * Scheme: int8's AMX GEMM (cpu_int8_amx.c) on the int4 panels. x is split in two signed bytes
 * (cpu_i4_x, already in the order of a line's nibbles as bytes), so
 *     sum_k q xq = 256 (sum_k q hi) + (sum_k q lo)
 * with tdpbssd (hi x (q - zero), lo x (q - zero)), q - zero in -15..15 as signed bytes; both
 * exact in int32 (a group: KG * 15 * 128 < 2^31). Per kernel group the C tiles are
 * stored and flushed: s = 256 H + L, acc = fmaf((float)s, scale, acc).
 *
 * Tiles (8 registers): C 0-1 the lo sums of 2 panels, C 2-3 the hi sums (16 tokens x 16 rows,
 * int32); A 4-5: lo and hi of 16 tokens x TK k, loaded straight from x's byte planes, which
 * come in tile order (cpu_i4_x_tile_at: a tile one contiguous run; zero rows past T); B 6-7:
 * 2 panels' TK k as TK / 4 rows of 64 bytes: a line's nibbles masked to bytes, minus the zero,
 * are two such rows (q & 15: k 8 s + {0, 4, 1, 5} of the 16 rows, then (q >> 4) & 15: k 8 s +
 * {2, 6, 3, 7}), the order of x's planes. TK = 64 k a step, 32 where the group is an odd
 * multiple of 32 (a step never crosses a group: cpu_i4_amx_tk).
 * A thread unpacks its group of up to SP panels per call into B rows (one pass over the nibbles
 * it reads anyway; 2 bytes a weight), then runs every 16-token block through them. The B rows
 * live in the caller's scratch (cpu_i4_x.work), which stays across calls. */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "kernels/cpu/cpu_int4_kernels.h"

#define NR CPU_I4_NR
#define TM 16 /* tokens a tile: rows of A and C */
#define SP_BYTES (512 << 10) /* B rows a thread holds: SP panels of 16 K bytes */

#if defined(__x86_64__)
#include <immintrin.h>

#define AMX_FN __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl")))

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

/* Palette 1: C 0-3 16 x 64 bytes, A 4-5 16 x TK, B 6-7 TK / 4 x 64. Constants in memory: gcc 12
 * drops stores to a local that only ldtilecfg reads (cpu_int8_amx.c). */
#define TILES(TK)                                                                                                      \
    {.palette = 1, .colsb = {64, 64, 64, 64, TK, TK, 64, 64}, .rows = {TM, TM, TM, TM, TM, TM, TK / 4, TK / 4}}
static const tile_config g_tiles64 = TILES(64), g_tiles32 = TILES(32);
static AMX_FN void tiles_configure(int tk) { _tile_loadconfig(tk == 64 ? &g_tiles64 : &g_tiles32); }
static AMX_FN void tiles_release(void) { _tile_release(); }

/* One panel's lines -> B rows [K / 4][64] of q - zero (signed bytes, -15..15): per line, its
 * nibbles masked to bytes ((q & 15) - zero), then the high ones (((q >> 4) & 15) - zero). The
 * zero subtracted here leaves the flush s = 256 H + L (the zero * sum xq term of the other
 * tiers, a vpmulld per token and panel a group, was ~10% of a prefill). */
static AMX_FN void unpack_panel(uint8_t *b, const uint8_t *panel, int K, int KG) {
    const __m512i m4 = _mm512_set1_epi8(15);
    const uint8_t *zp = cpu_i4_zeros(panel, K, KG);
    for (int g = 0; g < K / KG; g++) {
        /* lane j's 4 bytes all zero[j] */
        const __m512i z = _mm512_mullo_epi32(_mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(zp + g * NR))),
                                             _mm512_set1_epi32(0x01010101));
        for (int s = g * KG / 8; s < (g + 1) * KG / 8; s++) {
            const __m512i raw = _mm512_load_si512((const void *)(panel + (size_t)s * 64));
            _mm512_store_si512((void *)(b + (size_t)s * 128), _mm512_sub_epi8(_mm512_and_si512(raw, m4), z));
            _mm512_store_si512((void *)(b + (size_t)s * 128 + 64),
                               _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(raw, 4), m4), z));
        }
    }
}

/* A block of 16 tokens (al, ah: its A tiles, TK * 16 bytes each) against np (1, 2) panels of
 * B (bp bytes a panel; raw: the panels themselves, for scales and zeros) over every group; f
 * [16][32]: the f32 sums. */
static AMX_FN void block(const cpu_i4_x *x, const int8_t *al, const int8_t *ah, const uint8_t *B,
                         size_t bp, const uint8_t *raw, size_t pb, int np, int tk, float f[TM][2 * NR]) {
    const int K = x->K, KG = x->KG, ng = K / KG;
    int32_t s[4][TM][NR];
    memset(f, 0, sizeof(float) * TM * 2 * NR);
    for (int g = 0; g < ng; g++) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (long k = (long)g * KG; k < (long)(g + 1) * KG; k += tk) {
            _tile_loadd(4, al + k * TM, tk); /* the block's A tile k / TK */
            _tile_loadd(5, ah + k * TM, tk);
            _tile_loadd(6, B + 16 * k, 64); /* row k / 4 of [K / 4][64] */
            _tile_dpbssd(0, 4, 6);
            _tile_dpbssd(2, 5, 6);
            if (np == 2) {
                _tile_loadd(7, B + bp + 16 * k, 64);
                _tile_dpbssd(1, 4, 7);
                _tile_dpbssd(3, 5, 7);
            }
        }
        _tile_stored(0, s[0], 64);
        _tile_stored(2, s[2], 64);
        if (np == 2) {
            _tile_stored(1, s[1], 64);
            _tile_stored(3, s[3], 64);
        }
        for (int j = 0; j < np; j++) {
            const uint8_t *p = raw + j * pb;
            const __m512 sc = _mm512_load_ps(cpu_i4_scales(p, K) + g * NR);
            for (int t = 0; t < TM; t++) {
                const __m512i v = _mm512_add_epi32(_mm512_slli_epi32(_mm512_loadu_si512(s[2 + j][t]), 8),
                                                   _mm512_loadu_si512(s[j][t])); /* sum (q - zero) xq */
                _mm512_storeu_ps(f[t] + NR * j,
                                 _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), sc, _mm512_loadu_ps(f[t] + NR * j)));
            }
        }
    }
}

/* The block's m tokens through the epilogue (here for AVX-512: the OpenMP body is baseline
 * code, and its SSE epilogue was 6% of a prefill, perf). */
static AMX_FN void epi_block(const cpu_i4_epi *e, const cpu_i4_x *x, int t0, int m, int n0, int nn,
                             float f[TM][2 * NR]) {
    for (int t = 0; t < m; t++) cpu_i4_epi_row(e, t0 + t, x->sx[t0 + t], n0, nn, f[t]);
}

/* Panels a thread unpacks at a time: SP_BYTES of B rows, at least 2. */
static int sp_max(int K) {
    const int m = (int)(SP_BYTES / ((size_t)K * 16));
    return m < 2 ? 2 : m;
}
static size_t round64(size_t v) { return (v + 63) & ~(size_t)63; }
size_t cpu_int4_amx_work_bytes(int K, int n_threads) {
    return (size_t)n_threads * round64((size_t)sp_max(K) * K * 16);
}

void cpu_int4_gemm_amx(const cpu_i4_x *x, const uint8_t *q, int N, const cpu_i4_epi *e, int n_threads) {
    const int K = x->K, KG = x->KG, T = x->T, np = cpu_i4_panels(N), tk = cpu_i4_amx_tk(KG);
    const size_t bp = (size_t)K * 16, pb = cpu_i4_panel_bytes(K, KG); /* an unpacked panel; a packed one */
    int sp = (np + n_threads - 1) / n_threads;
    sp = sp < 1 ? 1 : sp > sp_max(K) ? sp_max(K) : sp;
    const int groups = (np + sp - 1) / sp;
    if (!x->tiles) tp_die("cpu int4: the amx GEMM was given x in row order; it reads x's planes in tile order");
    if (x->gx) tp_die("cpu int4: the amx GEMM has no 8-bit activations (tp_backend_cpu_int4_act8 leaves it out)");
    const int8_t *al = x->xlo, *ah = x->xhi; /* the A tiles, one after the other */
    uint8_t *Bs = x->work;                                      /* each thread's B rows (cpu_int4_amx_work_bytes) */
    #pragma omp parallel num_threads(n_threads) if (n_threads > 1 && groups > 1)
    {
        uint8_t *B = Bs + (size_t)omp_get_thread_num() * round64((size_t)sp_max(K) * K * 16);
        float f[TM][2 * NR];
        tiles_configure(tk); /* per thread: the tile state is the thread's */
        #pragma omp for schedule(static)
        for (int gi = 0; gi < groups; gi++) {
            const int P0 = gi * sp, npan = np - P0 < sp ? np - P0 : sp;
            for (int i = 0; i < npan; i++) unpack_panel(B + i * bp, cpu_i4_panel(q, K, KG, P0 + i), K, KG);
            for (int t0 = 0; t0 < T; t0 += TM) {
                const int m = T - t0 < TM ? T - t0 : TM;
                for (int pp = 0; pp < npan; pp += 2) {
                    const int n2 = npan - pp < 2 ? 1 : 2, n0 = (P0 + pp) * NR;
                    const int nn = N - n0 < n2 * NR ? N - n0 : n2 * NR;
                    block(x, al + (size_t)t0 * K, ah + (size_t)t0 * K, B + pp * bp, bp,
                          cpu_i4_panel(q, K, KG, P0 + pp), pb, n2, tk, f);
                    epi_block(e, x, t0, m, n0, nn, f);
                }
            }
        }
        tiles_release();
    }
}
#else
/* The block's m tokens through the epilogue (here for AVX-512: the OpenMP body is baseline
 * code, and its SSE epilogue was 6% of a prefill, perf). */
static AMX_FN void epi_block(const cpu_i4_epi *e, const cpu_i4_x *x, int t0, int m, int n0, int nn,
                             float f[TM][2 * NR]) {
    for (int t = 0; t < m; t++) cpu_i4_epi_row(e, t0 + t, x->sx[t0 + t], n0, nn, f[t]);
}

void cpu_int4_gemm_amx(const cpu_i4_x *x, const uint8_t *q, int N, const cpu_i4_epi *e, int n_threads) {
    (void)x, (void)q, (void)N, (void)e, (void)n_threads;
    tp_die_all("cpu int4: the amx kernel was called on a CPU other than x86-64");
}
size_t cpu_int4_amx_work_bytes(int K, int n_threads) {
    (void)K, (void)n_threads;
    return 0;
}
#endif
