/* fill_random: element i of a buffer gets mean + std * N(0,1), a pure function of (seed, i), so
 * the fill is parallel and the same for any thread count or buffer length. Counter-based:
 * splitmix64 of the seed and the pair index i/2 gives 64 random bits, two 24-bit uniforms, and
 * one Box-Muller transform whose cos and sin halves are elements 2j and 2j+1. f32 math: the
 * tails reach 5.7 sigma, plenty for random benchmark weights. */
#include <math.h>

#include "kernels/cpu/cpu_internal.h"

static inline uint64_t splitmix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void cpu_fill_random(tp_backend *b, void *dst, size_t n, uint64_t seed, float mean, float std) {
    float *d = (float *)dst;
    const uint64_t key = splitmix64(seed ^ 0x5eedf11157a7e5ull);
    const size_t n_pairs = (n + 1) / 2;
    #pragma omp parallel for schedule(static) num_threads(cpu_threads(b)) if (n >= CPU_PAR_MIN)
    for (size_t j = 0; j < n_pairs; j++) {
        const uint64_t r = splitmix64(key + splitmix64((uint64_t)j));
        const float u1 = (float)((r >> 40) + 1) * 0x1p-24f;     /* (0, 1]: log is finite */
        const float u2 = (float)(r & 0xffffffu) * 0x1p-24f;     /* [0, 1) */
        const float rad = sqrtf(-2.0f * logf(u1));
        float sn, cs;
        sincosf(6.2831853f * u2, &sn, &cs);
        d[2 * j] = mean + std * (rad * cs);
        if (2 * j + 1 < n) d[2 * j + 1] = mean + std * (rad * sn);
    }
}
