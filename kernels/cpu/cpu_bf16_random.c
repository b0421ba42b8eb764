/* The bf16 CPU backend's random fill, in its own file: both the backend's fill_random
 * (cpu_bf16_ops.c) and the GEMM's panel fill (cpu_bf16_gemm.c, matrix_fill_random) draw through
 * it, so neither of those two files calls the other back. Built with -ffp-contract=off
 * (kernels/CMakeLists.txt): the draws are the f32 backend's bits, as the CUDA backend's bf16
 * fill gives them. */
#include <stddef.h>
#include <stdint.h>

#include "kernels/common/tp_act.h"
#include "kernels/common/tp_rng.h"
#include "kernels/cpu/cpu_bf16.h"
#include "kernels/cpu/cpu_internal.h"

/* The f32 backend's draws (a pure function of seed and index, kernels/common/tp_rng.h), rounded:
 * the bits the CUDA backend's bf16 fill gives. dst[i] is draw first + i (draws come in pairs,
 * 2 j and 2 j + 1). */
CPU_SIMD_CLONES void bf16_fill_random_range(tp_backend *b, uint16_t *dst, size_t first, size_t n, uint64_t seed,
                                            float mean, float std) {
    const uint64_t key = tp_rng_key(seed);
    const size_t j0 = first / 2, j1 = (first + n + 1) / 2;
    #pragma omp parallel for schedule(static) num_threads(cpu_threads(b)) if (n >= CPU_PAR_MIN)
    for (size_t j = j0; j < j1; j++) {
        float x[2];
        tp_fill_random_pair(key, (uint64_t)j, mean, std, &x[0], &x[1]);
        for (size_t i = 2 * j; i < 2 * j + 2; i++)
            if (i >= first && i < first + n) dst[i - first] = tp_f32_to_bf16(x[i - 2 * j]);
    }
}
