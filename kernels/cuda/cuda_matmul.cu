/* GEMM: y[T,N] = (accumulate ? y : 0) + x[T,K] @ W^T + bias, f32 accumulation.
 *
 * Weight layout: W stays in the HF layout [N, K] row-major (K contiguous), uploaded as is.
 *  - Batched GEMM (cuBLAS): in column-major terms that is the "TN" problem
 *    y^T[N,T] = op_T(W as [K,N]) * x^T[K,T], with both operands K-major: the layout cuBLAS's
 *    tensor-core kernels (HMMA / Hopper GMMA) read without a transpose pass.
 *  - Batch-1..4 decode (the GEMV kernel below): each output row is a dot product of one
 *    contiguous weight row with x, so a warp streams its row with 16-byte coalesced loads and
 *    the whole matrix is read exactly once per step; x ([T,K], at most 4 x 24576 x 2 bytes)
 *    stays in L1/L2. A transposed [K, N] layout would make the GEMV read strided columns or
 *    need a cross-warp reduction per output; nothing gains from it, so there is no repacking.
 * T <= gemv_max_t (default 4, env TPGEN_GEMV_MAX_T) takes the GEMV kernel when K % 8 == 0 and
 * the pointers are 16-byte aligned (bias and accumulate fused into its epilogue); anything else
 * takes cublasGemmEx (F16/BF16 in, CUBLAS_COMPUTE_32F, f32 split-K reductions), then a bias pass. */
#include "kernels/cuda/cuda_internal.h"

size_t tpc_matrix_bytes(tp_backend *b, int rows, int cols) {
    return (size_t)rows * (size_t)cols * tp_dtype_size(b->act);
}

void tpc_matrix_upload(tp_backend *b, void *dst, const void *src_host, tp_dtype st, int rows, int cols) {
    tpc_upload_convert(tpc(b), dst, src_host, st, (size_t)rows * (size_t)cols);
}

/* ---- GEMV for T = TT tokens: each warp owns RR consecutive rows of W. Lanes walk K in 16-byte
 * chunks, UNROLL chunks per iteration with every weight load issued before the math so each lane
 * keeps RR*UNROLL loads in flight. Weights are read once: streaming loads (ld.global.cs) keep them
 * from evicting x out of L1. ---- */
#define GEMV_RR 2
#define GEMV_UNROLL 4
#define GEMV_THREADS 128

template <int TT, typename T, typename OT>
__global__ void __launch_bounds__(GEMV_THREADS)
gemv_kernel(OT *y, const T *x, const T *W, const T *bias, int N, int K, int accumulate) {
    const int warp = (blockIdx.x * GEMV_THREADS + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    const int row0 = warp * GEMV_RR;
    if (row0 >= N) return;
    const int K8 = K >> 3;
    const uint4 *x8 = reinterpret_cast<const uint4 *>(x);
    const uint4 *w8[GEMV_RR];
#pragma unroll
    for (int r = 0; r < GEMV_RR; r++) /* rows past N re-read the last row; their sums are dropped */
        w8[r] = reinterpret_cast<const uint4 *>(W) + (size_t)min(row0 + r, N - 1) * K8;
    float acc[GEMV_RR][TT];
#pragma unroll
    for (int r = 0; r < GEMV_RR; r++)
#pragma unroll
        for (int t = 0; t < TT; t++) acc[r][t] = 0.0f;

    for (int c0 = lane; c0 < K8; c0 += 32 * GEMV_UNROLL) {
        uint4 wv[GEMV_UNROLL][GEMV_RR];
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; u++) {
            const int cc = c0 + u * 32;
#pragma unroll
            for (int r = 0; r < GEMV_RR; r++) wv[u][r] = cc < K8 ? __ldcs(w8[r] + cc) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; u++) {
            const int cc = c0 + u * 32;
            if (cc < K8) {
#pragma unroll
                for (int t = 0; t < TT; t++) {
                    float xf[8];
                    tpc_unpack8(x8[(size_t)t * K8 + cc], xf, T());
#pragma unroll
                    for (int r = 0; r < GEMV_RR; r++) {
                        float wf[8];
                        tpc_unpack8(wv[u][r], wf, T());
#pragma unroll
                        for (int j = 0; j < 8; j++) acc[r][t] = fmaf(wf[j], xf[j], acc[r][t]);
                    }
                }
            }
        }
    }
    /* every lane ends with the full sums; lane t*RR + r stores output (t, row0 + r) */
    float out = 0.0f;
#pragma unroll
    for (int r = 0; r < GEMV_RR; r++)
#pragma unroll
        for (int t = 0; t < TT; t++) {
            const float s = tpc_warp_sum(acc[r][t]);
            if (lane == t * GEMV_RR + r) out = s;
        }
    const int t = lane / GEMV_RR, r = lane % GEMV_RR, n = row0 + r;
    if (t < TT && n < N) {
        OT *yp = y + (size_t)t * N + n;
        if (bias) out += tpc_f(bias[n]);
        if (accumulate) out += tpc_f(*yp);
        *yp = tpc_from<OT>(out);
    }
}

