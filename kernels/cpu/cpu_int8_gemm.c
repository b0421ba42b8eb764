/* int8 GEMM on the integer units for batched steps and prefill (--weights int8, T above the
 * GEMV range), AVX2: y[T, N] = epi(sx[t] * sum_k q[n, k] xq[t, k]) on the GEMV's int16 x
 * (cpu_int8_kernels.h). The sums are exact integers, so y is the same bits as the GEMV kernels and
 * their plain-C twin at every T: the GEMV/GEMM crossover changes no output.
 *
 * vpmaddwd multiplies int16 pairs and adds each pair: 16 products an instruction, exact where
 * 8-bit vpmaddubsw would saturate at 2^15. With its vpaddd, ~1.5 a cycle on Zen 3 (measured:
 * 54-69 G MAC/s a core against the f32 FMA's 46): the ceiling of exact int8 on AVX2.
 *
 * Blocking (per thread, groups of NR = 16-row panels of q; cpu_int8_gemm_avx2):
 *  - q is stored in panel order (cpu_int8_kernels.h: [KP][NR][2] int8 a panel, k pairs interleaved,
 *    32 B per pair, K * 16 B a panel: 16 KiB at K = 1024), so nothing is packed per call (the
 *    per-call int16 pack of each panel was 17% of a batch-32 step, perf); a thread takes a
 *    group of up to SP panels; x runs in chunks of up to XC_BYTES kept in L2 across the
 *    group's panels; from WIDEN_T tokens the group is first widened to int16 (one straight
 *    pass) for the 6-token tiles.
 *  - micro-kernel, MR = 6 tokens x NR = 16 rows: per k pair, 2 vpmovsxbw of the panel's 32
 *    bytes to int16, 6 broadcasts of x's pair (32 bits), 12 vpmaddwd + 12 vpaddd into 12 int32
 *    accumulators (+ 3 registers: 16 ymm), in assembly (tile6_asm; tile6w_asm on the int16
 *    copy: 2 vmovdqu instead of the vpmovsxbw); 1-5 token tiles in intrinsics. A lane sums at
 *    most 512 pair products of |.| <= 2 * 127 * 16383 < 2^22, so
 *    K > 1024 runs in blocks of KB = 512 pairs summed in double (exact below 2^53).
 *  - epilogue: (float) of the exact sum times sx, through cpu_i8_epi_row: the GEMV's
 *    arithmetic, so the GEMV's bits.
 * The GEMV path (cpu_int8_panels_avx2, T up to a few tokens) runs the same tiles over one
 * contiguous range of panels per thread. */
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "kernels/cpu/cpu_int8_kernels.h"

#define NB 2        /* int32 vectors of 8 rows per panel */
#define MR 6        /* tokens per micro-kernel tile */
#define NR CPU_I8_NR /* rows of q per panel */
#define PF 1024 /* bytes of prefetch distance in the small tiles (the GEMV path) */
#define KB 512      /* k pairs per int32 accumulation: 512 * 2 * 127 * 16383 < 2^31 */

#if defined(__x86_64__)
#include "kernels/cpu/cpu_avx2.h"
#define AVX2_FN static inline __attribute__((always_inline, target("avx2,fma")))
#define UNROLL _Pragma("GCC unroll 8")

/* o[t][0..NR) = the sums over pairs [0, np) of x row t . the panel's rows (bp at the first
 * pair), for MT < MR tokens at x (rows K apart), np <= KB. The broadcast reads x's pair as 32
 * bits: past K on odd K, where the panel is zero. */
