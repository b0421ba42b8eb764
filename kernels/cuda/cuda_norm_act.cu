/* Element-wise and per-row ops: dtype conversion (upload), embedding gather, layer norm, RMSNorm,
 * gelu_new, silu_mul, add, row gather. Inputs and outputs are F16/BF16; all arithmetic is f32.
 * Memory-bound: rows and vectors move as 16-byte accesses (8 elements) when the pointers and
 * the row length allow it, with a scalar path for the rest. */
#include "kernels/cuda/cuda_internal.h"

static inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

static inline unsigned grid_for(size_t n, unsigned threads) {
    size_t g = (n + threads - 1) / threads;
    if (g > 65535u * 32u) g = 65535u * 32u; /* grid-stride loops cover the rest */
    return (unsigned)(g ? g : 1);
}

/* ---- conversion ---- */
template <typename S, typename D>
__global__ void convert_kernel(D *dst, const S *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = tpc_from<D>(tpc_f(src[i]));
}

template <typename D> static void convert_from(tp_cuda *c, D *dst, const void *src, tp_dtype st, size_t n) {
    unsigned g = grid_for(n, 256);
    if (st == TP_F32) convert_kernel<float, D><<<g, 256, 0, c->stream>>>(dst, (const float *)src, n);
    else if (st == TP_F16) convert_kernel<__half, D><<<g, 256, 0, c->stream>>>(dst, (const __half *)src, n);
    else convert_kernel<__nv_bfloat16, D><<<g, 256, 0, c->stream>>>(dst, (const __nv_bfloat16 *)src, n);
    CUDA_CHECK_LAUNCH();
}

void tpc_convert(tp_cuda *c, void *dst, tp_dtype dt, const void *src, tp_dtype st, size_t n) {
    if (n == 0) return;
    if (dt == TP_F16) convert_from(c, (__half *)dst, src, st, n);
    else if (dt == TP_BF16) convert_from(c, (__nv_bfloat16 *)dst, src, st, n);
    else tp_die("internal: cuda convert to %s", tp_dtype_name(dt));
}

/* ---- embed: x[t,:] = wte[ids[t],:] (one block per token) ---- */
__global__ void embed_vec_kernel(uint4 *x, const uint4 *wte, const int32_t *ids, int E8) {
    const int t = blockIdx.x;
    const uint4 *src = wte + (size_t)ids[t] * E8;
    uint4 *dst = x + (size_t)t * E8;
    for (int i = threadIdx.x; i < E8; i += blockDim.x) dst[i] = src[i];
}
__global__ void embed_scalar_kernel(uint16_t *x, const uint16_t *wte, const int32_t *ids, int E) {
    const int t = blockIdx.x;
    const uint16_t *src = wte + (size_t)ids[t] * E;
    for (int i = threadIdx.x; i < E; i += blockDim.x) x[(size_t)t * E + i] = src[i];
}

void tpc_embed(tp_backend *b, void *x, const void *wte, const int32_t *ids, int T, int E) {
    tp_cuda *c = tpc(b);
    if (T <= 0 || E <= 0) return;
    if (E % 8 == 0 && aligned16(x) && aligned16(wte))
        embed_vec_kernel<<<T, 128, 0, c->stream>>>((uint4 *)x, (const uint4 *)wte, ids, E / 8);
    else
        embed_scalar_kernel<<<T, 256, 0, c->stream>>>((uint16_t *)x, (const uint16_t *)wte, ids, E);
    CUDA_CHECK_LAUNCH();
}

/* ---- layer norm: one block per row, mean and biased variance in two f32 passes (no
 * cancellation), then y = (x - mean) * rstd * g + beta. y may equal x: every thread reads the
 * elements it writes, after the statistics are known. ---- */
