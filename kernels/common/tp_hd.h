/* TP_HD: marks the element-wise math that the CPU and the CUDA backend must compute the same
 * way. The headers in kernels/common/ hold only TP_HD functions; the CPU backend's C files include them
 * as plain C (TP_HD is `static inline`), the CUDA backend's .cu files as `__host__ __device__` functions, and
 * tests/gpu_math/test_gpu_math.c checks them on the CPU. One implementation, two backends.
 *
 * Exact arithmetic: a C or CUDA compiler may fuse a * b + c into one fma (nvcc does by default),
 * which rounds once instead of twice and so changes low bits. Where both backends must agree bit
 * for bit (the random draws), the headers spell every operation with TP_MUL/TP_ADD/TP_SUB/TP_DIV
 * and tp_fmaf: on the device these are the _rn intrinsics, which nvcc never fuses; on the host
 * the files that use them build with -ffp-contract=off (kernels/CMakeLists.txt). */
#ifndef TPGEN_TP_HD_H
#define TPGEN_TP_HD_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define TP_HD static __host__ __device__ __forceinline__
#else
#define TP_HD static inline
#endif

#if defined(__CUDA_ARCH__)
#define TP_MUL(a, b) __fmul_rn((a), (b))
#define TP_ADD(a, b) __fadd_rn((a), (b))
#define TP_SUB(a, b) __fsub_rn((a), (b))
#define TP_DIV(a, b) __fdiv_rn((a), (b))
#define TP_SQRT(a) __fsqrt_rn(a)
#else
#include <math.h>
#define TP_MUL(a, b) ((a) * (b))
#define TP_ADD(a, b) ((a) + (b))
#define TP_SUB(a, b) ((a) - (b))
#define TP_DIV(a, b) ((a) / (b))
#define TP_SQRT(a) sqrtf(a)
#endif

/* fmaf, one rounding, on both sides (the C library's fmaf is exact with or without FMA hardware). */
TP_HD float tp_fmaf(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
    return __fmaf_rn(a, b, c);
#else
    return fmaf(a, b, c);
#endif
}

TP_HD uint32_t tp_f32_bits(float f) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
#endif
}

TP_HD float tp_bits_f32(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, 4);
    return f;
#endif
}

#endif