AVX2_FN void tile_step(const int16_t *x, int K, const int8_t *b, long p, const int MT, __m256i a[MR][NB]) {
    __m256i bv[NB];
    UNROLL for (int h = 0; h < NB; h++) bv[h] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 16 * h)));
    UNROLL for (int t = 0; t < MT; t++) {
        int32_t pr;
        memcpy(&pr, x + (size_t)t * K + 2 * p, sizeof pr);
        const __m256i xv = _mm256_set1_epi32(pr);
        UNROLL for (int h = 0; h < NB; h++) a[t][h] = _mm256_add_epi32(a[t][h], _mm256_madd_epi16(xv, bv[h]));
    }
}
AVX2_FN void tile(const int16_t *x, int K, const int8_t *bp, long np, const int MT, int32_t o[MR][NR]) {
    __m256i a[MR][NB];
    UNROLL for (int t = 0; t < MT; t++)
        UNROLL for (int h = 0; h < NB; h++) a[t][h] = _mm256_setzero_si256();
    const int8_t *b = bp;
    long p = 0;
    for (; p + 2 <= np; p += 2, b += 4 * NR) { /* a cache line of the panel a step, prefetched PF ahead */
        _mm_prefetch((const char *)(b + PF), _MM_HINT_T0);
        tile_step(x, K, b, p, MT, a);
        tile_step(x, K, b + 2 * NR, p + 1, MT, a);
    }
    if (p < np) tile_step(x, K, b, p, MT, a);
    UNROLL for (int t = 0; t < MT; t++)
        UNROLL for (int h = 0; h < NB; h++) _mm256_storeu_si256((__m256i *)(o[t] + 8 * h), a[t][h]);
}

/* The full 6 x 16 tile in assembly: 12 int32 accumulators + 2 panel vectors (widened from the
 * pair's 32 bytes) + 2 scratch = the 16 ymm registers. gcc spilled or copied accumulators for
 * the same loop in intrinsics (~25 GMAC/s a core against ~50 here, measured). out [6][16]
 * int32: the sums over n <= KB pairs. I8G_ROW: one token's broadcast pair against the panel's
 * two vectors (ymm12, ymm13) into its two accumulators. */
#define I8G_ROW(R, A0, A1)                                                                                             \
    "vpbroadcastd " R ", %%ymm14\n\t"                                                                                  \
    "vpmaddwd %%ymm12, %%ymm14, %%ymm15\n\t"                                                                           \
    "vpaddd %%ymm15, " A0 ", " A0 "\n\t"                                                                               \
    "vpmaddwd %%ymm13, %%ymm14, %%ymm14\n\t"                                                                           \
    "vpaddd %%ymm14, " A1 ", " A1 "\n\t"
/* The 6 x 16 tile on the panel as int8 (LOAD2: two vpmovsxbw, STEP 32 bytes a pair), or on the
 * int16 copy of the widened path (two vmovdqu, 64 bytes a pair). */
#define TILE6_ASM(NAME, BT, LOAD2, STEP)                                                                               \
    __attribute__((target("avx2,fma"), noinline)) static void NAME(const int16_t *x, int K, const BT *bp, long n,      \
                                                                   int32_t out[MR][NR]) {                             \
        const int16_t *x3 = x + 3 * (size_t)K;                                                                         \
        const long ldx = 2 * (long)K; /* bytes between x rows */                                                       \
        __asm__ volatile(CPU_AVX2_ZERO12_ASM                                                                           \
                         "test %[n], %[n]\n\t"                                                                         \
                         "jle 2f\n"                                                                                    \
                         "1:\n\t"                                                                                      \
                         LOAD2                                                                                         \
                         I8G_ROW("(%[x])", "%%ymm0", "%%ymm1")                                                         \
                         I8G_ROW("(%[x],%[ldx])", "%%ymm2", "%%ymm3")                                                  \
                         I8G_ROW("(%[x],%[ldx],2)", "%%ymm4", "%%ymm5")                                                \
                         I8G_ROW("(%[x3])", "%%ymm6", "%%ymm7")                                                        \
                         I8G_ROW("(%[x3],%[ldx])", "%%ymm8", "%%ymm9")                                                 \
                         I8G_ROW("(%[x3],%[ldx],2)", "%%ymm10", "%%ymm11")                                             \
                         "add $4, %[x]\n\t"                                                                            \
                         "add $4, %[x3]\n\t"                                                                           \
                         "add $" STEP ", %[b]\n\t"                                                                     \
                         "dec %[n]\n\t"                                                                                \
                         "jnz 1b\n"                                                                                    \
                         "2:\n\t"                                                                                      \
                         CPU_AVX2_STORE12_ASM                                                                          \
                         : [x] "+r"(x), [x3] "+r"(x3), [b] "+r"(bp), [n] "+r"(n)                                       \
                         : [ldx] "r"(ldx), [o] "r"(&out[0][0])                                                         \
                         : CPU_AVX2_CLOBBERS16);                                                                       \
    }