template <typename T, typename OT>
static void gemv_launch(tp_cuda *c, OT *y, const T *x, const T *W, const T *bias, int T_, int N, int K, int acc) {
    const int warps = (N + GEMV_RR - 1) / GEMV_RR;
    const int blocks = (warps * 32 + GEMV_THREADS - 1) / GEMV_THREADS;
    switch (T_) {
    case 1: gemv_kernel<1, T, OT><<<blocks, GEMV_THREADS, 0, c->stream>>>(y, x, W, bias, N, K, acc); break;
    case 2: gemv_kernel<2, T, OT><<<blocks, GEMV_THREADS, 0, c->stream>>>(y, x, W, bias, N, K, acc); break;
    case 3: gemv_kernel<3, T, OT><<<blocks, GEMV_THREADS, 0, c->stream>>>(y, x, W, bias, N, K, acc); break;
    default: gemv_kernel<4, T, OT><<<blocks, GEMV_THREADS, 0, c->stream>>>(y, x, W, bias, N, K, acc); break;
    }
    CUDA_CHECK_LAUNCH();
}

/* ---- bias after cuBLAS: y[t, n] += bias[n] ---- */
template <typename T, typename OT>
__global__ void bias_kernel(OT *y, const T *bias, int T_, int N) {
    const size_t total = (size_t)T_ * N;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
        y[i] = tpc_from<OT>(tpc_f(y[i]) + tpc_f(bias[i % N]));
}

/* y = (acc ? y : 0) when K == 0 (empty product), before the bias. */
template <typename OT>
__global__ void zero_kernel(OT *y, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = tpc_from<OT>(0.0f);
}

static cudaDataType cuda_type(tp_dtype t) {
    return t == TP_F16 ? CUDA_R_16F : t == TP_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

template <typename T, typename OT>
static void matmul_t(tp_cuda *c, OT *y, const T *x, const T *W, const T *bias, int T_, int N, int K, int acc,
                     tp_dtype out_dt) {
    if (T_ <= 0 || N <= 0) return;
    const bool gemv_ok = T_ <= c->gemv_max_t && K % 8 == 0 && ((uintptr_t)x & 15u) == 0 &&
                         ((uintptr_t)W & 15u) == 0;
    if (gemv_ok) {
        gemv_launch<T, OT>(c, y, x, W, bias, T_, N, K, acc);
        return;
    }
    const size_t total = (size_t)T_ * N;
    const unsigned g = (unsigned)((total + 255) / 256 < 65535u * 8 ? (total + 255) / 256 : 65535u * 8);
    if (K <= 0) {
        if (!acc) {
            zero_kernel<OT><<<g, 256, 0, c->stream>>>(y, total);
            CUDA_CHECK_LAUNCH();
        }
    } else {
        const float alpha = 1.0f, beta = acc ? 1.0f : 0.0f;
        const cudaDataType in = cuda_type(c->base.act);
        CUBLAS_CHECK(cublasGemmEx(c->cublas, CUBLAS_OP_T, CUBLAS_OP_N, N, T_, K, &alpha, W, in, K, x, in, K, &beta,
                                  y, cuda_type(out_dt), N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
    if (bias) {
        bias_kernel<T, OT><<<g, 256, 0, c->stream>>>(y, bias, T_, N);
        CUDA_CHECK_LAUNCH();
    }
}

void tpc_matmul(tp_backend *b, void *y, const void *x, const void *W, const void *bias, int T, int N, int K,
                int accumulate) {
    tp_cuda *c = tpc(b);
    if (b->act == TP_F16)
        matmul_t<__half, __half>(c, (__half *)y, (const __half *)x, (const __half *)W, (const __half *)bias, T, N, K,
                                 accumulate, TP_F16);
    else
        matmul_t<__nv_bfloat16, __nv_bfloat16>(c, (__nv_bfloat16 *)y, (const __nv_bfloat16 *)x,
                                               (const __nv_bfloat16 *)W, (const __nv_bfloat16 *)bias, T, N, K,
                                               accumulate, TP_BF16);
}

void tpc_matmul_f32out(tp_backend *b, float *y, const void *x, const void *W, const void *bias, int T, int N, int K) {
    tp_cuda *c = tpc(b);
    if (b->act == TP_F16)
        matmul_t<__half, float>(c, y, (const __half *)x, (const __half *)W, (const __half *)bias, T, N, K, 0, TP_F32);
    else
        matmul_t<__nv_bfloat16, float>(c, y, (const __nv_bfloat16 *)x, (const __nv_bfloat16 *)W,
                                       (const __nv_bfloat16 *)bias, T, N, K, 0, TP_F32);
}
