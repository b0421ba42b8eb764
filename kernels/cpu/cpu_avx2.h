/* AVX2 helpers the packing routines of the GEMM kernels share (cpu_int8_gemm.c,
 * cpu_gemm_bf16w.c). Include only from x86-64 code built with an avx2 target attribute. */
#ifndef TPGEN_CPU_AVX2_H
#define TPGEN_CPU_AVX2_H

#include <immintrin.h>

/* r[j] = 8 elements of 32 bits of row j -> r[p] = element p of the 8 rows (8 x 8 transpose). */
static inline __attribute__((always_inline, target("avx2"))) void cpu_transpose8x32(__m256i r[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) { /* rows 4i..4i+3: u[4i + 0..3] hold elements {0,4}, {1,5}, {2,6}, {3,7} */
        u[4 * i + 0] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int p = 0; p < 4; p++) {
        r[p] = _mm256_permute2x128_si256(u[p], u[4 + p], 0x20);
        r[p + 4] = _mm256_permute2x128_si256(u[p], u[4 + p], 0x31);
    }
}

/* Inline-assembly pieces of the 6 x 16 micro-kernels (cpu_int8_gemm.c, cpu_gemm_bf16w.c): their
 * 12 accumulators ymm0-ymm11 zeroed (all-zero bits: int32 0 and f32 +0), stored to %[o]
 * (12 x 32 bytes, row-major [6][16] of 4-byte elements), and the clobbers of a kernel that
 * uses all 16 ymm registers. */
#define CPU_AVX2_ZERO12_ASM                                                                                            \
    "vpxor %%ymm0, %%ymm0, %%ymm0\n\tvpxor %%ymm1, %%ymm1, %%ymm1\n\tvpxor %%ymm2, %%ymm2, %%ymm2\n\t"                   \
    "vpxor %%ymm3, %%ymm3, %%ymm3\n\tvpxor %%ymm4, %%ymm4, %%ymm4\n\tvpxor %%ymm5, %%ymm5, %%ymm5\n\t"                   \
    "vpxor %%ymm6, %%ymm6, %%ymm6\n\tvpxor %%ymm7, %%ymm7, %%ymm7\n\tvpxor %%ymm8, %%ymm8, %%ymm8\n\t"                   \
    "vpxor %%ymm9, %%ymm9, %%ymm9\n\tvpxor %%ymm10, %%ymm10, %%ymm10\n\tvpxor %%ymm11, %%ymm11, %%ymm11\n\t"
#define CPU_AVX2_STORE12_ASM                                                                                           \
    "vmovups %%ymm0, (%[o])\n\tvmovups %%ymm1, 32(%[o])\n\tvmovups %%ymm2, 64(%[o])\n\t"                                \
    "vmovups %%ymm3, 96(%[o])\n\tvmovups %%ymm4, 128(%[o])\n\tvmovups %%ymm5, 160(%[o])\n\t"                            \
    "vmovups %%ymm6, 192(%[o])\n\tvmovups %%ymm7, 224(%[o])\n\tvmovups %%ymm8, 256(%[o])\n\t"                           \
    "vmovups %%ymm9, 288(%[o])\n\tvmovups %%ymm10, 320(%[o])\n\tvmovups %%ymm11, 352(%[o])\n\t"                         \
    "vzeroupper"
#define CPU_AVX2_CLOBBERS16                                                                                            \
    "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",  \
        "xmm12", "xmm13", "xmm14", "xmm15"

#endif
