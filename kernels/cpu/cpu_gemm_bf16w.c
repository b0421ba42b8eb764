/* f32 GEMM on the FMA units for bf16 weights, AVX2 (the bf16 backend's batched steps and
 * prefill on CPUs without native bf16): y[T, N] = x[T, K] @ W^T in f32, W [N, K] bf16.
 *
 * OpenBLAS needs W in f32: the panel path widened W into a buffer and OpenBLAS packed that
 * buffer again, two extra passes that made bf16 prefill 0.82x f32 (docs/CPU_BF16.md). Here W
 * is widened straight into the packed layout the micro-kernel reads:
 *  - pack: a panel of NR = 16 rows of W as f32 [K][16] (zeros past N), K * 64 B, a group of up
 *    to SP panels per thread at a time; 8 rows x 8 k widened (a shift) and transposed.
 *  - micro-kernel, 6 tokens x 16 rows: per k, 2 loads of the panel, 6 broadcasts of x, 12
 *    vfmadd231ps into 12 accumulators (+ 2 + 1 = 15 ymm), in assembly like the int8 GEMM's
 *    (cpu_int8_gemm.c: gcc's intrinsics for such loops ran at half the rate). 1-5 token tiles:
 *    intrinsics.
 *  - x in chunks of up to XC_BYTES kept in L2 across a group's panels. (Blocks of 256 k, a
 *    panel's block in L1 across the tiles, measured no faster at K = 1024 and 0.75x at K = 4096.)
 * Sums run in k order with one FMA per product (f32), so y differs from OpenBLAS's by summation
 * order only; the caller's epilogue takes each 6 x 16 tile. */
#include <omp.h>

#include "util/log.h"
#include "kernels/common/tp_round.h"
#include "kernels/cpu/cpu_bf16.h"

#define NR 16
#define MR 6
#define SP 8
#define XC_BYTES (192 << 10)

size_t cpu_gemm_bf16w_pack_floats(int K) { return (size_t)SP * NR * (size_t)(K > 0 ? K : 1); }

#if defined(__x86_64__)
#include "kernels/cpu/cpu_avx2.h"
#define AVX2_FN static inline __attribute__((always_inline, target("avx2,fma")))
#define UNROLL _Pragma("GCC unroll 8")

/* Rows [n0, n0 + nn) of W [., K] bf16 -> bp [K][NR] f32 (zeros past nn). */
__attribute__((target("avx2,fma"))) static void pack_panel(float *bp, const uint16_t *W, int K, int n0, int nn) {
    int k0 = 0;
    if (nn == NR)
        for (; k0 + 8 <= K; k0 += 8)
            for (int h = 0; h < 2; h++) {
                __m256i r[8];
                for (int j = 0; j < 8; j++)
                    r[j] = _mm256_slli_epi32(
                        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(W + (size_t)(n0 + 8 * h + j) * K + k0))),
                        16);
                cpu_transpose8x32(r);
                for (int p = 0; p < 8; p++) _mm256_storeu_si256((__m256i *)(bp + (size_t)(k0 + p) * NR + 8 * h), r[p]);
            }
    for (int k = k0; k < K; k++)
        for (int j = 0; j < NR; j++) bp[(size_t)k * NR + j] = j < nn ? tp_bf16_to_f32(W[(size_t)(n0 + j) * K + k]) : 0.0f;
}

/* o[t][0..16) = sum over k of x row t (rows K apart) . the panel's rows, MT < MR tokens. */
AVX2_FN void tile(const float *x, int K, const float *bp, const int MT, float o[MR][NR]) {
    __m256 a[MR][2];
    UNROLL for (int t = 0; t < MT; t++) a[t][0] = a[t][1] = _mm256_setzero_ps();
    for (int k = 0; k < K; k++, bp += NR) {
        const __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
        UNROLL for (int t = 0; t < MT; t++) {
            const __m256 xv = _mm256_broadcast_ss(x + (size_t)t * K + k);
            a[t][0] = _mm256_fmadd_ps(xv, b0, a[t][0]);
            a[t][1] = _mm256_fmadd_ps(xv, b1, a[t][1]);
        }
    }
    UNROLL for (int t = 0; t < MT; t++) {
        _mm256_storeu_ps(o[t], a[t][0]);
        _mm256_storeu_ps(o[t] + 8, a[t][1]);
    }
}

