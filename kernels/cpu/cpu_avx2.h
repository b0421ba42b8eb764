/* AVX2 pieces the GEMM micro-kernels share (cpu_int8_gemm.c, cpu_gemm_bf16w.c). Include only
 * from x86-64 code built with an avx2 target attribute. */
#ifndef TPGEN_CPU_AVX2_H
#define TPGEN_CPU_AVX2_H

#include <immintrin.h>

/* Inline-assembly pieces of the 6-token micro-kernels (cpu_int8_gemm.c, cpu_gemm_bf16w.c): their
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
