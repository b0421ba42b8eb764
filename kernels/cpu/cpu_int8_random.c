/* The rows matrix_fill_random of the int8 CPU backend quantizes (kernels/cpu/cpu_int8.c), in their
 * own file: built with -ffp-contract=off like cpu_random.c (kernels/CMakeLists.txt), so the draws
 * are the f32 backend's bits. */
#include "kernels/common/tp_quant.h"
#include "kernels/cpu/cpu_internal.h"

/* Element (r, c) = the f32 backend's fill_random draw r * cols + c (kernels/common/tp_rng.h),
 * quantized: bench --random-weights then runs the quantized f32 model. */
/* The clones are static (clang 14: see cpu_random.c); the quantizer calls this one through a
 * pointer, which resolves to the clone for this CPU. */
CPU_SIMD_CLONES static void random_row(float *row, int r, int cols, const void *ctx) {
    const cpu_i8_draws *d = ctx;
    tp_q8_random_row(row, d->key, r, cols, d->mean, d->std);
}

cpu_i8_row_fn *cpu_int8_random_rows(void) { return random_row; }
