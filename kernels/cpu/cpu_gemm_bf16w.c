/* f32 products on the FMA units for bf16 weights in panels (kernels/cpu/cpu_bf16.h), AVX2: the
 * bf16 backend's GEMV (T <= few_tokens) and its batched GEMM (larger T) on CPUs without native
 * bf16. y[T, N] = x[T, K] @ W^T in f32.
 *
 * A panel holds 8 rows by k pairs: per pair, one 32-byte vector of 8 x (w[k], w[k+1]). The
 * micro-kernel widens it in registers with two unpacks against zero (a bf16 is the high half of
 * its f32): lo = rows {0, 1, 4, 5} and hi = rows {2, 3, 6, 7}, each as (w[k], w[k+1]) lanes,
 * and multiplies both by x's pair (x[k], x[k+1]) broadcast as 64 bits. Each lane then sums the
 * even or the odd products of one row; hadd(lo, hi) at the end gives rows 0-7 in order. Per
 * pair and 6 tokens: 2 loads of the panel (as the unpacks' operands), 2 unpacks, 6 broadcasts
 * and 12 vfmadd231ps into 12 accumulators (+ lo, hi, the broadcast and a zero = 16 ymm), in
 * assembly (gcc's intrinsics for such loops ran at half the rate: cpu_int8_gemm.c). 1-5 token
 * tiles: intrinsics, a prefetch per line, 1 KiB ahead of their stream (the GEMV reads W from
 * memory).
 *
 * Nothing is packed per call: the layout is written once at upload. (The previous GEMM widened
 * W per call into f32 [K][16] panels: 22% of a bf16 batch-32 step went to that pack, perf.)
 * Sums: per row, the even products and the odd products, each in k order with one FMA per
 * product (1-3 token tiles: alternate pairs in two sets, added at the end), then added; y
 * differs from OpenBLAS's by summation order only. */
#include <omp.h>
#include <string.h>

#include "util/log.h"
#include "kernels/cpu/cpu_bf16.h"

#define NR BF16_NR
#define MR 6
#define SP 16                /* panels per thread group: SP * K * 16 B of W (256 KiB at K = 1024), in L2 */
#define XC_BYTES (192 << 10) /* x chunk kept in L2 across a group's panels */
#define PF 512               /* elements (1 KiB) of prefetch distance in the small tiles */

#if defined(__x86_64__)
#include "kernels/cpu/cpu_avx2.h"
#define AVX2_FN static inline __attribute__((always_inline, target("avx2,fma")))
#define UNROLL _Pragma("GCC unroll 8")

/* Raw tile: o[t][0..8) the lo accumulator, o[t][8..16) the hi one (file comment). */
typedef float raw_tile[MR][2 * NR];

/* One pair p of the panel b for MT tokens at x (rows ldx apart) into a[t] (lo) / a[t + MR] (hi). */
AVX2_FN void tile_step(const float *x, long ldx, const uint16_t *b, long p, const int MT, __m256 a[2 * MR]) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)(b + p * 2 * NR)), z = _mm256_setzero_si256();
    const __m256 lo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(z, v)),
                 hi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(z, v));
    UNROLL for (int t = 0; t < MT; t++) {
        const __m256 xv = _mm256_castpd_ps(_mm256_broadcast_sd((const double *)(x + t * ldx + 2 * p)));
        a[t] = _mm256_fmadd_ps(lo, xv, a[t]);
        a[t + MR] = _mm256_fmadd_ps(hi, xv, a[t + MR]);
    }
}
/* Pairs [0, np) for MT < MR tokens. Up to 3 tokens, two accumulator sets (even and odd pairs)
 * keep 4 MT >= 4 FMA chains in flight. */
AVX2_FN void tile(const float *x, long ldx, const uint16_t *bp, long np, const int MT, raw_tile o) {
    const int U = MT <= 3 ? 2 : 1;
    __m256 a[2][2 * MR];
    UNROLL for (int u = 0; u < U; u++)
        UNROLL for (int t = 0; t < MT; t++) a[u][t] = a[u][t + MR] = _mm256_setzero_ps();
    long p = 0;
    for (; p + 2 <= np; p += 2) { /* a 64-byte line of the panel a step */
        _mm_prefetch((const char *)(bp + p * 2 * NR + PF), _MM_HINT_T0);
        tile_step(x, ldx, bp, p, MT, a[0]);
        tile_step(x, ldx, bp, p + 1, MT, a[U - 1]);
    }
    if (p < np) tile_step(x, ldx, bp, p, MT, a[0]);
    UNROLL for (int t = 0; t < MT; t++) {
        __m256 lo = a[0][t], hi = a[0][t + MR];
        if (U == 2) {
            lo = _mm256_add_ps(lo, a[1][t]);
            hi = _mm256_add_ps(hi, a[1][t + MR]);
        }
        _mm256_storeu_ps(o[t], lo);
        _mm256_storeu_ps(o[t] + NR, hi);
    }
}

