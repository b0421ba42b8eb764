/* What the GPU op tests share (test_cuda_ops.c, test_cuda_int8.c): the two backends under
 * comparison, the check counters, the NMSE bounds and a seeded xorshift64* generator. Include
 * once, in the test's .c file. */
#ifndef TPGEN_TESTS_GPU_TEST_H
#define TPGEN_TESTS_GPU_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "kernels/backend.h"
#include "kernels/cuda_module.h"
#include "kernels/dtype.h"

static tp_backend *g_cpu, *g_gpu;
static int g_fail, g_checks;
static uint64_t g_rng;

/* NMSE bounds for results stored in the activation dtype. Rounding one value to F16 (unit
 * roundoff 2^-11) gives an NMSE of about (2^-11)^2 / 3 ~ 8e-8; to BF16 (2^-8), ~5e-6. The ops
 * here round once to three times and sum in a different f32 order than the CPU (~1e-7
 * relative), so the bounds are ~10x the one-rounding level: a wrong element of size ~1 in a
 * few thousand already exceeds them. */
static inline double tol_act(tp_dtype dt) { return dt == TP_F16 ? 1e-6 : 6e-5; }
/* f32 results from identical F16/BF16 inputs (matmul_f32out): the products are exact in f32 and
 * only the summation differs (order; tensor cores may truncate while aligning partial sums):
 * relative ~K 2^-24 at worst, NMSE <= ~1e-10 for K <= 1024. One wrong logit of size ~1 among
 * the 10^4 checked gives ~1e-4. */
#define TOL_F32 1e-8

/* The CUDA module loads into this test program (its exports are enough: kernels/cuda_module.h),
 * GPU or not: 0, or 1 after printing why. Run before the no-GPU skip, so a machine without a GPU
 * still checks it. */
static inline int gpu_test_module_loads(void) {
    char err[2048];
    if (tp_cuda_module_load(err, sizeof err) == 0) return 0;
    fprintf(stderr, "FAIL: %s\n", err);
    return 1;
}

/* ---- random numbers (xorshift64*) ---- */
static inline uint64_t rnd64(void) {
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 2685821657736338717ull;
}
static inline double rnd_u(void) { return ((rnd64() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
static inline float rnd_n(void) { return (float)(sqrt(-2.0 * log(rnd_u())) * cos(6.283185307179586 * rnd_u())); }
static inline int rnd_int(int n) { return (int)(rnd64() % (uint64_t)n); }

#endif
