/* int8 GEMM on the integer units for batched steps and prefill (--weights int8, T above the
 * GEMV range), AVX2: y[T, N] = epi(sx[t] * sum_k q[n, k] xq[t, k]) on the GEMV's int16 x
 * (cpu_int8.h). The sums are exact integers, so y is the same bits as the GEMV kernels and
 * their plain-C twin at every T: the GEMV/GEMM crossover changes no output.
 *
 * vpmaddwd multiplies int16 pairs and adds each pair: 16 products an instruction, exact where
 * 8-bit vpmaddubsw would saturate at 2^15. With its vpaddd, ~1.5 a cycle on Zen 3 (measured:
 * 54-69 G MAC/s a core against the f32 FMA's 46): the ceiling of exact int8 on AVX2.
 *
 * Blocking (per thread, groups of NR = 16-row panels of q; cpu_int8_gemm_avx2):
 *  - pack: the panel's rows, widened to int16, k pairs interleaved: bp [KP][NR][2] with
 *    KP = ceil(K / 2) pairs (zeros past K and past N), 64 B per pair, K * 32 B in all (32 KiB
 *    at K = 1024); a thread packs a group of up to SP panels once per call; x runs in chunks
 *    of up to XC_BYTES kept in L2 across the group's panels.
 *  - micro-kernel, MR = 6 tokens x NR = 16 rows: per k pair, 2 loads of bp, 6 broadcasts of
 *    x's pair (32 bits), 12 vpmaddwd + 12 vpaddd into 12 int32 accumulators (+ 3 registers:
 *    16 ymm), in assembly (tile6_asm); 1-5 token tiles in intrinsics. A lane sums at most
 *    512 pair products of |.| <= 2 * 127 * 16383 < 2^22, so K > 1024 runs in blocks of KB = 512
 *    pairs summed in double (exact below 2^53).
 *  - epilogue: (float) of the exact sum times sx, through cpu_i8_epi_row: the GEMV's
 *    arithmetic, so the GEMV's bits. */
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "kernels/cpu/cpu_int8.h"

#define NB 2        /* int32 vectors of 8 rows per panel */
#define MR 6        /* tokens per micro-kernel tile */
#define NR (8 * NB) /* rows of q per panel */
#define KB 512      /* k pairs per int32 accumulation: 512 * 2 * 127 * 16383 < 2^31 */

#if defined(__x86_64__)
#include "kernels/cpu/cpu_avx2.h"
#define AVX2_FN static inline __attribute__((always_inline, target("avx2,fma")))
#define UNROLL _Pragma("GCC unroll 8")

/* Rows [n0, n0 + nn) of q [., K] -> bp [KP][NR][2] int16, zeros past K and past nn. Full panels
 * 16 k at a time (8 rows x 8 pairs transposed per vector of the panel), the rest element-wise. */
__attribute__((target("avx2,fma"))) static void pack_panel(int16_t *bp, const int8_t *q, int K, int n0, int nn) {
    const int KP = (K + 1) / 2;
    int k0 = 0;
    if (nn == NR)
        for (; k0 + 16 <= K; k0 += 16)
            for (int h = 0; h < NB; h++) {
                __m256i r[8];
                for (int j = 0; j < 8; j++)
                    r[j] = _mm256_cvtepi8_epi16(
                        _mm_loadu_si128((const __m128i *)(q + (size_t)(n0 + 8 * h + j) * K + k0)));
                cpu_transpose8x32(r); /* 8 rows x 8 k pairs -> 8 pairs x 8 rows */
                for (int p = 0; p < 8; p++)
                    _mm256_storeu_si256((__m256i *)(bp + (size_t)(k0 / 2 + p) * 2 * NR + 16 * h), r[p]);
            }
    for (int p = k0 / 2; p < KP; p++)
        for (int j = 0; j < NR; j++) {
            const int8_t *row = q + (size_t)(n0 + j) * K;
            int16_t *d = bp + (size_t)p * 2 * NR + 2 * j;
            d[0] = j < nn ? row[2 * p] : 0;
            d[1] = j < nn && 2 * p + 1 < K ? row[2 * p + 1] : 0;
        }
}

/* o[t][0..NR) = the sums over pairs [0, np) of x row t . the panel's rows (bp at the first
 * pair), for MT < MR tokens at x (rows K apart), np <= KB. The broadcast reads x's pair as 32
 * bits: past K on odd K, where the panel is zero. */
