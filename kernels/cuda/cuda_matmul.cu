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
 * the pointers are 16-byte aligned (bias, accumulate and GELU fused into its f32 epilogue).
 * Larger T with a bias or a GELU and an F16/BF16 output takes cuBLASLt with the BIAS or GELU_BIAS
 * epilogue: the bias is added to the f32 accumulator and the result rounded once (cublasGemmEx
 * then a bias kernel rounded the product first and the sum again: two roundings, and a third
 * for a separate GELU). Split-K partial sums stay in f32 there too (reduction scheme limited to
 * the compute type). Anything else (f32 logits, no bias) takes cublasGemmEx (F16/BF16 in,
 * CUBLAS_COMPUTE_32F, f32 split-K reductions); an f32 output then gets its bias in f32 anyway. */
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
gemv_kernel(OT *y, const T *x, const T *W, const T *bias, int N, int K, int accumulate, int gelu) {
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
        if (gelu) out = tp_gelu_new(out);
        *yp = tpc_from<OT>(out);
    }
}

template <typename T, typename OT>
static void gemv_launch(tp_cuda *c, OT *y, const T *x, const T *W, const T *bias, int T_, int N, int K, int acc,
                        int gelu) {
    const int warps = (N + GEMV_RR - 1) / GEMV_RR;
    const int blocks = (warps * 32 + GEMV_THREADS - 1) / GEMV_THREADS;
    switch (T_) {
    case 1: gemv_kernel<1, T, OT><<<blocks, GEMV_THREADS, 0, c->stream>>>(y, x, W, bias, N, K, acc, gelu); break;
    case 2: gemv_kernel<2, T, OT><<<blocks, GEMV_THREADS, 0, c->stream>>>(y, x, W, bias, N, K, acc, gelu); break;
    case 3: gemv_kernel<3, T, OT><<<blocks, GEMV_THREADS, 0, c->stream>>>(y, x, W, bias, N, K, acc, gelu); break;
    default: gemv_kernel<4, T, OT><<<blocks, GEMV_THREADS, 0, c->stream>>>(y, x, W, bias, N, K, acc, gelu); break;
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

/* ---- cuBLASLt with a bias / GELU_BIAS epilogue. The same column-major "TN" problem as
 * cublasGemmEx below: D[N,T] = epi(W^T[N,K] x[K,T] (+ C)), bias per row of D (output feature).
 * Descriptors and the heuristic's algorithm are cached per (shape, flags, pointer alignment):
 * the heuristic takes tens of microseconds, a decode step runs ~200 GEMMs. ---- */
struct tpc_lt_plan {
    int N, T, K, acc, gelu, has_bias, align;
    tp_dtype dt;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, cd;
    cublasLtMatmulAlgo_t algo;
    int ok; /* 0: no algorithm for this problem (use cublasGemmEx + kernels) */
};

static int ptr_align(const void *p) {
    const uintptr_t u = (uintptr_t)p;
    int a = 256;
    while (a > 2 && (u & (uintptr_t)(a - 1))) a >>= 1;
    return a;
}

static void lt_plan_free(tpc_lt_plan *p) {
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p->a));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p->b));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p->cd));
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(p->op));
}

static tpc_lt_plan *lt_plan_get(tp_cuda *c, int N, int T_, int K, int acc, int gelu, const void *bias, int align) {
    const tp_dtype dt = c->base.act;
    for (int i = 0; i < c->n_lt_plans; i++) {
        tpc_lt_plan *p = &c->lt_plans[i];
        if (p->N == N && p->T == T_ && p->K == K && p->acc == acc && p->gelu == gelu && p->has_bias == (bias != NULL) &&
            p->align == align && p->dt == dt)
            return p;
    }
    tpc_lt_plan *p;
    if (c->n_lt_plans < TPC_LT_PLANS) p = &c->lt_plans[c->n_lt_plans++];
    else { /* full (many prefill chunk lengths): replace in turn */
        p = &c->lt_plans[c->lt_victim];
        c->lt_victim = (c->lt_victim + 1) % TPC_LT_PLANS;
        lt_plan_free(p);
    }
    memset(p, 0, sizeof *p);
    p->N = N; p->T = T_; p->K = K; p->acc = acc; p->gelu = gelu; p->has_bias = bias != NULL; p->align = align;
    p->dt = dt;
    const cudaDataType t = cuda_type(dt);
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    const cublasLtEpilogue_t epi = gelu ? (bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU)
                                        : CUBLASLT_EPILOGUE_BIAS;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (bias) {
        const int32_t bt = (int32_t)t; /* the bias is stored in the act dtype, added in f32 */
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, t, K, N, K));  /* W as [K, N] column-major, used transposed */
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, t, K, T_, K)); /* x as [K, T] column-major */
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->cd, t, N, T_, N)); /* y as [N, T] column-major */
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = TPC_CUBLAS_WS_BYTES;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    /* split-K partial sums in f32 only (never reduced in place in the F16/BF16 output) */
    const uint32_t red = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &red, sizeof red));
    const uint32_t al = (uint32_t)align;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, sizeof al));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al, sizeof al));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al, sizeof al));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al, sizeof al));
    cublasLtMatmulHeuristicResult_t res;
    int n_res = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(c->lt, p->op, p->a, p->b, p->cd, p->cd, pref, 1, &res, &n_res);
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    p->ok = st == CUBLAS_STATUS_SUCCESS && n_res > 0;
    if (p->ok) p->algo = res.algo;
    else if (st != CUBLAS_STATUS_NOT_SUPPORTED && st != CUBLAS_STATUS_SUCCESS) CUBLAS_CHECK(st);
    return p;
}

