/* int4 GEMV and GEMM tiles on AVX-512 VNNI (zmm): the arithmetic of cpu_int4_kernels.h, so the
 * plain-C twin's bits.
 *
 * A 64-byte line of a panel is k [8 s, 8 s + 8) of its 16 rows as 32 words of 4 nibbles
 * (cpu_int4_kernels.h). One load, then two byte masks: raw & 0x0F holds in each int32 lane (a
 * row) its k 8 s + {0, 4, 1, 5}, the high nibbles its k 8 s + {2, 6, 3, 7}: the order of x's
 * byte planes (cpu_i4_xperm). vpdpbusd multiplies the nibbles (its unsigned operand) by x's
 * signed lo and hi bytes (4 bytes broadcast) and adds 4 products into each int32 lane: 64
 * products an instruction, exact; sum q xq = 256 (sum q hi) + (sum q lo). 4 vpdpbusd a line.
 * The high nibbles are taken in place (raw & 0xF0: 16 q, still a byte) where the two nibble
 * halves have chains of their own (S = 2): that chain's sums are then 16 times the true ones
 * (|16 s| < 2^27 over a group of at most 8192 k) and an exact arithmetic shift right by 4 at the
 * group's end undoes it. This spares the vpsrlw a line (port 0 with vpdpbusd on Intel); at S = 1
 * (the GEMM's tiles, where the unpack is shared by 3 or more tokens) the nibbles are shifted.
 * Per group: the lanes hold sum q xq (wrapping int32), minus zero * sum xq (vpmulld, the zeros
 * widened from bytes, x's group sum broadcast) = the exact s (cpu_int4_kernels.h); then
 * acc = vfmadd(cvt(s), scale, acc): the twin's fmaf, one rounding. 8-bit x (--int4-activations
 * int8): the lo plane alone, 2 vpdpbusd a line, and scale * gx (ztile's A8).
 * Tiles: MT tokens x NP panels (16 rows each), all of K, the f32 sums to o; the int32 lanes split
 * by nibble half in S = 2 chains at MT <= 2 (T = 1: 4 chains, lo and hi). One or two tokens: one
 * panel a tile; three or more: two panels (x's broadcasts serve both) x up to 4 tokens.
 * GEMV (T <= few): a thread's range of panels one sequential read, its tokens in tiles. GEMM: the
 * same tiles over the caller's blocking (groups of panels, x in chunks kept in L2: cpu_int4.c). */
#include <string.h>

#include "util/log.h"
#include "kernels/cpu/cpu_int4_kernels.h"

#define NR CPU_I4_NR
#define ZMR 8 /* tokens a GEMM tile */
#define GMR 8 /* tokens a GEMV tile */

#if defined(__x86_64__)
#include <immintrin.h>

#define Z_TARGET "avx512f,avx512bw,avx512vl,avx512vnni"
#define Z_FN static inline __attribute__((always_inline, target(Z_TARGET)))
#define UNROLL _Pragma("GCC unroll 8")

/* acc += the products of a's 4 unsigned bytes and b's 4 signed bytes per lane (vpdpbusd). In
 * asm, in place: with the intrinsic gcc 12 copied every accumulator once a step (objdump: 16
 * vmovdqa a line pair at T = 1 for 8 vpdpwssd). */
#define DPBUSD(acc, a, b) __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b))

