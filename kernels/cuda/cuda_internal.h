/* Shared by the kernels/cuda/*.cu files: the backend's private state, element-type helpers for
 * device code, and the host launchers each file defines (kernels first, launchers after them in
 * each file, as in llm.c).
 *
 * Threading: one backend = one device and one non-blocking stream; every op, copy and cuBLAS
 * call is issued on that stream, so ops are ordered without events. Only the *_to_host ops and
 * sync wait for the device. */
#ifndef TPGEN_CUDA_INTERNAL_H
#define TPGEN_CUDA_INTERNAL_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

/* The math both backends share (before the extern "C" block: these are C++ here). */
#include "kernels/common/tp_act.h"
#include "kernels/common/tp_kv.h"
#include "kernels/common/tp_logits.h"
#include "kernels/common/tp_norm.h"
#include "kernels/common/tp_rng.h"
#include "kernels/common/tp_rotary.h"
#include "kernels/common/tp_round.h"

extern "C" {
#include "util/log.h"
#include "kernels/backend.h"
#include "kernels/cuda_module.h" /* the module's entry points: C linkage */
}
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_plan.h"

#define TPC_MAX_GRAPHS 64
#define TPC_MAX_GRAVEYARD 64
#define TPC_LT_PLANS 64

typedef struct {
    tp_backend base; /* first: a tp_backend * is a tp_cuda * */
    int device, rank;
    int sm_count;
    cudaStream_t stream;
    cublasHandle_t cublas;
    cublasLtHandle_t lt; /* cuBLASLt: GEMMs whose bias (and fc_in's GELU) go in the f32 epilogue */
    void *cublas_ws; /* cuBLAS / cuBLASLt workspace (set explicitly so graph capture never allocates) */
    struct tpc_lt_plan *lt_plans; /* [TPC_LT_PLANS] cached cuBLASLt descriptors + algorithm, by shape */
    int n_lt_plans, lt_victim;

    /* Pinned staging for host<->device copies: two buffers used in turn, each with an event
     * recorded after the last copy out of it. Small copies (a step's ids, positions, block table)
     * are packed one after another into the current buffer, so they never wait; the host waits
     * only when it switches to the other buffer and that buffer's copies are still in flight.
     * conv[i]: device buffer of the same size, where raw F32/F16/BF16 chunks land before the
     * dtype-conversion kernel (same offsets as stage[i]). */
    size_t stage_bytes;
    void *stage[2];
    void *conv[2];
    cudaEvent_t stage_ev[2];
    int stage_cur;
    size_t stage_used;

    /* Attention split-K partials [T, Hl, n_splits, D + 2] f32 and the logits_stats buffer. With a
     * memory plan (reserve_scratch) both are allocated once at their maximum and never grow: a
     * step beyond the plan's limits dies. Without one (direct op tests) they grow on demand, and a
     * grown-out partial buffer moves to the graveyard (graphs may hold its address). */
    int scratch_reserved;
    tp_step_limits limits; /* what the scratch was reserved for */
    float *attn_part;
    size_t attn_part_bytes;
    void *graveyard[TPC_MAX_GRAVEYARD];
    int n_graveyard;

    /* logits_stats: device [rows] targets + [rows, 3 + 2k] results (outside graphs only). */
    void *lg_dev;
    size_t lg_bytes;

    /* CUDA graphs keyed by batch bucket. */
    struct {
        int key;
        cudaGraphExec_t exec;
    } graphs[TPC_MAX_GRAPHS];
    int n_graphs;
    int capturing, capture_key;

    int64_t wait_since_ns; /* CLOCK_MONOTONIC ns when the host began waiting on the stream; 0: not waiting */
    int gemv_max_t; /* matmuls with T <= this use the GEMV kernel (TPGEN_GEMV_MAX_T, default 4) */
    struct tpc_q4 *q4; /* --weights int4: its matrix table, int8 fallbacks, GEMM scratch (cuda_int4.cu); else NULL */
} tp_cuda;

static inline tp_cuda *tpc(tp_backend *b) { return (tp_cuda *)b; }

/* Dies with a clear message when called while a graph is being captured (op not capturable). */
void tpc_no_capture(tp_cuda *c, const char *what);
/* Ensures the attention partial buffer holds `bytes`; may be called during capture. */
float *tpc_attn_part(tp_cuda *c, size_t bytes);
/* Stage-and-convert: n elements of host type st at src -> act at dst (device). */
void tpc_upload_convert(tp_cuda *c, void *dst, const void *src, tp_dtype st, size_t n);
/* The backend's memory and copy ops (cuda_memory.cu; kernels/backend.h says what each does). */
void *tpc_alloc(tp_backend *b, size_t bytes, const char *what);
void tpc_free(tp_backend *b, void *p);
size_t tpc_mem_available(tp_backend *b);
void tpc_copy(tp_backend *b, void *dst, const void *src, size_t bytes);
void tpc_sync(tp_backend *b);
void *tpc_host_alloc(tp_backend *b, size_t bytes, const char *what);
void tpc_host_free(tp_backend *b, void *p);
void tpc_to_device(tp_backend *b, void *dst, const void *src_host, size_t bytes);
void tpc_to_host(tp_backend *b, void *dst_host, const void *src, size_t bytes);
void tpc_upload(tp_backend *b, void *dst, const void *src_host, tp_dtype st, size_t n);
void tpc_plan_scratch(tp_backend *b, const tp_step_limits *lim, tp_mem_plan *plan);
void tpc_reserve_scratch(tp_backend *b, const tp_step_limits *lim);