template <typename T, bool VEC>
__global__ void layernorm_kernel(T *y, const T *x, const T *g, const T *beta, int E, float eps) {
    __shared__ float red[33];
    const size_t row = blockIdx.x;
    const T *xr = x + row * E;
    T *yr = y + row * E;
    float s = 0.0f;
    if (VEC) {
        for (int i = threadIdx.x; i < E / 8; i += blockDim.x) {
            float f[8];
            tpc_unpack8(reinterpret_cast<const uint4 *>(xr)[i], f, T());
#pragma unroll
            for (int j = 0; j < 8; j++) s += f[j];
        }
    } else {
        for (int i = threadIdx.x; i < E; i += blockDim.x) s += tpc_f(xr[i]);
    }
    const float mean = tpc_block_sum(s, red) / (float)E;
    float v = 0.0f;
    if (VEC) {
        for (int i = threadIdx.x; i < E / 8; i += blockDim.x) {
            float f[8];
            tpc_unpack8(reinterpret_cast<const uint4 *>(xr)[i], f, T());
#pragma unroll
            for (int j = 0; j < 8; j++) v += (f[j] - mean) * (f[j] - mean);
        }
    } else {
        for (int i = threadIdx.x; i < E; i += blockDim.x) {
            float d = tpc_f(xr[i]) - mean;
            v += d * d;
        }
    }
    const float rstd = 1.0f / sqrtf(tpc_block_sum(v, red) / (float)E + eps);
    if (VEC) {
        for (int i = threadIdx.x; i < E / 8; i += blockDim.x) {
            float f[8], gg[8], bb[8];
            tpc_unpack8(reinterpret_cast<const uint4 *>(xr)[i], f, T());
            tpc_unpack8(reinterpret_cast<const uint4 *>(g)[i], gg, T());
            tpc_unpack8(reinterpret_cast<const uint4 *>(beta)[i], bb, T());
#pragma unroll
            for (int j = 0; j < 8; j++) f[j] = (f[j] - mean) * rstd * gg[j] + bb[j];
            reinterpret_cast<uint4 *>(yr)[i] = tpc_pack8<T>(f);
        }
    } else {
        for (int i = threadIdx.x; i < E; i += blockDim.x)
            yr[i] = tpc_from<T>((tpc_f(xr[i]) - mean) * rstd * tpc_f(g[i]) + tpc_f(beta[i]));
    }
}

template <typename T>
static void layernorm_t(tp_cuda *c, void *y, const void *x, const void *g, const void *beta, int T_, int E,
                        float eps) {
    const bool vec = E % 8 == 0 && aligned16(y) && aligned16(x) && aligned16(g) && aligned16(beta);
    const int threads = E >= 4096 ? 512 : E >= 1024 ? 256 : 128;
    if (vec)
        layernorm_kernel<T, true><<<T_, threads, 0, c->stream>>>((T *)y, (const T *)x, (const T *)g,
                                                                  (const T *)beta, E, eps);
    else
        layernorm_kernel<T, false><<<T_, threads, 0, c->stream>>>((T *)y, (const T *)x, (const T *)g,
                                                                   (const T *)beta, E, eps);
    CUDA_CHECK_LAUNCH();
}

void tpc_layernorm(tp_backend *b, void *y, const void *x, const void *g, const void *beta, int T, int E, float eps) {
    if (T <= 0 || E <= 0) return;
    if (b->act == TP_F16) layernorm_t<__half>(tpc(b), y, x, g, beta, T, E, eps);
    else layernorm_t<__nv_bfloat16>(tpc(b), y, x, g, beta, T, E, eps);
}

/* ---- RMSNorm (LLaMA): one block per row; the sum of squares in f32 (tp_sumsq_add, one fma per
 * element), then y = act(x * inv) * g through kernels/common/tp_norm.h, act() the rounding to T
 * HF's LlamaRMSNorm makes before the weight (backend.h), and y rounded. y may equal x, as
 * in layernorm_kernel: the block sum's barriers separate the reads of pass 1 from the writes. ---- */