static inline int32_t x_quad(const void *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* o[t][16 j + r] = the f32 sums (acc, before sx) of token t0 + t, row r of panel j of the NP
 * panels from p0 (pb bytes apart). S = 2: the even and odd bytes' sums in chains of their own
 * (T = 1: 4 chains).
 * NP = 2 (S = 1, MT <= Z2MR): each broadcast of x's bytes serves both panels' lines, where one
 * panel gives one vpdpbusd a broadcast. A GEMM on Zen 5 took 11-21% less time so (2 panels x 3
 * or 4 tokens against 1 x 8, 2 threads, 350M LLaMA shape's matrices at T = 512, alternating;
 * 3 and 4 panels were no better: docs/KERNELS.md, "int4 weights on the CPU").
 * A8, 8-bit x (x->gx; cpu_int4_kernels.h): xq's hi bytes are 0, so one vpdpbusd a nibble half, 2
 * a line, and the group's scale times x's (one vmulps, the twin's product). The chains of the hi
 * plane then take the odd lines at MT <= 2 (PP = 2 lines a step): 4 chains a token hide
 * vpdpbusd's latency where 2 did not. */
#define ZNP 2  /* panels a tile at most */
#define Z2MR 4 /* tokens a two-panel tile */
Z_FN void ztile(const cpu_i4_x *x, const uint8_t *p0, size_t pb, size_t pfd, int t0, const int MT, const int NP,
                const int S, const int A8, float o[ZMR][ZNP * NR]) {
    const int K = x->K, KG = x->KG, ng = K / KG, steps = KG / 8; /* steps: a multiple of 4 (KG of 32) */
    const int PP = A8 && MT <= 2 ? 2 : 1, NA = A8 ? PP : 2;       /* lines a step; chain sets */
    const int8_t *xl = x->xlo + (size_t)t0 * K, *xh = x->xhi + (size_t)t0 * K;
    const int32_t *xs = x->xsum + (size_t)t0 * ng;
    const float *gx = A8 ? x->gx + (size_t)t0 * ng : NULL;
    const __m512i m4 = _mm512_set1_epi8(15);
    __m512 f[ZMR][ZNP];
    UNROLL for (int t = 0; t < MT; t++) UNROLL for (int j = 0; j < NP; j++) f[t][j] = _mm512_setzero_ps();
    for (int g = 0; g < ng; g++) {
        /* [lo / hi plane of x (16-bit), even / odd line (8-bit)][panel][nibble half][token] */
        __m512i a[2][ZNP][2][ZMR];
        UNROLL for (int i = 0; i < NA; i++) UNROLL for (int j = 0; j < NP; j++) UNROLL for (int c = 0; c < S; c++)
            UNROLL for (int t = 0; t < MT; t++) a[i][j][c][t] = _mm512_setzero_si512();
        const uint8_t *line = p0 + (size_t)g * KG * 8;
        const size_t kg = (size_t)g * KG;
        for (int s = 0; s < steps; s += PP) {
            UNROLL for (int p = 0; p < PP; p++, line += 64) {
                __m512i w[ZNP][2];
                UNROLL for (int j = 0; j < NP; j++) {
                    const uint8_t *lj = line + j * pb;
                    cpu_i4_prefetch(lj, MT, pfd);
                    const __m512i raw = _mm512_load_si512((const void *)lj);
                    w[j][0] = _mm512_and_si512(raw, m4);
                    w[j][1] = S == 2 ? _mm512_andnot_si512(m4, raw) /* 16 q */
                                     : _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
                }
                UNROLL for (int t = 0; t < MT; t++) UNROLL for (int c = 0; c < 2; c++) {
                    const size_t at = (size_t)t * K + kg + 8 * (size_t)(s + p) + 4 * c;
                    const __m512i bl = _mm512_set1_epi32(x_quad(xl + at)); /* x lo (signed) */
                    UNROLL for (int j = 0; j < NP; j++) DPBUSD(a[p][j][c % S][t], w[j][c], bl);
                    if (!A8) {
                        const __m512i bh = _mm512_set1_epi32(x_quad(xh + at)); /* x hi */
                        UNROLL for (int j = 0; j < NP; j++) DPBUSD(a[1][j][c % S][t], w[j][c], bh);
                    }
                }
            }
        }
        UNROLL for (int j = 0; j < NP; j++) {
            const uint8_t *pj = p0 + j * pb;
            const __m512i z = _mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(cpu_i4_zeros(pj, K, KG) + g * NR)));
            const __m512 scv = _mm512_load_ps(cpu_i4_scales(pj, K) + g * NR);
            UNROLL for (int t = 0; t < MT; t++) {
                __m512i v[2];
                UNROLL for (int i = 0; i < NA; i++) { /* the high nibbles' chains hold 16 times their sums: exact shifts */
                    v[i] = a[i][j][0][t];
                    if (S == 2) v[i] = _mm512_add_epi32(v[i], _mm512_srai_epi32(a[i][j][1][t], 4));
                }
                __m512i r = A8 ? (PP == 2 ? _mm512_add_epi32(v[0], v[1]) : v[0])
                               : _mm512_add_epi32(_mm512_slli_epi32(v[1], 8), v[0]); /* sum q xq, wrapping */
                r = _mm512_sub_epi32(r, _mm512_mullo_epi32(z, _mm512_set1_epi32(xs[(size_t)t * ng + g])));
                const __m512 c = A8 ? _mm512_mul_ps(scv, _mm512_set1_ps(gx[(size_t)t * ng + g])) /* rounded */
                                    : scv;
                f[t][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(r), c, f[t][j]);
            }
        }
    }
    UNROLL for (int t = 0; t < MT; t++) UNROLL for (int j = 0; j < NP; j++) _mm512_storeu_ps(o[t] + j * NR, f[t][j]);
}