/* One token's broadcast pair (ymm14) against lo (ymm12) and hi (ymm13) into its accumulators. */
#define BW_ROW(R, A0, A1)                                                                                              \
    "vbroadcastsd " R ", %%ymm14\n\t"                                                                                  \
    "vfmadd231ps %%ymm12, %%ymm14, " A0 "\n\t"                                                                         \
    "vfmadd231ps %%ymm13, %%ymm14, " A1 "\n\t"
/* The 6-token tile over pairs [0, n): token t's lo in ymm(2t), hi in ymm(2t + 1), stored as
 * o[t][0..16) (CPU_AVX2_STORE12_ASM's [6][16]); ymm15 stays zero for the unpacks, whose
 * second operand is the panel's pair vector in memory. (A variant on an f32 copy of the panels
 * made once per call, without the unpacks, was no faster at T = 2048: median 63.5 GFLOP/s on
 * one thread against 65.7, 6 alternating runs of bench_bf16_gemm; slower were that copy with x
 * packed per tile, 61, and widening by a shift and a mask with x[k] and x[k+1] broadcast
 * apart, 54 against 64.) */
__attribute__((target("avx2,fma"), noinline)) static void tile6_asm(const float *x, long ldx, const uint16_t *bp,
                                                                    long n, raw_tile o) {
    const float *x3 = x + 3 * ldx;
    const long ldb = 4 * ldx; /* bytes between x rows */
    __asm__ volatile(
        CPU_AVX2_ZERO12_ASM
        "vpxor %%ymm15, %%ymm15, %%ymm15\n\t"
        "test %[n], %[n]\n\t"
        "jle 2f\n"
        "1:\n\t"
        "vpunpcklwd (%[b]), %%ymm15, %%ymm12\n\t"
        "vpunpckhwd (%[b]), %%ymm15, %%ymm13\n\t"
        BW_ROW("(%[x])", "%%ymm0", "%%ymm1")
        BW_ROW("(%[x],%[ldb])", "%%ymm2", "%%ymm3")
        BW_ROW("(%[x],%[ldb],2)", "%%ymm4", "%%ymm5")
        BW_ROW("(%[x3])", "%%ymm6", "%%ymm7")
        BW_ROW("(%[x3],%[ldb])", "%%ymm8", "%%ymm9")
        BW_ROW("(%[x3],%[ldb],2)", "%%ymm10", "%%ymm11")
        "add $8, %[x]\n\t"
        "add $8, %[x3]\n\t"
        "add $32, %[b]\n\t"
        "dec %[n]\n\t"
        "jnz 1b\n"
        "2:\n\t"
        CPU_AVX2_STORE12_ASM
        : [x] "+r"(x), [x3] "+r"(x3), [b] "+r"(bp), [n] "+r"(n)
        : [ldb] "r"(ldb), [o] "r"(&o[0][0])
        : CPU_AVX2_CLOBBERS16);
}

/* One function per tile height (MT a constant: the accumulators stay in registers). */
typedef void tile_fn(const float *x, long ldx, const uint16_t *bp, long np, raw_tile o);
#define TILE_FN(M)                                                                                                     \
    __attribute__((target("avx2,fma"), noinline)) static void tile_##M(const float *x, long ldx, const uint16_t *bp, \
                                                                        long np, raw_tile o) {                        \
        tile(x, ldx, bp, np, M, o);                                                                                    \
    }
TILE_FN(1)
TILE_FN(2)
TILE_FN(3)
TILE_FN(4)
TILE_FN(5)
static tile_fn *const g_tiles[MR + 1] = {NULL, tile_1, tile_2, tile_3, tile_4, tile_5, tile6_asm};
_Static_assert(MR == 6 && NR == 8, "the asm micro-kernel is 6 tokens x 8 rows");

/* raw (lo, hi) -> y's 8 columns in order, m tokens, then the epilogue. */
__attribute__((target("avx2,fma"))) static void tile_out(raw_tile raw, int t0, int m, int n0, int nn,
                                                           cpu_gemm_epi_fn *epi, const void *ctx) {
    float o[MR][NR];
    for (int t = 0; t < m; t++)
        _mm256_storeu_ps(o[t], _mm256_hadd_ps(_mm256_loadu_ps(raw[t]), _mm256_loadu_ps(raw[t] + NR)));
    epi(ctx, &o[0][0], NR, t0, m, n0, nn);
}

/* Tokens [t0, t1) of the panel bp (rows [n0, n0 + nn)), then the epilogue. Tiles of 6 tokens
 * and the rest, or (even) groups of at most 6 when the tokens are few (8 = 4 + 4, not 6 + 2). */