template <typename T, bool VEC>
__global__ void rmsnorm_kernel(T *y, const T *x, const T *g, int E, float eps) {
    __shared__ float red[33];
    const size_t row = blockIdx.x;
    const T *xr = x + row * E;
    T *yr = y + row * E;
    float s = 0.0f;
    if (VEC) {
        for (int i = threadIdx.x; i < E / 8; i += blockDim.x) {
            float f[8];
            tpc_unpack8(reinterpret_cast<const uint4 *>(xr)[i], f, T());
#pragma unroll
            for (int j = 0; j < 8; j++) s = tp_sumsq_add(s, f[j]);
        }
    } else {
        for (int i = threadIdx.x; i < E; i += blockDim.x) s = tp_sumsq_add(s, tpc_f(xr[i]));
    }
    const float inv = tp_rms_inv(tpc_block_sum(s, red), E, eps);
    if (VEC) {
        for (int i = threadIdx.x; i < E / 8; i += blockDim.x) {
            float f[8], gg[8];
            tpc_unpack8(reinterpret_cast<const uint4 *>(xr)[i], f, T());
            tpc_unpack8(reinterpret_cast<const uint4 *>(g)[i], gg, T());
#pragma unroll
            for (int j = 0; j < 8; j++) f[j] = tp_rms_weight(tpc_act<T>(tp_rms_norm(f[j], inv)), gg[j]);
            reinterpret_cast<uint4 *>(yr)[i] = tpc_pack8<T>(f);
        }
    } else {
        for (int i = threadIdx.x; i < E; i += blockDim.x)
            yr[i] = tpc_from<T>(tp_rms_weight(tpc_act<T>(tp_rms_norm(tpc_f(xr[i]), inv)), tpc_f(g[i])));
    }
}

template <typename T>
static void rmsnorm_t(tp_cuda *c, void *y, const void *x, const void *g, int T_, int E, float eps) {
    const bool vec = E % 8 == 0 && aligned16(y) && aligned16(x) && aligned16(g);
    const int threads = E >= 4096 ? 512 : E >= 1024 ? 256 : 128;
    if (vec)
        rmsnorm_kernel<T, true><<<T_, threads, 0, c->stream>>>((T *)y, (const T *)x, (const T *)g, E, eps);
    else
        rmsnorm_kernel<T, false><<<T_, threads, 0, c->stream>>>((T *)y, (const T *)x, (const T *)g, E, eps);
    CUDA_CHECK_LAUNCH();
}

void tpc_rmsnorm(tp_backend *b, void *y, const void *x, const void *g, int T, int E, float eps) {
    if (T <= 0 || E <= 0) return;
    if (b->act == TP_F16) rmsnorm_t<__half>(tpc(b), y, x, g, T, E, eps);
    else rmsnorm_t<__nv_bfloat16>(tpc(b), y, x, g, T, E, eps);
}

/* ---- silu_mul (LLaMA's gated MLP): y[t, i] = act(tp_silu(gu[t, i])) * gu[t, N + i] (tp_act.h;
 * act() rounds to T as HF's act_fn output is, backend.h),
 * gu [T, 2N] (gate, then up), y [T, N]; y must not overlap gu (row t of y would be gu's row t/2).
 * Flat over T*N outputs, 8 at a time when N % 8 == 0 and the pointers are 16-byte aligned (a
 * vector then never straddles two rows, and its gate and up halves are aligned too). ---- */
template <typename T>
__global__ void silu_mul_vec_kernel(T *y, const T *gu, int N, size_t n8) {
    const int N8 = N / 8;
    for (size_t v = blockIdx.x * (size_t)blockDim.x + threadIdx.x; v < n8; v += (size_t)gridDim.x * blockDim.x) {
        const size_t t = v / N8, j = v % N8;
        const uint4 *gr = reinterpret_cast<const uint4 *>(gu + t * 2 * (size_t)N); /* row t: N8 gate, N8 up */
        float a[8], u[8];
        tpc_unpack8(gr[j], a, T());
        tpc_unpack8(gr[N8 + j], u, T());
#pragma unroll
        for (int k = 0; k < 8; k++) a[k] = TP_MUL(tpc_act<T>(tp_silu(a[k])), u[k]);
        reinterpret_cast<uint4 *>(y)[v] = tpc_pack8<T>(a); /* y row t, vector j: t * N8 + j == v */
    }
}
template <typename T>
__global__ void silu_mul_scalar_kernel(T *y, const T *gu, int N, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const size_t t = i / (size_t)N, j = i % (size_t)N;
        const T *gr = gu + t * 2 * (size_t)N;
        y[i] = tpc_from<T>(TP_MUL(tpc_act<T>(tp_silu(tpc_f(gr[j]))), tpc_f(gr[N + j])));
    }
}

