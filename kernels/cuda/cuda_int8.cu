/* int8 weights on the CUDA backend (--weights int8): activations, KV cache, embedding, norms and
 * biases stay F16/BF16; every Linear weight is int8 with an f32 scale per output row
 * (kernels/common/tp_quant.h), quantized on the host at load (the CPU backend's function, so
 * both backends hold the same q and scales), each rank its own shard.
 *
 * Matrix buffer: q [N, K] int8 (HF layout, K contiguous), then at a 256-byte-aligned offset the
 * scales [N] f32. y[t, n] = scale[n] * sum_k q[n, k] x[t, k] (+ y) (+ bias) (GELU), the sum in
 * f32 and one rounding to the output type, as the f16/bf16 GEMMs' epilogue (cuda_matmul.cu).
 *  - T <= gemv_max_t (default 4, TPGEN_GEMV_MAX_T), K % 16 == 0, 16-byte aligned x: the GEMV
 *    kernel. A warp owns 2 rows; lanes stream 16 int8 per load (ld.global.cs: read once) and
 *    widen them to f32 in registers; x stays in L1/L2. The int8 matrix is a quarter of the f32
 *    bytes and half of the f16 ones, and decode reads all of it every step.
 *  - otherwise: a tiled kernel, 64 x 64 outputs per block, q and x tiles widened to f32 in
 *    shared memory, 4 x 4 outputs per thread. It uses no scratch (nothing to add to the memory
 *    plan) and no tensor cores: batched steps and prefill with int8 weights run at SIMT f32
 *    rates, well below cuBLAS on f16 (docs/PERFORMANCE.md); dequantizing tiles to f16 for
 *    cuBLAS would need a planned scratch buffer and is the next step. */
#include "kernels/cuda/cuda_internal.h"
#include "kernels/common/tp_quant.h"

static size_t q_bytes(int N, int K) { return ((size_t)N * (size_t)K + 255) & ~(size_t)255; }

static size_t i8_matrix_bytes(tp_backend *b, int rows, int cols) {
    (void)b;
    return q_bytes(rows, cols) + (size_t)rows * sizeof(float);
}

/* The host image of a matrix buffer: q rows, then the scales. rows_f32(r, tmp) gives row r. */
template <typename RowFn>
static void upload_image(tp_cuda *c, void *dst, int rows, int cols, const float *row_absmax, RowFn row_f32) {
    tpc_no_capture(c, "int8 matrix upload");
    const size_t bytes = q_bytes(rows, cols) + (size_t)rows * sizeof(float);
    uint8_t *img = (uint8_t *)calloc(bytes ? bytes : 1, 1);
    float *tmp = (float *)malloc((size_t)(cols > 0 ? cols : 1) * sizeof(float));
    if (!img || !tmp) tp_die("out of host memory quantizing a [%d, %d] matrix to int8", rows, cols);
    int8_t *q = (int8_t *)img;
    float *sc = (float *)(img + q_bytes(rows, cols));
    for (int r = 0; r < rows; r++) {
        row_f32(r, tmp);
        const float s = tp_q8_scale(row_absmax ? row_absmax[r] : tp_q8_absmax(tmp, cols));
        sc[r] = s;
        for (int k = 0; k < cols; k++) q[(size_t)r * cols + k] = tp_q8_quantize(tmp[k], s);
    }
    CUDA_CHECK(cudaSetDevice(c->device));
    CUDA_CHECK(cudaStreamSynchronize(c->stream)); /* ordered after every earlier op of the stream */
    CUDA_CHECK(cudaMemcpy(dst, img, bytes, cudaMemcpyHostToDevice));
    free(tmp);
    free(img);
}

static void i8_matrix_upload_rowmax(tp_backend *b, void *dst, const void *src_host, tp_dtype st, int rows, int cols,
                                    const float *row_absmax) {
    const size_t es = tp_dtype_size(st);
    upload_image(tpc(b), dst, rows, cols, row_absmax, [&](int r, float *tmp) {
        tp_convert_to_f32(tmp, (const char *)src_host + (size_t)r * cols * es, st, (size_t)cols);
    });
}