#define BW_ROW(R, A0, A1)                                                                                              \
    "vbroadcastss " R ", %%ymm14\n\t"                                                                                  \
    "vfmadd231ps %%ymm12, %%ymm14, " A0 "\n\t"                                                                         \
    "vfmadd231ps %%ymm13, %%ymm14, " A1 "\n\t"
/* The full 6 x 16 tile over all K: 12 accumulators + 2 panel vectors + 1 broadcast. */
__attribute__((target("avx2,fma"), noinline)) static void tile6_asm(const float *x, int K, const float *bp,
                                                                    float out[MR][NR]) {
    long n = K;
    const float *x3 = x + 3 * (size_t)K;
    const long ldx = 4 * (long)K; /* bytes between x rows */
    __asm__ volatile(
        CPU_AVX2_ZERO12_ASM
        "test %[n], %[n]\n\t"
        "jle 2f\n"
        "1:\n\t"
        "vmovups (%[b]), %%ymm12\n\t"
        "vmovups 32(%[b]), %%ymm13\n\t"
        BW_ROW("(%[x])", "%%ymm0", "%%ymm1")
        BW_ROW("(%[x],%[ldx])", "%%ymm2", "%%ymm3")
        BW_ROW("(%[x],%[ldx],2)", "%%ymm4", "%%ymm5")
        BW_ROW("(%[x3])", "%%ymm6", "%%ymm7")
        BW_ROW("(%[x3],%[ldx])", "%%ymm8", "%%ymm9")
        BW_ROW("(%[x3],%[ldx],2)", "%%ymm10", "%%ymm11")
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

typedef void tile_fn(const float *x, int K, const float *bp, float o[MR][NR]);
#define TILE_FN(M)                                                                                                     \
    __attribute__((target("avx2,fma"), noinline)) static void tile_##M(const float *x, int K, const float *bp,      \
                                                                        float o[MR][NR]) {                            \
        tile(x, K, bp, M, o);                                                                                          \
    }
TILE_FN(1)
TILE_FN(2)
TILE_FN(3)
TILE_FN(4)
TILE_FN(5)
static tile_fn *const g_tiles[MR + 1] = {NULL, tile_1, tile_2, tile_3, tile_4, tile_5, tile6_asm};

void cpu_gemm_bf16w_avx2(const float *xf, const uint16_t *W, int T, int N, int K, cpu_gemm_epi_fn *epi,
                         const void *ctx, float *const *pack, int n_threads) {
    const int panels = (N + NR - 1) / NR;
    const size_t panel_floats = (size_t)NR * (size_t)K;
    int sp = (panels + n_threads - 1) / n_threads;
    sp = sp < 1 ? 1 : sp > SP ? SP : sp;
    const int groups = (panels + sp - 1) / sp;
    int mc = (int)(XC_BYTES / (4 * (size_t)K)) / MR * MR;
    mc = mc < MR ? MR : mc;
    #pragma omp parallel num_threads(n_threads) if (n_threads > 1 && groups > 1)
    {
        float *bp = pack[omp_get_thread_num()];
        #pragma omp for schedule(static)
        for (int g = 0; g < groups; g++) {
            const int p0 = g * sp, np = panels - p0 < sp ? panels - p0 : sp;
            for (int i = 0; i < np; i++) {
                const int n0 = (p0 + i) * NR;
                pack_panel(bp + (size_t)i * panel_floats, W, K, n0, N - n0 < NR ? N - n0 : NR);
            }
            for (int c0 = 0; c0 < T; c0 += mc) {
                const int c1 = T - c0 < mc ? T : c0 + mc;
                for (int i = 0; i < np; i++) {
                    const int n0 = (p0 + i) * NR, nn = N - n0 < NR ? N - n0 : NR;
                    for (int t0 = c0; t0 < c1; t0 += MR) {
                        const int m = c1 - t0 < MR ? c1 - t0 : MR;
                        float o[MR][NR];
                        g_tiles[m](xf + (size_t)t0 * K, K, bp + (size_t)i * panel_floats, o);
                        epi(ctx, &o[0][0], NR, t0, m, n0, nn);
                    }
                }
            }
        }
    }
}
#else
void cpu_gemm_bf16w_avx2(const float *xf, const uint16_t *W, int T, int N, int K, cpu_gemm_epi_fn *epi,
                         const void *ctx, float *const *pack, int n_threads) {
    (void)xf, (void)W, (void)T, (void)N, (void)K, (void)epi, (void)ctx, (void)pack, (void)n_threads;
    tp_die_all("cpu bf16: the AVX2 GEMM was called on a CPU other than x86-64");
}
#endif
