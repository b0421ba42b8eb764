/* matrix_fill_random of the int8 CPU backend (kernels/cpu/cpu_int8.c), in its own file: built
 * with -ffp-contract=off like cpu_random.c (kernels/CMakeLists.txt), so the draws are the f32
 * backend's bits. */
#include "kernels/common/tp_quant.h"
#include "kernels/cpu/cpu_internal.h"

/* Element (r, c) = the f32 backend's fill_random draw r * cols + c (kernels/common/tp_rng.h),
 * quantized: bench --random-weights then runs the quantized f32 model. */
typedef struct {
    uint64_t key;
    float mean, std;
} draws;

/* The clones are static (clang 14: see cpu_random.c); the quantizer calls this one through a
 * pointer, which resolves to the clone for this CPU. */
CPU_SIMD_CLONES static void random_row(float *row, int r, int cols, const void *ctx) {
    const draws *d = ctx;
    tp_q8_random_row(row, d->key, r, cols, d->mean, d->std);
}

void cpu_int8_fill_random(tp_backend *b, void *dst, int rows, int cols, uint64_t seed, float mean, float std) {
    const draws d = {tp_rng_key(seed), mean, std};
    cpu_int8_quantize_matrix(b, dst, rows, cols, random_row, &d, NULL);
}