typedef void ztile_fn(const cpu_i4_x *x, const uint8_t *p0, size_t pb, size_t pfd, int t0, float o[ZMR][ZNP * NR]);
#define ZTILE(M, NP, S, A8)                                                                                            \
    __attribute__((target(Z_TARGET), noinline)) static void ztile_##M##_##NP##_##A8(                                \
        const cpu_i4_x *x, const uint8_t *p0, size_t pb, size_t pfd, int t0, float o[ZMR][ZNP * NR]) {                \
        ztile(x, p0, pb, pfd, t0, M, NP, S, A8, o);                                                                    \
    }
#define ZTILES(A8)                                                                                                     \
    ZTILE(1, 1, 2, A8) ZTILE(2, 1, 2, A8) ZTILE(3, 1, 1, A8) ZTILE(4, 1, 1, A8) ZTILE(5, 1, 1, A8) ZTILE(6, 1, 1, A8) \
    ZTILE(7, 1, 1, A8) ZTILE(8, 1, 1, A8) ZTILE(1, 2, 1, A8) ZTILE(2, 2, 1, A8) ZTILE(3, 2, 1, A8) ZTILE(4, 2, 1, A8)
ZTILES(0)
ZTILES(1)
/* [A8][NP - 1][tokens] */
static ztile_fn *const g_ztiles[2][ZNP][ZMR + 1] = {
    {{NULL, ztile_1_1_0, ztile_2_1_0, ztile_3_1_0, ztile_4_1_0, ztile_5_1_0, ztile_6_1_0, ztile_7_1_0, ztile_8_1_0},
     {NULL, ztile_1_2_0, ztile_2_2_0, ztile_3_2_0, ztile_4_2_0}},
    {{NULL, ztile_1_1_1, ztile_2_1_1, ztile_3_1_1, ztile_4_1_1, ztile_5_1_1, ztile_6_1_1, ztile_7_1_1, ztile_8_1_1},
     {NULL, ztile_1_2_1, ztile_2_2_1, ztile_3_2_1, ztile_4_2_1}}};

/* Panels [P0, P1) in order (one sequential read), tokens [t0, t1) in tiles of mr, each tile
 * through the epilogue (built for AVX-512: vectors of 16 in its passes). Three tokens or more:
 * two panels a tile (Z2MR tokens), the last panel of an odd count alone. Prefetch (tiles of 3+
 * tokens): CPU_I4_PF ahead, or in the GEMV (gemv: the panels streamed from memory) a two-panel tile's
 * lines one pair ahead (the same lines of the next pair; CPU_I4_PF ahead of one panel's line lands in
 * the other panel of its pair, already being read: T = 4 took 6-16% longer so, T = 8 4%). */
__attribute__((target(Z_TARGET))) static void zpanels(const cpu_i4_x *x, const uint8_t *q, int N, int P0, int P1, int t0, int t1, const cpu_i4_epi *e,
                    int mr, int gemv) {
    float o[ZMR][ZNP * NR];
    const size_t pb = cpu_i4_panel_bytes(x->K, x->KG);
    const int pair = t1 - t0 >= 3;
    for (int P = P0; P < P1;) {
        const int np = pair && P + 1 < P1 ? 2 : 1, mt = np == 2 ? Z2MR : mr;
        ztile_fn *const *tiles = g_ztiles[x->gx != NULL][np - 1];
        const int n0 = P * NR, nn = N - n0 < np * NR ? N - n0 : np * NR;
        for (int t = t0; t < t1; t += mt) {
            const int m = t1 - t < mt ? t1 - t : mt;
            tiles[m](x, cpu_i4_panel(q, x->K, x->KG, P), pb, gemv && np == 2 ? 2 * pb : CPU_I4_PF, t, o);
            for (int i = 0; i < m; i++) cpu_i4_epi_row(e, t + i, x->sx[t + i], n0, nn, o[i]);
        }
        P += np;
    }
}

void cpu_int4_gemv_avx512vnni(const cpu_i4_x *x, const uint8_t *q, int N, int P0, int P1, int t0, int t1,
                              const cpu_i4_epi *e) {
    zpanels(x, q, N, P0, P1, t0, t1, e, GMR, 1);
}
void cpu_int4_gemm_avx512vnni(const cpu_i4_x *x, const uint8_t *q, int N, int P0, int P1, int t0, int t1,
                              const cpu_i4_epi *e) {
    zpanels(x, q, N, P0, P1, t0, t1, e, ZMR, 0);
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