template <typename T>
static void silu_mul_t(tp_cuda *c, void *y, const void *gu, int T_, int N) {
    const size_t n = (size_t)T_ * N;
    if (N % 8 == 0 && aligned16(y) && aligned16(gu))
        silu_mul_vec_kernel<T><<<grid_for(n / 8, 256), 256, 0, c->stream>>>((T *)y, (const T *)gu, N, n / 8);
    else
        silu_mul_scalar_kernel<T><<<grid_for(n, 256), 256, 0, c->stream>>>((T *)y, (const T *)gu, N, n);
    CUDA_CHECK_LAUNCH();
}

void tpc_silu_mul(tp_backend *b, void *y, const void *gu, int T, int N) {
    if (T <= 0 || N <= 0) return;
    if (b->act == TP_F16) silu_mul_t<__half>(tpc(b), y, gu, T, N);
    else silu_mul_t<__nv_bfloat16>(tpc(b), y, gu, T, N);
}

/* ---- gelu_new (kernels/common/tp_act.h, the CPU backend's formula) and add ---- */
__device__ __forceinline__ float gelu_new_f(float a) { return tp_gelu_new(a); }

/* Vectors of 8 for i < n8, then the tail n8*8 .. n one element per thread. */
template <typename T>
__global__ void gelu_kernel(T *x, size_t n) {
    const size_t n8 = n / 8, stride = (size_t)gridDim.x * blockDim.x;
    const size_t i0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    uint4 *x8 = reinterpret_cast<uint4 *>(x);
    for (size_t i = i0; i < n8; i += stride) {
        float f[8];
        tpc_unpack8(x8[i], f, T());
#pragma unroll
        for (int j = 0; j < 8; j++) f[j] = gelu_new_f(f[j]);
        x8[i] = tpc_pack8<T>(f);
    }
    for (size_t i = n8 * 8 + i0; i < n; i += stride) x[i] = tpc_from<T>(gelu_new_f(tpc_f(x[i])));
}
template <typename T>
__global__ void gelu_scalar_kernel(T *x, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = tpc_from<T>(gelu_new_f(tpc_f(x[i])));
}

template <typename T>
__global__ void add_kernel(T *y, const T *x, size_t n) {
    const size_t n8 = n / 8, stride = (size_t)gridDim.x * blockDim.x;
    const size_t i0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    uint4 *y8 = reinterpret_cast<uint4 *>(y);
    const uint4 *x8 = reinterpret_cast<const uint4 *>(x);
    for (size_t i = i0; i < n8; i += stride) {
        float a[8], bb[8];
        tpc_unpack8(y8[i], a, T());
        tpc_unpack8(x8[i], bb, T());
#pragma unroll
        for (int j = 0; j < 8; j++) a[j] += bb[j];
        y8[i] = tpc_pack8<T>(a);
    }
    for (size_t i = n8 * 8 + i0; i < n; i += stride) y[i] = tpc_from<T>(tpc_f(y[i]) + tpc_f(x[i]));
}
template <typename T>
__global__ void add_scalar_kernel(T *y, const T *x, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = tpc_from<T>(tpc_f(y[i]) + tpc_f(x[i]));
}

