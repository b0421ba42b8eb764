/* fill_random: element i gets mean + std * N(0,1) as a pure function of (seed, i), with the
 * CPU backend's generator (kernels/cpu/cpu_random.c): splitmix64 of the seed and the index
 * gives 64 bits, split into two 32-bit uniforms for one Box-Muller draw, in double. So a
 * random-weight model is the same numbers (up to the final rounding to F16/BF16) on either
 * backend, and `tpgen bench --random-weights` on a GPU needs no file and no host pass. */
#include "kernels/cuda/cuda_internal.h"

__device__ __forceinline__ uint64_t splitmix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

template <typename T>
__global__ void fill_random_kernel(T *d, size_t n, uint64_t key, float mean, float std) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint64_t r = splitmix64(key + splitmix64((uint64_t)i));
        const double u1 = ((double)(r >> 32) + 1.0) * (1.0 / 4294967296.0);
        const double u2 = (double)(r & 0xffffffffu) * (1.0 / 4294967296.0);
        const double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
        d[i] = tpc_from<T>(mean + std * (float)z);
    }
}

void tpc_fill_random(tp_backend *b, void *dst, size_t n, uint64_t seed, float mean, float std) {
    tp_cuda *c = tpc(b);
    if (n == 0) return;
    /* same key derivation as cpu_fill_random */
    uint64_t z = (seed ^ 0x5eedf11157a7e5ull) + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    const uint64_t key = z ^ (z >> 31);
    const unsigned grid = (unsigned)(c->sm_count * 8);
    if (b->act == TP_F16) fill_random_kernel<__half><<<grid, 256, 0, c->stream>>>((__half *)dst, n, key, mean, std);
    else fill_random_kernel<__nv_bfloat16><<<grid, 256, 0, c->stream>>>((__nv_bfloat16 *)dst, n, key, mean, std);
    CUDA_CHECK_LAUNCH();
}