AVX2_FN void tile(const int16_t *x, int K, const int16_t *bp, long np, const int MT, int32_t o[MR][NR]) {
    __m256i a[MR][NB];
    UNROLL for (int t = 0; t < MT; t++)
        UNROLL for (int h = 0; h < NB; h++) a[t][h] = _mm256_setzero_si256();
    const int16_t *b = bp;
    for (long p = 0; p < np; p++, b += 2 * NR) {
        __m256i bv[NB];
        UNROLL for (int h = 0; h < NB; h++) bv[h] = _mm256_loadu_si256((const __m256i *)(b + 16 * h));
        UNROLL for (int t = 0; t < MT; t++) {
            int32_t pr;
            memcpy(&pr, x + (size_t)t * K + 2 * p, sizeof pr);
            const __m256i xv = _mm256_set1_epi32(pr);
            UNROLL for (int h = 0; h < NB; h++) a[t][h] = _mm256_add_epi32(a[t][h], _mm256_madd_epi16(xv, bv[h]));
        }
    }
    UNROLL for (int t = 0; t < MT; t++)
        UNROLL for (int h = 0; h < NB; h++) _mm256_storeu_si256((__m256i *)(o[t] + 8 * h), a[t][h]);
}

/* The full 6 x 16 tile in assembly: 12 int32 accumulators + 2 panel vectors + 2 scratch = the
 * 16 ymm registers. gcc spilled or copied accumulators for the same loop in intrinsics (~25
 * GMAC/s a core against ~50 here, measured). out [6][16] int32: the sums over n <= KB pairs. */
#define I8G_ROW(R, A0, A1)                                                                                             \
    "vpbroadcastd " R ", %%ymm14\n\t"                                                                                  \
    "vpmaddwd %%ymm12, %%ymm14, %%ymm15\n\t"                                                                           \
    "vpaddd %%ymm15, " A0 ", " A0 "\n\t"                                                                               \
    "vpmaddwd %%ymm13, %%ymm14, %%ymm14\n\t"                                                                           \
    "vpaddd %%ymm14, " A1 ", " A1 "\n\t"
__attribute__((target("avx2,fma"), noinline)) static void tile6_asm(const int16_t *x, int K, const int16_t *bp, long n,
                                                                    int32_t out[MR][NR]) {
    const int16_t *x3 = x + 3 * (size_t)K;
    const long ldx = 2 * (long)K; /* bytes between x rows */
    __asm__ volatile(
        CPU_AVX2_ZERO12_ASM
        "test %[n], %[n]\n\t"
        "jle 2f\n"
        "1:\n\t"
        "vmovdqu (%[b]), %%ymm12\n\t"
        "vmovdqu 32(%[b]), %%ymm13\n\t"
        I8G_ROW("(%[x])", "%%ymm0", "%%ymm1")
        I8G_ROW("(%[x],%[ldx])", "%%ymm2", "%%ymm3")
        I8G_ROW("(%[x],%[ldx],2)", "%%ymm4", "%%ymm5")
        I8G_ROW("(%[x3])", "%%ymm6", "%%ymm7")
        I8G_ROW("(%[x3],%[ldx])", "%%ymm8", "%%ymm9")
        I8G_ROW("(%[x3],%[ldx],2)", "%%ymm10", "%%ymm11")
        "add $4, %[x]\n\t"
        "add $4, %[x3]\n\t"
        "add $64, %[b]\n\t"
        "dec %[n]\n\t"
        "jnz 1b\n"
        "2:\n\t"
        CPU_AVX2_STORE12_ASM
        : [x] "+r"(x), [x3] "+r"(x3), [b] "+r"(bp), [n] "+r"(n)
        : [ldx] "r"(ldx), [o] "r"(&out[0][0])
        : CPU_AVX2_CLOBBERS16);
}

/* One function per tile height (MT a constant: the accumulators stay in registers; inlined into
 * one loop, gcc kept the loop's counters on the stack and ran 3x slower). */
typedef void tile_fn(const int16_t *x, int K, const int16_t *bp, long np, int32_t o[MR][NR]);
#define TILE_FN(M)                                                                                                     \
    __attribute__((target("avx2,fma"), noinline)) static void tile_##M(const int16_t *x, int K, const int16_t *bp,  \
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