/* ---- device helpers ---- */
#ifdef __CUDACC__
__device__ __forceinline__ float tpc_f(float x) { return x; }
__device__ __forceinline__ float tpc_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float tpc_f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T tpc_from(float x);
template <> __device__ __forceinline__ float tpc_from<float>(float x) { return x; }
/* Rounding to F16/BF16 is kernels/common/tp_round.h, the CPU side's function (same NaN bits). */
template <> __device__ __forceinline__ __half tpc_from<__half>(float x) { return __ushort_as_half(tp_f32_to_f16(x)); }
template <> __device__ __forceinline__ __nv_bfloat16 tpc_from<__nv_bfloat16>(float x) {
    return __ushort_as_bfloat16(tp_f32_to_bf16(x));
}
/* x rounded to T and back: the rounding a value takes where HF holds it in the model's dtype */
template <typename T> __device__ __forceinline__ float tpc_act(float x) { return tpc_f(tpc_from<T>(x)); }

/* 8 elements packed in 16 bytes -> 8 floats. */
__device__ __forceinline__ void tpc_unpack8(const uint4 &u, float *f, __half) {
    const __half2 *h = reinterpret_cast<const __half2 *>(&u);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 v = __half22float2(h[i]);
        f[2 * i] = v.x;
        f[2 * i + 1] = v.y;
    }
}
__device__ __forceinline__ void tpc_unpack8(const uint4 &u, float *f, __nv_bfloat16) {
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 v = __bfloat1622float2(h[i]);
        f[2 * i] = v.x;
        f[2 * i + 1] = v.y;
    }
}
template <typename T> __device__ __forceinline__ uint4 tpc_pack8(const float *f) {
    uint4 u;
    T *h = reinterpret_cast<T *>(&u);
#pragma unroll
    for (int i = 0; i < 8; i++) h[i] = tpc_from<T>(f[i]);
    return u;
}

__device__ __forceinline__ float tpc_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float tpc_warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
/* Block-wide sum / max for blockDim.x a multiple of 32 (<= 1024); every thread gets the result.
 * red: __shared__ float[33]. Contains __syncthreads: call from every thread. */
__device__ __forceinline__ float tpc_block_sum(float v, float *red) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = tpc_warp_sum(v);
    __syncthreads(); /* red may still be read by a previous call */
    if (lane == 0) red[w] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : 0.0f;
    return tpc_warp_sum(v);
}
__device__ __forceinline__ float tpc_block_max(float v, float *red) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = tpc_warp_max(v);
    __syncthreads();
    if (lane == 0) red[w] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : -INFINITY;
    return tpc_warp_max(v);
}
#endif

/* ---- launchers (one file each) ---- */
/* cuda_norm_act.cu */
void tpc_convert(tp_cuda *c, void *dst, tp_dtype dt, const void *src, tp_dtype st, size_t n);
void tpc_embed(tp_backend *b, void *x, const void *wte, const int32_t *ids, int T, int E);
void tpc_layernorm(tp_backend *b, void *y, const void *x, const void *g, const void *beta, int T, int E, float eps);
void tpc_rmsnorm(tp_backend *b, void *y, const void *x, const void *g, int T, int E, float eps);
void tpc_gelu_new(tp_backend *b, void *x, size_t n);
void tpc_silu_mul(tp_backend *b, void *y, const void *gu, int T, int N);
void tpc_add(tp_backend *b, void *y, const void *x, size_t n);
void tpc_gather_rows(tp_backend *b, void *dst, const void *src, const int32_t *rows_host, int n, int E);
/* cuda_matmul.cu */
size_t tpc_matrix_bytes(tp_backend *b, int rows, int cols);
void tpc_matrix_upload(tp_backend *b, void *dst, const void *src_host, tp_dtype st, int rows, int cols);
void tpc_matmul(tp_backend *b, void *y, const void *x, const void *W, const void *bias, int T, int N, int K,
                int accumulate);
void tpc_matmul_f32out(tp_backend *b, float *y, const void *x, const void *W, const void *bias, int T, int N, int K);
void tpc_matmul_gelu(tp_backend *b, void *y, const void *x, const void *W, const void *bias, int T, int N, int K);
void tpc_matmul_init(tp_cuda *c);
void tpc_matmul_destroy(tp_cuda *c);
/* cuda_attention.cu */
void tpc_attention_init(tp_cuda *c);
void tpc_rotary_kv_write(tp_backend *b, void *qkv, void *k_cache, void *v_cache, const tp_step *st,
                         const tp_attn_shape *a);
/* The backend's kernel_name (cuda_backend.cu; the int8 and int4 matmuls have their own, cuda_int8.cu, cuda_int4.cu). */
const char *tpc_kernel_name(tp_backend *b, tp_op_class op, int T, int D);
void tpc_attention(tp_backend *b, void *out, const void *qkv, const void *k_cache, const void *v_cache,
                   const tp_step *st, const tp_attn_shape *a);
/* cuda_logits.cu */
void tpc_logits_stats(tp_backend *b, const float *logits, int rows, int ld, int n_valid, int k,
                      const int32_t *targets_host, float *mx, float *se, float *topv, int32_t *topi, float *tgt_val);
/* cuda_random.cu */
void tpc_fill_random(tp_backend *b, void *dst, size_t n, uint64_t seed, float mean, float std);
/* cuda_graphs.cu */
int tpc_graph_launch(tp_backend *b, int key);
void tpc_graph_begin(tp_backend *b, int key);
void tpc_graph_end(tp_backend *b, int key);
void tpc_graphs_destroy(tp_cuda *c);

#endif
