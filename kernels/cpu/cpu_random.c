/* fill_random: element i of a buffer gets mean + std * N(0,1), a pure function of (seed, i), so
 * the fill is parallel and the same for any thread count or buffer length. The generator
 * (splitmix64 of the seed and the pair index, two 24-bit uniforms, one f32 Box-Muller pair per
 * two elements) is kernels/common/tp_rng.h, which the CUDA backend runs too: both backends draw
 * the same bits. Built with -ffp-contract=off (kernels/CMakeLists.txt) so no fma changes them. */
#include "kernels/common/tp_rng.h"
#include "kernels/cpu/cpu_internal.h"

/* Cloned for x86-64-v3: the generator's fmaf calls become one instruction there (the C
 * library's software fmaf otherwise; both are exact, so the bits are the same either way).
 * The clones are static behind a plain exported function: clang 14 names the dispatcher of an
 * exported target_clones function "<name>.ifunc", so callers in other files found no symbol. */
CPU_SIMD_CLONES static void fill_random(tp_backend *b, void *dst, size_t n, uint64_t seed, float mean, float std) {
    float *d = (float *)dst;
    const uint64_t key = tp_rng_key(seed);
    const size_t n_pairs = (n + 1) / 2;
    #pragma omp parallel for schedule(static) num_threads(cpu_threads(b)) if (n >= CPU_PAR_MIN)
    for (size_t j = 0; j < n_pairs; j++) {
        float x0, x1;
        tp_fill_random_pair(key, (uint64_t)j, mean, std, &x0, &x1);
        d[2 * j] = x0;
        if (2 * j + 1 < n) d[2 * j + 1] = x1;
    }
}

void cpu_fill_random(tp_backend *b, void *dst, size_t n, uint64_t seed, float mean, float std) {
    fill_random(b, dst, n, seed, mean, std);
}