/* Returns 0 when cuBLASLt has no algorithm for the problem (the caller falls back). */
static int lt_matmul(tp_cuda *c, void *y, const void *x, const void *W, const void *bias, int T_, int N, int K, int acc,
                     int gelu) {
    int align = ptr_align(y);
    const int ax = ptr_align(x), aw = ptr_align(W), ab = bias ? ptr_align(bias) : 256;
    if (ax < align) align = ax;
    if (aw < align) align = aw;
    if (ab < align) align = ab;
    tpc_lt_plan *p = lt_plan_get(c, N, T_, K, acc, gelu, bias, align);
    if (!p->ok) return 0;
    if (bias) CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    const float alpha = 1.0f, beta = acc ? 1.0f : 0.0f;
    CUBLAS_CHECK(cublasLtMatmul(c->lt, p->op, &alpha, W, p->a, x, p->b, &beta, y, p->cd, y, p->cd, &p->algo,
                                c->cublas_ws, TPC_CUBLAS_WS_BYTES, c->stream));
    return 1;
}

void tpc_matmul_init(tp_cuda *c) {
    CUBLAS_CHECK(cublasLtCreate(&c->lt));
    c->lt_plans = (tpc_lt_plan *)calloc(TPC_LT_PLANS, sizeof(tpc_lt_plan));
    if (!c->lt_plans) tp_die("out of host memory creating the CUDA backend");
}

void tpc_matmul_destroy(tp_cuda *c) {
    for (int i = 0; i < c->n_lt_plans; i++) lt_plan_free(&c->lt_plans[i]);
    free(c->lt_plans);
    c->lt_plans = NULL;
    c->n_lt_plans = 0;
    if (c->lt) CUBLAS_CHECK(cublasLtDestroy(c->lt));
    c->lt = NULL;
}

/* y = gelu_new(y), after the fallback path */
template <typename OT>
__global__ void gelu_out_kernel(OT *y, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = tpc_from<OT>(tp_gelu_new(tpc_f(y[i])));
}

template <typename T, typename OT>
static void matmul_t(tp_cuda *c, OT *y, const T *x, const T *W, const T *bias, int T_, int N, int K, int acc,
                     tp_dtype out_dt, int gelu = 0) {
    if (T_ <= 0 || N <= 0) return;
    const bool gemv_ok = T_ <= c->gemv_max_t && K % 8 == 0 && ((uintptr_t)x & 15u) == 0 &&
                         ((uintptr_t)W & 15u) == 0;
    if (gemv_ok) {
        gemv_launch<T, OT>(c, y, x, W, bias, T_, N, K, acc, gelu);
        return;
    }
    /* an F16/BF16 output with a bias or GELU: both in the f32 epilogue, one rounding */
    if (K > 0 && out_dt != TP_F32 && (bias || gelu) && lt_matmul(c, y, x, W, bias, T_, N, K, acc, gelu)) return;
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
    if (gelu) {
        gelu_out_kernel<OT><<<g, 256, 0, c->stream>>>(y, total);
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

void tpc_matmul_gelu(tp_backend *b, void *y, const void *x, const void *W, const void *bias, int T, int N, int K) {
    tp_cuda *c = tpc(b);
    if (b->act == TP_F16)
        matmul_t<__half, __half>(c, (__half *)y, (const __half *)x, (const __half *)W, (const __half *)bias, T, N, K, 0,
                                 TP_F16, 1);
    else
        matmul_t<__nv_bfloat16, __nv_bfloat16>(c, (__nv_bfloat16 *)y, (const __nv_bfloat16 *)x,
                                               (const __nv_bfloat16 *)W, (const __nv_bfloat16 *)bias, T, N, K, 0,
                                               TP_BF16, 1);
}