/* Tokens [t0, t1) of one packed panel, then the epilogue: (float) of the exact sum, times sx.
 * One block of pairs (K <= 2 KB): int32 -> float directly; more: the blocks summed in double
 * (exact below 2^53), then rounded once -- the same float either way. */
__attribute__((target("avx2,fma"))) static void panel_tokens(const int16_t *xq, const float *sx, const int16_t *bp,
                                                               int t0, int t1, int K, int n0, int nn,
                                                               const cpu_i8_epi *e) {
    const int KP = (K + 1) / 2;
    for (; t0 < t1; t0 += MR) {
        const int m = t1 - t0 < MR ? t1 - t0 : MR;
        const int16_t *x = xq + (size_t)t0 * K;
        int32_t o[MR][NR];
        float v[MR][NR];
        if (KP <= KB) {
            g_tiles[m](x, K, bp, KP, o);
            for (int t = 0; t < m; t++)
                for (int j = 0; j < NR; j++) v[t][j] = (float)o[t][j] * sx[t0 + t];
        } else {
            double d[MR][NR];
            memset(d, 0, sizeof d);
            for (int p0 = 0; p0 < KP; p0 += KB) {
                g_tiles[m](x + 2 * (size_t)p0, K, bp + (size_t)p0 * 2 * NR, KP - p0 < KB ? KP - p0 : KB, o);
                for (int t = 0; t < m; t++)
                    for (int j = 0; j < NR; j++) d[t][j] += o[t][j];
            }
            for (int t = 0; t < m; t++)
                for (int j = 0; j < NR; j++) v[t][j] = (float)d[t][j] * sx[t0 + t];
        }
        for (int t = 0; t < m; t++) cpu_i8_epi_row(e, t0 + t, n0, nn, v[t]);
    }
}

/* Threads take groups of up to SP panels (SP * NR rows of q), packed once into SP * K * 32 B
 * (L2/L3); each group runs x in chunks of MC tokens (MC * K * 2 B <= XC_BYTES, kept in L2
 * across the group's panels: streaming all of x per panel from L3 ran at 0.7x). */
#define SP 16
#define XC_BYTES (192 << 10)
void cpu_int8_gemm_avx2(const int16_t *xq, const float *sx, const int8_t *q, int T, int N, int K, const cpu_i8_epi *e,
                        int n_threads) {
    const int panels = (N + NR - 1) / NR;
    const size_t panel_elems = (size_t)((K + 1) / 2) * 2 * NR;
    int sp = (panels + n_threads - 1) / n_threads; /* every thread a group at least */
    sp = sp < 1 ? 1 : sp > SP ? SP : sp;
    const int groups = (panels + sp - 1) / sp;
    int mc = (int)(XC_BYTES / (2 * (size_t)K)) / MR * MR;
    mc = mc < MR ? MR : mc;
    #pragma omp parallel num_threads(n_threads) if (n_threads > 1 && groups > 1)
    {
        int16_t *bp = tp_malloc((size_t)sp * panel_elems * sizeof(int16_t));
        #pragma omp for schedule(static)
        for (int g = 0; g < groups; g++) {
            const int p0 = g * sp, np = panels - p0 < sp ? panels - p0 : sp;
            for (int i = 0; i < np; i++) {
                const int n0 = (p0 + i) * NR;
                pack_panel(bp + (size_t)i * panel_elems, q, K, n0, N - n0 < NR ? N - n0 : NR);
            }
            for (int t0 = 0; t0 < T; t0 += mc) {
                const int t1 = T - t0 < mc ? T : t0 + mc;
                for (int i = 0; i < np; i++) {
                    const int n0 = (p0 + i) * NR;
                    panel_tokens(xq, sx, bp + (size_t)i * panel_elems, t0, t1, K, n0, N - n0 < NR ? N - n0 : NR, e);
                }
            }
        }
        free(bp);
    }
}
#else
void cpu_int8_gemm_avx2(const int16_t *xq, const float *sx, const int8_t *q, int T, int N, int K, const cpu_i8_epi *e,
                        int n_threads) {
    (void)xq, (void)sx, (void)q, (void)T, (void)N, (void)K, (void)e, (void)n_threads;
    tp_die_all("cpu int8: the AVX2 GEMM was called on a CPU other than x86-64");
}
#endif