TILE6_ASM(tile6_asm, int8_t, "vpmovsxbw (%[b]), %%ymm12\n\tvpmovsxbw 16(%[b]), %%ymm13\n\t", "32")
TILE6_ASM(tile6w_asm, int16_t, "vmovdqu (%[b]), %%ymm12\n\tvmovdqu 32(%[b]), %%ymm13\n\t", "64")

/* One function per tile height (MT a constant: the accumulators stay in registers; inlined into
 * one loop, gcc kept the loop's counters on the stack and ran 3x slower). */
typedef void tile_fn(const int16_t *x, int K, const int8_t *bp, long np, int32_t o[MR][NR]);
#define TILE_FN(M)                                                                                                     \
    __attribute__((target("avx2,fma"), noinline)) static void tile_##M(const int16_t *x, int K, const int8_t *bp,   \
                                                                        long np, int32_t o[MR][NR]) {                 \
        tile(x, K, bp, np, M, o);                                                                                      \
    }
TILE_FN(1)
TILE_FN(2)
TILE_FN(3)
TILE_FN(4)
TILE_FN(5)
static tile_fn *const g_tiles[MR + 1] = {NULL, tile_1, tile_2, tile_3, tile_4, tile_5, tile6_asm};
_Static_assert(MR == 6 && NB == 2, "the asm micro-kernel is 6 tokens x 16 rows");

/* Pairs [p0, p0 + np) of the panel for m tokens at x: 6-token tiles on the int16 copy bw where
 * there is one, everything else on the int8 panel bp. */
AVX2_FN void tile_run(int m, const int16_t *x, int K, const int8_t *bp, const int16_t *bw, long p0, long np,
                      int32_t o[MR][NR]) {
    if (bw && m == MR) tile6w_asm(x + 2 * p0, K, bw + p0 * 2 * NR, np, o);
    else g_tiles[m](x + 2 * p0, K, bp + p0 * 2 * NR, np, o);
}

/* Tokens [t0, t1) of one panel, then the epilogue: (float) of the exact sum, times sx.
 * One block of pairs (K <= 2 KB): int32 -> float directly; more: the blocks summed in double
 * (exact below 2^53), then rounded once -- the same float either way. */
__attribute__((target("avx2,fma"))) static void panel_tokens(const int16_t *xq, const float *sx, const int8_t *bp,
                                                               const int16_t *bw, int t0, int t1, int K, int n0,
                                                               int nn, const cpu_i8_epi *e) {
    const int KP = (K + 1) / 2;
    for (; t0 < t1; t0 += MR) {
        const int m = t1 - t0 < MR ? t1 - t0 : MR;
        const int16_t *x = xq + (size_t)t0 * K;
        int32_t o[MR][NR];
        float v[MR][NR];
        if (KP <= KB) {
            tile_run(m, x, K, bp, bw, 0, KP, o);
            for (int t = 0; t < m; t++)
                for (int j = 0; j < NR; j++) v[t][j] = (float)o[t][j] * sx[t0 + t];
        } else {
            double d[MR][NR];
            memset(d, 0, sizeof d);
            for (int p0 = 0; p0 < KP; p0 += KB) {
                tile_run(m, x, K, bp, bw, p0, KP - p0 < KB ? KP - p0 : KB, o);
                for (int t = 0; t < m; t++)
                    for (int j = 0; j < NR; j++) d[t][j] += o[t][j];
            }
            for (int t = 0; t < m; t++)
                for (int j = 0; j < NR; j++) v[t][j] = (float)d[t][j] * sx[t0 + t];
        }
        for (int t = 0; t < m; t++) cpu_i8_epi_row(e, t0 + t, n0, nn, v[t]);
    }
}