void tpc_gelu_new(tp_backend *b, void *x, size_t n) {
    tp_cuda *c = tpc(b);
    if (n == 0) return;
    const bool vec = aligned16(x);
    unsigned g = grid_for(vec ? (n + 7) / 8 : n, 256);
    if (b->act == TP_F16) {
        if (vec) gelu_kernel<__half><<<g, 256, 0, c->stream>>>((__half *)x, n);
        else gelu_scalar_kernel<__half><<<g, 256, 0, c->stream>>>((__half *)x, n);
    } else {
        if (vec) gelu_kernel<__nv_bfloat16><<<g, 256, 0, c->stream>>>((__nv_bfloat16 *)x, n);
        else gelu_scalar_kernel<__nv_bfloat16><<<g, 256, 0, c->stream>>>((__nv_bfloat16 *)x, n);
    }
    CUDA_CHECK_LAUNCH();
}

void tpc_add(tp_backend *b, void *y, const void *x, size_t n) {
    tp_cuda *c = tpc(b);
    if (n == 0) return;
    const bool vec = aligned16(x) && aligned16(y);
    unsigned g = grid_for(vec ? (n + 7) / 8 : n, 256);
    if (b->act == TP_F16) {
        if (vec) add_kernel<__half><<<g, 256, 0, c->stream>>>((__half *)y, (const __half *)x, n);
        else add_scalar_kernel<__half><<<g, 256, 0, c->stream>>>((__half *)y, (const __half *)x, n);
    } else {
        if (vec) add_kernel<__nv_bfloat16><<<g, 256, 0, c->stream>>>((__nv_bfloat16 *)y, (const __nv_bfloat16 *)x, n);
        else add_scalar_kernel<__nv_bfloat16><<<g, 256, 0, c->stream>>>((__nv_bfloat16 *)y,
                                                                         (const __nv_bfloat16 *)x, n);
    }
    CUDA_CHECK_LAUNCH();
}

/* ---- gather_rows: the row indices are host data; they travel as a kernel argument (up to
 * GATHER_CHUNK per launch), so no copy is needed and a graph capture records them by value.
 * dst == src (in-place compaction, rows[i] >= i): one block copies the rows in order. ---- */
#define GATHER_CHUNK 256
struct gather_rows_arg {
    int32_t r[GATHER_CHUNK];
};

__global__ void gather_rows_kernel(uint16_t *dst, const uint16_t *src, gather_rows_arg rows, int n, int E,
                                   int in_order) {
    const int i0 = in_order ? 0 : blockIdx.x, i1 = in_order ? n : blockIdx.x + 1;
    for (int i = i0; i < i1; i++) {
        const uint16_t *s = src + (size_t)rows.r[i] * E;
        uint16_t *d = dst + (size_t)i * E;
        if (s != d) {
            if (((uintptr_t)s & 15u) == 0 && ((uintptr_t)d & 15u) == 0 && E % 8 == 0) {
                for (int j = threadIdx.x; j < E / 8; j += blockDim.x)
                    reinterpret_cast<uint4 *>(d)[j] = reinterpret_cast<const uint4 *>(s)[j];
            } else {
                for (int j = threadIdx.x; j < E; j += blockDim.x) d[j] = s[j];
            }
        }
        if (in_order) __syncthreads();
    }
}

void tpc_gather_rows(tp_backend *b, void *dst, const void *src, const int32_t *rows_host, int n, int E) {
    tp_cuda *c = tpc(b);
    if (n <= 0 || E <= 0) return;
    const int in_order = dst == src;
    for (int i0 = 0; i0 < n; i0 += GATHER_CHUNK) {
        const int m = n - i0 < GATHER_CHUNK ? n - i0 : GATHER_CHUNK;
        gather_rows_arg a;
        memcpy(a.r, rows_host + i0, (size_t)m * sizeof(int32_t));
        gather_rows_kernel<<<in_order ? 1 : m, 256, 0, c->stream>>>((uint16_t *)dst + (size_t)i0 * E,
                                                                     (const uint16_t *)src, a, m, E, in_order);
        CUDA_CHECK_LAUNCH();
    }
}