__attribute__((target("avx2,fma"))) static void panel_tokens(const float *xf, long ldx, const uint16_t *bp, int t0,
                                                               int t1, long np, int n0, int nn, int even,
                                                               cpu_gemm_epi_fn *epi, const void *ctx) {
    const int groups = (t1 - t0 + MR - 1) / MR;
    for (int g = 0; t0 < t1; g++) {
        const int left = groups - g, m = even ? (t1 - t0 + left - 1) / left : t1 - t0 < MR ? t1 - t0 : MR;
        raw_tile raw;
        g_tiles[m](xf + (size_t)t0 * ldx, ldx, bp, np, raw);
        tile_out(raw, t0, m, n0, nn, epi, ctx);
        t0 += m;
    }
}

/* Panels [P0, P1) for tokens [t0, t1). */
static void panels(const float *xf, const uint16_t *W, int t0, int t1, int N, int K, int P0, int P1, int even,
                   cpu_gemm_epi_fn *epi, const void *ctx) {
    for (int P = P0; P < P1; P++) {
        const int n0 = P * NR;
        panel_tokens(xf, (long)bf16_ldx(K), bf16_panel(W, K, P), t0, t1, bf16_k2(K), n0, N - n0 < NR ? N - n0 : NR,
                     even, epi, ctx);
    }
}

void cpu_bf16_panels_avx2(const float *xf, const uint16_t *W, int T, int N, int K, int P0, int P1,
                          cpu_gemm_epi_fn *epi, const void *ctx) {
    panels(xf, W, 0, T, N, K, P0, P1, 1, epi, ctx);
}

/* Threads take groups of up to SP panels; each group runs x in chunks of mc tokens (a multiple
 * of 6, mc * K * 4 B <= XC_BYTES, kept in L2 across the group's panels). */
void cpu_gemm_bf16w_avx2(const float *xf, const uint16_t *W, int T, int N, int K, cpu_gemm_epi_fn *epi,
                         const void *ctx, int n_threads) {
    const int np = bf16_n_panels(N);
    int sp = (np + n_threads - 1) / n_threads; /* every thread a group at least */
    sp = sp < 1 ? 1 : sp > SP ? SP : sp;
    const int groups = (np + sp - 1) / sp;
    int mc = (int)(XC_BYTES / (4 * bf16_ldx(K))) / MR * MR;
    mc = mc < MR ? MR : mc;
    #pragma omp parallel for schedule(static) num_threads(n_threads) if (n_threads > 1 && groups > 1)
    for (int g = 0; g < groups; g++) {
        const int P0 = g * sp, P1 = np - P0 < sp ? np : P0 + sp;
        for (int t0 = 0; t0 < T; t0 += mc) panels(xf, W, t0, T - t0 < mc ? T : t0 + mc, N, K, P0, P1, 0, epi, ctx);
    }
}
#else
void cpu_bf16_panels_avx2(const float *xf, const uint16_t *W, int T, int N, int K, int P0, int P1,
                          cpu_gemm_epi_fn *epi, const void *ctx) {
    (void)xf, (void)W, (void)T, (void)N, (void)K, (void)P0, (void)P1, (void)epi, (void)ctx;
    tp_die_all("cpu bf16: the AVX2 GEMV was called on a CPU other than x86-64");
}
void cpu_gemm_bf16w_avx2(const float *xf, const uint16_t *W, int T, int N, int K, cpu_gemm_epi_fn *epi,
                         const void *ctx, int n_threads) {
    (void)xf, (void)W, (void)T, (void)N, (void)K, (void)epi, (void)ctx, (void)n_threads;
    tp_die_all("cpu bf16: the AVX2 GEMM was called on a CPU other than x86-64");
}
#endif

/* ---- the layout (portable) ---- */
void bf16_pack_panels(uint16_t *dst, const uint16_t *plain, int N, int K, int n_threads) {
    const int np = bf16_n_panels(N), K2 = bf16_k2(K), Ke = K & ~1;
    #pragma omp parallel for schedule(static) num_threads(n_threads) if (n_threads > 1 && (size_t)N * K >= 1 << 16)
    for (int P = 0; P < np; P++) {
        uint16_t *d = dst + (size_t)P * bf16_panel_elems(K);
        memset(d, 0, bf16_panel_elems(K) * sizeof *d);
        for (int r = 0; r < NR && P * NR + r < N; r++) {
            const uint16_t *w = plain + (size_t)(P * NR + r) * K;
            uint16_t *o = d + 2 * r;
            for (int k = 0; k < Ke; k += 2, o += 2 * NR) memcpy(o, w + k, 2 * sizeof *w); /* one 32-bit pair */
            if (K & 1) d[(size_t)(K2 - 1) * 2 * NR + 2 * r] = w[K - 1];
        }
    }
}