/* Panels [P0, P1) for tokens [t0, t1); bw: their int16 copy (panel_bytes apart) or NULL. */
static void panels(const int16_t *xq, const float *sx, const int8_t *q, const int16_t *bw, int t0, int t1, int N,
                   int K, int P0, int P1, const cpu_i8_epi *e) {
    for (int P = P0; P < P1; P++) {
        const int n0 = P * NR;
        panel_tokens(xq, sx, cpu_i8_panel(q, K, P), bw ? bw + (size_t)(P - P0) * cpu_i8_panel_bytes(K) : NULL, t0, t1,
                     K, n0, N - n0 < NR ? N - n0 : NR, e);
    }
}

void cpu_int8_panels_avx2(const int16_t *xq, const float *sx, const int8_t *q, int T, int N, int K, int P0, int P1,
                          const cpu_i8_epi *e) {
    panels(xq, sx, q, NULL, 0, T, N, K, P0, P1, e);
}

/* n bytes of q -> int16 (contiguous panels: the layout keeps their order). */
__attribute__((target("avx2,fma"))) static void widen(int16_t *bw, const int8_t *q, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(bw + i), _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(q + i))));
    for (; i < n; i++) bw[i] = q[i];
}

/* Threads take groups of up to SP panels (SP * K * 16 B of q: 256 KiB at K = 1024, in L2);
 * each group runs x in chunks of MC tokens (MC * K * 2 B <= XC_BYTES, kept in L2 across the
 * group's panels: streaming all of x per panel from L3 ran at 0.7x). From WIDEN_T tokens a
 * thread first widens its group to int16 (no transposes: a straight vpmovsxbw pass), and the
 * 6-token tiles read that: widening in the micro-kernel adds 2 uops to its 26 a pair, and at
 * T = 512, where the tiles are all that runs, that cost ~5% (process CPU time, one thread,
 * against the row-major q packed per call); below, the copy costs more than it saves. */
#define SP 16
#define XC_BYTES (192 << 10)
#define WIDEN_T 128
void cpu_int8_gemm_avx2(const int16_t *xq, const float *sx, const int8_t *q, int T, int N, int K, const cpu_i8_epi *e,
                        int n_threads) {
    const int np = cpu_i8_panels(N);
    int sp = (np + n_threads - 1) / n_threads; /* every thread a group at least */
    sp = sp < 1 ? 1 : sp > SP ? SP : sp;
    const int groups = (np + sp - 1) / sp;
    int mc = (int)(XC_BYTES / (2 * (size_t)K)) / MR * MR;
    mc = mc < MR ? MR : mc;
    const size_t pb = cpu_i8_panel_bytes(K);
    #pragma omp parallel num_threads(n_threads) if (n_threads > 1 && groups > 1)
    {
        int16_t *bw = T >= WIDEN_T ? tp_malloc((size_t)sp * pb * sizeof(int16_t)) : NULL;
        #pragma omp for schedule(static)
        for (int g = 0; g < groups; g++) {
            const int P0 = g * sp, P1 = np - P0 < sp ? np : P0 + sp;
            if (bw) widen(bw, cpu_i8_panel(q, K, P0), (size_t)(P1 - P0) * pb);
            for (int t0 = 0; t0 < T; t0 += mc) panels(xq, sx, q, bw, t0, T - t0 < mc ? T : t0 + mc, N, K, P0, P1, e);
        }
        free(bw);
    }
}
#else
void cpu_int8_gemm_avx2(const int16_t *xq, const float *sx, const int8_t *q, int T, int N, int K, const cpu_i8_epi *e,
                        int n_threads) {
    (void)xq, (void)sx, (void)q, (void)T, (void)N, (void)K, (void)e, (void)n_threads;
    tp_die_all("cpu int8: the AVX2 GEMM was called on a CPU other than x86-64");
}
void cpu_int8_panels_avx2(const int16_t *xq, const float *sx, const int8_t *q, int T, int N, int K, int P0, int P1,
                          const cpu_i8_epi *e) {
    (void)xq, (void)sx, (void)q, (void)T, (void)N, (void)K, (void)P0, (void)P1, (void)e;
    tp_die_all("cpu int8: the AVX2 GEMV was called on a CPU other than x86-64");
}
#endif
