/* matrix_fill_random of the int8 CPU backend (kernels/cpu/cpu_int8.c), in its own file: built
 * with -ffp-contract=off like cpu_random.c (kernels/CMakeLists.txt), so the draws are the f32
 * backend's bits (the GEMV kernels in cpu_int8.c want their FMAs). */
#include <stdlib.h>

#include "util/log.h"
#include "kernels/common/tp_quant.h"
#include "kernels/cpu/cpu_internal.h"

/* Element (r, c) = the f32 backend's fill_random draw r * cols + c (kernels/common/tp_rng.h),
 * quantized: bench --random-weights then runs the quantized f32 model. */
/* The clones are static behind a plain exported function (clang 14: see cpu_random.c). */
CPU_SIMD_CLONES static void int8_fill_random(tp_backend *b, void *dst, int rows, int cols, uint64_t seed,
                                             float mean, float std) {
    int8_t *q = dst;
    float *sc = (float *)((char *)dst + cpu_int8_q_bytes(rows, cols));
    const uint64_t key = tp_rng_key(seed);
    #pragma omp parallel num_threads(cpu_threads(b)) if ((size_t)rows * cols >= CPU_PAR_MIN)
    {
        float *tmp = tp_malloc((size_t)(cols > 0 ? cols : 1) * sizeof(float));
        #pragma omp for schedule(static)
        for (int r = 0; r < rows; r++) {
            tp_q8_random_row(tmp, key, r, cols, mean, std);
            cpu_int8_quantize_row(q + (size_t)r * cols, &sc[r], tmp, cols, tp_q8_absmax(tmp, cols));
        }
        free(tmp);
    }
}


void cpu_int8_fill_random(tp_backend *b, void *dst, int rows, int cols, uint64_t seed, float mean, float std) {
    int8_fill_random(b, dst, rows, cols, seed, mean, std);
}
