/* A host emulation of the CUDA execution model, for running the backend's own kernel sources on
 * a machine without a GPU (tests/gpu/emu/test_cuda_emu.c): index errors, missing barriers between
 * a write and another thread's read of shared data... show up as wrong results against the CPU
 * backend, and out-of-bounds accesses under AddressSanitizer (TPGEN_SANITIZE=address).
 *
 * Blocks run one after another; the threads of a block run as coroutines (ucontext) on one OS
 * thread, each until its next __syncthreads, which returns when every live thread of the block has
 * reached it. A warp shuffle is a block-wide exchange between two such barriers, so it is right
 * only where the whole block shuffles together (the backend's reductions and its decode loops,
 * whose bounds are uniform over the block); the scheduler stops with a message when the threads
 * of a block wait at different kinds of barrier or a shuffle reads a lane that has exited.
 * Not emulated: atomics, cuBLAS, streams and events, warp divergence, the device's float
 * arithmetic (host rounding and contraction differ: results are compared to tolerances). Kernels
 * reach this header through tests/gpu/emu/cu_for_host.py, which rewrites <<< >>> launches and
 * dynamic shared memory; CUDA's own headers supply dim3, uint4, __half and __nv_bfloat16. */
#ifndef TPGEN_TESTS_GPU_EMU_H
#define TPGEN_TESTS_GPU_EMU_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

#include <algorithm>
#include <functional>

#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __shared__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static /* blocks run one at a time: one copy serves every block */
#define threadIdx emu_threadIdx
#define blockIdx emu_blockIdx
#define blockDim emu_blockDim
#define gridDim emu_gridDim
#define __syncthreads() emu_syncthreads()
#define __shfl_xor_sync(mask, v, lane_mask) emu_shfl_xor((v), (lane_mask))

extern dim3 emu_threadIdx, emu_blockIdx, emu_blockDim, emu_gridDim;
extern void *emu_dyn_smem; /* the block's dynamic shared memory (filled with garbage per block) */
void emu_syncthreads(void);
float emu_shfl_xor(float v, int lane_mask);
/* Runs f (a kernel call) as every thread of every block of grid x block (1-D blocks). */
void emu_run(dim3 grid, dim3 block, size_t smem_bytes, const std::function<void()> &f);
long emu_barrier_count(void); /* thread arrivals at barriers so far (the test prints it) */

template <class G, class B, class F> void emu_launch(G grid, B block, size_t smem_bytes, cudaStream_t, F f) {
    emu_run(dim3(grid), dim3(block), smem_bytes, std::function<void()>(f));
}
using std::max; /* CUDA's integer min/max, device-side in the kernels */
using std::min;

#endif
