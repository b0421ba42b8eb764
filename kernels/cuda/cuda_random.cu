/* fill_random: element i gets mean + std * N(0,1) as a pure function of (seed, i), with the
 * generator of kernels/common/tp_rng.h that the CPU backend runs: splitmix64 of the seed and the
 * pair index j = i/2, two 24-bit uniforms, one f32 Box-Muller pair for elements 2j and 2j+1,
 * every operation rounded as on the host. So a random-weight model holds the same numbers on
 * either backend (the GPU then rounds them to F16/BF16 with tp_round.h), and `tpgen bench
 * --random-weights` on a GPU needs no file and no host pass. One thread per pair. */
#include "kernels/cuda/cuda_internal.h"

template <typename T>
__global__ void fill_random_kernel(T *d, size_t n, uint64_t key, float mean, float std) {
    const size_t n_pairs = (n + 1) / 2;
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n_pairs; j += (size_t)gridDim.x * blockDim.x) {
        float x0, x1;
        tp_fill_random_pair(key, (uint64_t)j, mean, std, &x0, &x1);
        d[2 * j] = tpc_from<T>(x0);
        if (2 * j + 1 < n) d[2 * j + 1] = tpc_from<T>(x1);
    }
}

void tpc_fill_random(tp_backend *b, void *dst, size_t n, uint64_t seed, float mean, float std) {
    tp_cuda *c = tpc(b);
    if (n == 0) return;
    const uint64_t key = tp_rng_key(seed);
    const unsigned grid = (unsigned)(c->sm_count * 8);
    if (b->act == TP_F16) fill_random_kernel<__half><<<grid, 256, 0, c->stream>>>((__half *)dst, n, key, mean, std);
    else fill_random_kernel<__nv_bfloat16><<<grid, 256, 0, c->stream>>>((__nv_bfloat16 *)dst, n, key, mean, std);
    CUDA_CHECK_LAUNCH();
}
