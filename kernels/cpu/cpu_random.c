/* fill_random: element i of a buffer gets mean + std * N(0,1), a pure function of (seed, i), so
 * the fill is parallel and the same for any thread count. Counter-based: splitmix64 of the seed
 * and the index gives 64 random bits, split into two uniforms for one Box-Muller draw. */
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
    #pragma omp parallel for schedule(static) num_threads(cpu_threads(b)) if (n >= CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        const uint64_t r = splitmix64(key + splitmix64((uint64_t)i));
        /* u1 in (0, 1] so log is finite; u2 in [0, 1). 32 bits each. */
        const double u1 = ((double)(r >> 32) + 1.0) * (1.0 / 4294967296.0);
        const double u2 = (double)(r & 0xffffffffu) * (1.0 / 4294967296.0);
        const double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
        d[i] = mean + std * (float)z;
    }
}