static void i8_matrix_upload(tp_backend *b, void *dst, const void *src_host, tp_dtype st, int rows, int cols) {
    i8_matrix_upload_rowmax(b, dst, src_host, st, rows, cols, NULL);
}

static void i8_matrix_fill_random(tp_backend *b, void *dst, int rows, int cols, uint64_t seed, float mean, float std) {
    const uint64_t key = tp_rng_key(seed);
    upload_image(tpc(b), dst, rows, cols, NULL,
                 [&](int r, float *tmp) { tp_q8_random_row(tmp, key, r, cols, mean, std); });
}

/* ---- epilogue (f32): v = s * sum (+ y) (+ bias) (GELU), one rounding ---- */
template <typename T, typename OT>
__device__ __forceinline__ void i8_store(OT *y, const T *bias, const float *scale, int N, int t, int n, float sum,
                                         int accumulate, int gelu) {
    OT *yp = y + (size_t)t * N + n;
    float v = sum * scale[n];
    if (accumulate) v += tpc_f(*yp);
    if (bias) v += tpc_f(bias[n]);
    if (gelu) v = tp_gelu_new(v);
    *yp = tpc_from<OT>(v);
}

/* ---- GEMV, T = TT tokens: a warp owns I8_RR rows ---- */
#define I8_RR 2
#define I8_THREADS 128

