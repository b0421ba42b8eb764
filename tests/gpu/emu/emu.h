/* A host emulation of the CUDA execution model, under which the CUDA module's own sources
 * (kernels/cuda/*.cu, rewritten by tests/gpu/emu/cu_for_host.py) run on a machine without a GPU:
 * libtpgen-cuda-emu.so (docs/CUDA.md "The emulated device").
 *
 * Blocks run one after another; the threads of a block run as coroutines (ucontext) on one OS
 * thread, each until its next barrier: __syncthreads (every live thread of the block) or a warp
 * operation (shuffle, ballot, match: every live lane of its warp). Between barriers the threads
 * run in a seeded random order (TPGEN_EMU_SEED), so a missing barrier between one thread's write
 * and another's read changes results. A warp operation that reads a lane which has exited, or
 * threads that wait at barriers that can never all be met (a barrier in divergent code), stop the
 * job with a message naming the kernel. Atomics are plain read-modify-writes (coroutines never
 * interleave inside one). Not emulated: the device's float arithmetic (host rounding and
 * contraction differ), concurrency between blocks and streams, the memory model.
 *
 * A launch `K<T>(grid, block, smem, stream)(args)` written with <<< >>> becomes
 * `emu_launch(grid, block, smem, stream, "K", K<T>, args)`: the arguments are evaluated at the
 * launch and kept by value, so a launch recorded in a stream capture replays the values it had
 * then, as the driver does. Pointer arguments must be device memory (tests/gpu/emu/emu_rt.h). */
#ifndef TPGEN_TESTS_GPU_EMU_H
#define TPGEN_TESTS_GPU_EMU_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <functional>
#include <type_traits>

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
#define __shfl_xor_sync(mask, v, lane_mask) emu_shfl((v), 0, (lane_mask))
#define __shfl_up_sync(mask, v, delta) emu_shfl((v), 1, (delta))
#define __shfl_sync(mask, v, src) emu_shfl((v), 2, (src))
#define __ballot_sync(mask, p) emu_ballot((p) ? 1u : 0u)
#define __match_any_sync(mask, v) emu_match_any((uint64_t)(v))
#define __ldcs(p) (*(p))
#define __ffs(x) __builtin_ffs((int)(x))
#define __popc(x) __builtin_popcount((unsigned)(x))

extern dim3 emu_threadIdx, emu_blockIdx, emu_blockDim, emu_gridDim;
extern void *emu_dyn_smem; /* the block's dynamic shared memory (filled with garbage per block) */
void emu_syncthreads(void);
/* The warp's exchange: stores the calling lane's bits, waits for every live lane of its warp;
 * *slots then holds the 32 lanes' bits, *live the lanes that have not exited. emu_warp_end
 * waits again, so no lane overwrites a slot another has yet to read. */
void emu_warp_begin(uint64_t bits, const uint64_t **slots, unsigned *live);
void emu_warp_end(void);
[[noreturn]] void emu_lane_fault(const char *op, int lane, int src);

/* mode 0: xor, 1: up, 2: index */
template <class V> V emu_shfl(V v, int mode, int arg) {
    static_assert(sizeof(V) <= 8, "emu_shfl: a value of at most 8 bytes");
    uint64_t bits = 0;
    memcpy(&bits, &v, sizeof v);
    const uint64_t *s;
    unsigned live;
    emu_warp_begin(bits, &s, &live);
    const int lane = (int)(emu_threadIdx.x & 31);
    int src = mode == 0 ? lane ^ arg : mode == 1 ? (lane >= arg ? lane - arg : lane) : arg;
    if (src < 0 || src > 31 || !(live >> src & 1)) emu_lane_fault(mode == 0 ? "__shfl_xor_sync" : mode == 1 ? "__shfl_up_sync" : "__shfl_sync", lane, src);
    V r;
    memcpy(&r, &s[src], sizeof r);
    emu_warp_end();
    return r;
}
unsigned emu_ballot(unsigned p);
unsigned emu_match_any(uint64_t v);

template <class T> inline T atomicAdd(T *p, T v) {
    const T old = *p;
    *p = old + v;
    return old;
}
inline float __int_as_float(int i) {
    float f;
    memcpy(&f, &i, sizeof f);
    return f;
}
inline int __float_as_int(float f) {
    int i;
    memcpy(&i, &f, sizeof i);
    return i;
}

/* The emulated runtime's side of a launch (emu_rt.cpp): a launch on a capturing stream is
 * recorded, otherwise run now; kernel names the __global__ function (the launch report). */
void emu_submit(cudaStream_t s, const char *kernel, std::function<void()> run);
/* Dies naming the kernel when p (argument i) is not null and not device memory. */
void emu_check_arg(const char *kernel, int i, const void *p);
/* Dies naming the kernel when smem exceeds 48 KiB and the kernel's cudaFuncSetAttribute opt-in. */
void emu_check_smem(const char *kernel, const void *fn, size_t smem);
/* Runs f (one thread's kernel call) as every thread of every block (emu.cpp). */
void emu_run(const char *kernel, dim3 grid, dim3 block, size_t smem_bytes, const std::function<void()> &f);
long emu_barrier_count(void); /* thread arrivals at barriers so far */

template <class A> inline void emu_check_one(const char *kernel, int i, const A &a) {
    if constexpr (std::is_pointer<A>::value) emu_check_arg(kernel, i, (const void *)a);
}

template <class G, class B, class... P, class... A>
void emu_launch(G grid, B block, size_t smem_bytes, cudaStream_t s, const char *kernel, void (*fn)(P...), A... a) {
    static_assert(sizeof...(P) == sizeof...(A), "emu_launch: argument count");
    int i = 0;
    (emu_check_one(kernel, i++, a), ...);
    emu_check_smem(kernel, (const void *)fn, smem_bytes);
    const dim3 g = dim3(grid), b = dim3(block);
    emu_submit(s, kernel, [=]() { emu_run(kernel, g, b, smem_bytes, [&]() { fn(a...); }); });
}
/* cuda_runtime.h declares this overload for nvcc only */
template <class T> inline cudaError_t cudaFuncSetAttribute(T *fn, enum cudaFuncAttribute attr, int value) {
    return cudaFuncSetAttribute((const void *)fn, attr, value);
}
using std::max; /* CUDA's integer min/max, device-side in the kernels */
using std::min;

#endif