template <int TT, typename T, typename OT>
__global__ void __launch_bounds__(I8_THREADS)
i8_gemv_kernel(OT *y, const T *x, const int8_t *q, const float *scale, const T *bias, int N, int K, int accumulate,
               int gelu) {
    const int warp = (blockIdx.x * I8_THREADS + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    const int row0 = warp * I8_RR;
    if (row0 >= N) return;
    const int K16 = K >> 4, K8 = K >> 3;
    const uint4 *x8 = reinterpret_cast<const uint4 *>(x);
    const uint4 *w16[I8_RR];
#pragma unroll
    for (int r = 0; r < I8_RR; r++) /* rows past N re-read the last row; their sums are dropped */
        w16[r] = reinterpret_cast<const uint4 *>(q) + (size_t)min(row0 + r, N - 1) * K16;
    float acc[I8_RR][TT];
#pragma unroll
    for (int r = 0; r < I8_RR; r++)
#pragma unroll
        for (int t = 0; t < TT; t++) acc[r][t] = 0.0f;
    for (int c0 = lane; c0 < K16; c0 += 32) {
        uint4 wv[I8_RR];
#pragma unroll
        for (int r = 0; r < I8_RR; r++) wv[r] = __ldcs(w16[r] + c0);
#pragma unroll
        for (int t = 0; t < TT; t++) {
            float xf[16];
            tpc_unpack8(x8[(size_t)t * K8 + 2 * c0], xf, T());
            tpc_unpack8(x8[(size_t)t * K8 + 2 * c0 + 1], xf + 8, T());
#pragma unroll
            for (int r = 0; r < I8_RR; r++) {
                const int8_t *wb = reinterpret_cast<const int8_t *>(&wv[r]);
#pragma unroll
                for (int j = 0; j < 16; j++) acc[r][t] = fmaf((float)wb[j], xf[j], acc[r][t]);
            }
        }
    }
    float out = 0.0f;
#pragma unroll
    for (int r = 0; r < I8_RR; r++)
#pragma unroll
        for (int t = 0; t < TT; t++) {
            const float s = tpc_warp_sum(acc[r][t]);
            if (lane == t * I8_RR + r) out = s;
        }
    const int t = lane / I8_RR, r = lane % I8_RR, n = row0 + r;
    if (t < TT && n < N) i8_store<T, OT>(y, bias, scale, N, t, n, out, accumulate, gelu);
}

/* ---- tiled: block = 64 tokens x 64 rows, 256 threads of 4 x 4 outputs, K in tiles of 16 ---- */
#define I8_TB 64
#define I8_TK 16

template <typename T, typename OT>
__global__ void __launch_bounds__(256)
i8_gemm_kernel(OT *y, const T *x, const int8_t *q, const float *scale, const T *bias, int T_, int N, int K,
               int accumulate, int gelu) {
    __shared__ float xs[I8_TK][I8_TB + 1]; /* [k][token] */
    __shared__ float ws[I8_TK][I8_TB + 1]; /* [k][row] */
    const int t0 = blockIdx.y * I8_TB, n0 = blockIdx.x * I8_TB;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    float a[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) a[i][j] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += I8_TK) {
        for (int i = threadIdx.x; i < I8_TB * I8_TK; i += 256) {
            const int rr = i / I8_TK, kk = i % I8_TK, k = k0 + kk, t = t0 + rr, n = n0 + rr;
            xs[kk][rr] = t < T_ && k < K ? tpc_f(x[(size_t)t * K + k]) : 0.0f;
            ws[kk][rr] = n < N && k < K ? (float)q[(size_t)n * K + k] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < I8_TK; kk++) {
            float xv[4], wv[4];
#pragma unroll
            for (int i = 0; i < 4; i++) xv[i] = xs[kk][ty * 4 + i];
#pragma unroll
            for (int j = 0; j < 4; j++) wv[j] = ws[kk][tx * 4 + j];
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) a[i][j] = fmaf(wv[j], xv[i], a[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int t = t0 + ty * 4 + i, n = n0 + tx * 4 + j;
            if (t < T_ && n < N) i8_store<T, OT>(y, bias, scale, N, t, n, a[i][j], accumulate, gelu);
        }
}

static int g_verbose;
static unsigned g_printed;
static void report(unsigned bit, const char *op, const char *path) {
    if (!g_verbose || (g_printed & (1u << bit))) return;
    g_printed |= 1u << bit;
    tp_log0("cuda int8: %s -> %s\n", op, path);
}

template <typename T, typename OT>
static void i8_gemm(tp_cuda *c, OT *y, const T *x, const void *W, const T *bias, int T_, int N, int K, int acc,
                    int gelu, unsigned bit, const char *op) {
    if (T_ <= 0 || N <= 0) return;
    const int8_t *q = (const int8_t *)W;
    const float *scale = (const float *)((const char *)W + q_bytes(N, K));
    const bool gemv_ok = T_ <= c->gemv_max_t && K > 0 && K % 16 == 0 && ((uintptr_t)x & 15u) == 0 &&
                         ((uintptr_t)W & 15u) == 0;
    if (gemv_ok) {
        report(bit, op, "int8 GEMV (widened in registers)");
        const int warps = (N + I8_RR - 1) / I8_RR;
        const int blocks = (warps * 32 + I8_THREADS - 1) / I8_THREADS;
        switch (T_) {
        case 1: i8_gemv_kernel<1, T, OT><<<blocks, I8_THREADS, 0, c->stream>>>(y, x, q, scale, bias, N, K, acc, gelu); break;
        case 2: i8_gemv_kernel<2, T, OT><<<blocks, I8_THREADS, 0, c->stream>>>(y, x, q, scale, bias, N, K, acc, gelu); break;
        case 3: i8_gemv_kernel<3, T, OT><<<blocks, I8_THREADS, 0, c->stream>>>(y, x, q, scale, bias, N, K, acc, gelu); break;
        default: i8_gemv_kernel<4, T, OT><<<blocks, I8_THREADS, 0, c->stream>>>(y, x, q, scale, bias, N, K, acc, gelu); break;
        }
        CUDA_CHECK_LAUNCH();
        return;
    }
    report(bit + 1, op, "int8 tiled SIMT GEMM (64 x 64 tiles widened in shared memory)");
    const dim3 grid((unsigned)((N + I8_TB - 1) / I8_TB), (unsigned)((T_ + I8_TB - 1) / I8_TB));
    if (grid.y > 65535u) tp_die("cuda int8: a step of %d tokens exceeds the tiled GEMM's grid (%d)", T_, 65535 * I8_TB);
    i8_gemm_kernel<T, OT><<<grid, 256, 0, c->stream>>>(y, x, q, scale, bias, T_, N, K, acc, gelu);
    CUDA_CHECK_LAUNCH();
}

static void i8_matmul(tp_backend *b, void *y, const void *x, const void *W, const void *bias, int T, int N, int K,
                      int accumulate) {
    if (b->act == TP_F16)
        i8_gemm<__half, __half>(tpc(b), (__half *)y, (const __half *)x, W, (const __half *)bias, T, N, K, accumulate,
                                0, 0, "matmul");
    else
        i8_gemm<__nv_bfloat16, __nv_bfloat16>(tpc(b), (__nv_bfloat16 *)y, (const __nv_bfloat16 *)x, W,
                                              (const __nv_bfloat16 *)bias, T, N, K, accumulate, 0, 0, "matmul");
}

static void i8_matmul_f32out(tp_backend *b, float *y, const void *x, const void *W, const void *bias, int T, int N,
                             int K) {
    if (b->act == TP_F16)
        i8_gemm<__half, float>(tpc(b), y, (const __half *)x, W, (const __half *)bias, T, N, K, 0, 0, 2,
                               "matmul_f32out (logits)");
    else
        i8_gemm<__nv_bfloat16, float>(tpc(b), y, (const __nv_bfloat16 *)x, W, (const __nv_bfloat16 *)bias, T, N, K, 0,
                                      0, 2, "matmul_f32out (logits)");
}

static void i8_matmul_gelu(tp_backend *b, void *y, const void *x, const void *W, const void *bias, int T, int N,
                           int K) {
    if (b->act == TP_F16)
        i8_gemm<__half, __half>(tpc(b), (__half *)y, (const __half *)x, W, (const __half *)bias, T, N, K, 0, 1, 4,
                                "matmul_gelu (fc_in)");
    else
        i8_gemm<__nv_bfloat16, __nv_bfloat16>(tpc(b), (__nv_bfloat16 *)y, (const __nv_bfloat16 *)x, W,
                                              (const __nv_bfloat16 *)bias, T, N, K, 0, 1, 4, "matmul_gelu (fc_in)");
}

/* kernel_name: i8_gemm's choice for a model's GEMMs (K % 16 == 0, aligned arena pointers). */
static const char *i8_kernel_name(tp_backend *b, tp_op_class op, int T, int D) {
    if (op == TP_OP_ATTENTION) return tpc_kernel_name(b, op, T, D); /* activations and KV stay f16/bf16 */
    const int f16 = b->act == TP_F16;
    if (T <= tpc(b)->gemv_max_t) return f16 ? "gemv-int8-f16" : "gemv-int8-bf16";
    return f16 ? "tiled-int8-f16" : "tiled-int8-bf16";
}

extern "C" TP_CUDA_EXPORT int tpcuda_use_int8(tp_backend *b, int verbose, char *err, size_t err_size) {
    if (!b || !b->name || strcmp(b->name, "cuda") != 0) {
        snprintf(err, err_size, "internal: tpcuda_use_int8 on the %s backend", b && b->name ? b->name : "(null)");
        return -1;
    }
    g_verbose = verbose;
    g_printed = 0;
    if (verbose)
        tp_log0("cuda int8: weights int8 with f32 row scales; GEMV (T <= %d, K %% 16 == 0) in registers, larger T "
                "through the tiled SIMT kernel\n", tpc(b)->gemv_max_t);
    b->weights = "int8";
    b->matrix_bytes = i8_matrix_bytes;
    b->matrix_upload = i8_matrix_upload;
    b->matrix_upload_rowmax = i8_matrix_upload_rowmax;
    b->matrix_fill_random = i8_matrix_fill_random;
    b->matmul = i8_matmul;
    b->matmul_f32out = i8_matmul_f32out;
    b->matmul_gelu = i8_matmul_gelu;
    b->kernel_name = i8_kernel_name;
    return 0;
}
