/* int4 weights on the CUDA backend (--weights int4, AWQ and GPTQ checkpoints;
 * kernels/common/tp_quant4.h): the layers' Linear weights in 4 bits with an f32 scale and a zero
 * point per group of G consecutive k of a row; every other matrix (lm_head) int8 with f32 row
 * scales as under --weights int8 (cuda_int8.cu, whose functions these fall back to); activations,
 * KV cache, embedding, norms and biases F16/BF16.
 *
 * Matrix buffer of an int4 [N, K] matrix, group G (KG = K / G groups per row), at 256-byte
 * aligned offsets:
 *     q      [N, K / 2] bytes: k = 2i in the low nibble of byte i, k = 2i + 1 in the high one
 *            (a 32-bit word holds 8 consecutive k, nibble j = k0 + j)
 *     scale  [N, KG] f32 (a checkpoint's f16 scales are exact in f32)
 *     zero   [N, KG] one byte each, 0..15
 * matrix_bytes_q4 = the three, each padded to 256 bytes. The nibbles, scales and zeros are the
 * canonical form's (tp_q4_host) as they are: a GPU product reads N K / 2 + 5 N KG bytes plus
 * padding, tp_q4_read_bytes.
 *
 * Which kind a buffer holds: matmul, matmul_gelu and matmul_f32out get a device pointer, and a
 * header in device memory would cost a device-to-host read (a wait) per GEMM. The backend keeps
 * the description on the host instead: a table of the int4 buffers (address, N, K, G), written
 * by matrix_upload_q4 and matrix_fill_random_q4; an int8 upload (matrix_upload, _rowmax,
 * matrix_fill_random) or free of that address removes its entry. A GEMM whose W is in the table
 * is int4 (its N and K must match the upload's), any other int8.
 *
 * y[t, n] = sum over groups g of scale[n, g] * sum_{k in g} (q[n, k] - zero[n, g]) x[t, k]
 * (+ y) (+ bias) (GELU), one rounding to the output type at the end, as the int8 path.
 *  - T <= gemv_max_t (default 4, TPGEN_GEMV_MAX_T) and x 16-byte aligned: the GEMV kernel. A warp
 *    owns 2 rows; each lane streams 16 bytes of nibbles (32 k of one group, ld.global.cs: read
 *    once; 4 such chunks per row in flight) for every token of the step, sums (q - zero) x over
 *    them in f32 (each product is exact: an integer of 5 bits times an F16/BF16 value) and adds
 *    that sum times the group's scale to its f32 accumulator. The matrix is read once per step
 *    for all T tokens: 1/4 of the F16 bytes plus 5 bytes per group.
 *  - otherwise (prefill, batched decode): tiles of at most Q4_BN rows x Q4_BK columns are
 *    dequantized to the act dtype, w = act((q - zero) * scale) (tp_q4_dequant, then one rounding:
 *    2^-11 relative in F16, 2^-8 in BF16, well inside the 4-bit quantization step) into a scratch
 *    tile, and cublasGemmEx multiplies the tile with x into an f32 scratch of partial sums
 *    (tensor cores, f32 accumulation, the tile's K chunks summed in f32 by beta = 1); a kernel
 *    then applies the epilogue and rounds once. Steps longer than the f32 scratch's rows are
 *    taken in chunks of tokens. The two scratch buffers are the memory plan's ("int4 GEMM ...":
 *    plan_scratch, reserve_scratch); without a plan (op tests) they are allocated at their fixed
 *    size on first use. For batched decode (T of 5..32) this reads ~4.5 bytes per weight
 *    (nibbles, the tile written and read) against the F16 GEMM's 2: a tensor-core kernel that
 *    dequantizes in registers is the next step there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/common/tp_quant.h"
#include "kernels/common/tp_quant4.h"

#define Q4_BN 2048 /* rows of a dequantized tile */
#define Q4_BK 4096 /* columns of a dequantized tile (a multiple of TP_Q4_GROUP_ALIGN) */
#define Q4_TB 2048 /* tokens of one cuBLAS product (rows of the f32 partial sums) */
#define Q4_PLAN_TILE "int4 GEMM dequantized tile"
#define Q4_PLAN_SUMS "int4 GEMM f32 partial sums"

static size_t pad256(size_t n) { return (n + 255) & ~(size_t)255; }

/* Byte offsets of the parts of an int4 [N, K] buffer, group G. */
typedef struct {
    size_t scale, zero, total;
} q4_layout;
static q4_layout q4_offsets(int N, int K, int G) {
    const size_t kg = (size_t)(K / G);
    q4_layout l;
    l.scale = pad256((size_t)N * (size_t)K / 2);
    l.zero = l.scale + pad256((size_t)N * kg * sizeof(float));
    l.total = l.zero + (size_t)N * kg;
    return l;
}

/* One int4 buffer the backend holds: its address and shape. */
typedef struct {
    const void *ptr;
    int N, K, G;
} q4_entry;

/* The backend's int4 state (tp_cuda.q4): the table of int4 buffers (sorted by address), the int8
 * functions it falls back to, the GEMM scratch. */
struct tpc_q4 {
    q4_entry *tab;
    int n, cap;
    int verbose;
    unsigned printed;
    void (*i8_upload)(tp_backend *, void *, const void *, tp_dtype, int, int);
    void (*i8_upload_rowmax)(tp_backend *, void *, const void *, tp_dtype, int, int, const float *);
    void (*i8_fill_random)(tp_backend *, void *, int, int, uint64_t, float, float);
    void (*i8_matmul)(tp_backend *, void *, const void *, const void *, const void *, int, int, int, int);
    void (*i8_matmul_f32out)(tp_backend *, float *, const void *, const void *, const void *, int, int, int);
    void (*i8_matmul_gelu)(tp_backend *, void *, const void *, const void *, const void *, int, int, int);
    const char *(*i8_kernel_name)(tp_backend *, tp_op_class, int, int);
    void (*base_free)(tp_backend *, void *);
    void (*base_plan_scratch)(tp_backend *, const tp_step_limits *, tp_mem_plan *);
    void (*base_reserve_scratch)(tp_backend *, const tp_step_limits *);
    void (*base_destroy)(tp_backend *);
    void *tile;   /* [Q4_BN * Q4_BK] act */
    float *sums;  /* [sum_rows, Q4_BN] f32 */
    int sum_rows; /* tokens per cuBLAS product */
};

static tpc_q4 *q4s(tp_backend *b) { return tpc(b)->q4; }

/* ---- the table of int4 buffers ---- */

/* Index of ptr in the table, or of where it would go (*found 0). */
static int q4_search(const tpc_q4 *s, const void *ptr, int *found) {
    int lo = 0, hi = s->n;
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if ((uintptr_t)s->tab[mid].ptr < (uintptr_t)ptr) lo = mid + 1;
        else hi = mid;
    }
    *found = lo < s->n && s->tab[lo].ptr == ptr;
    return lo;
}

static const q4_entry *q4_find(const tpc_q4 *s, const void *ptr) {
    int found;
    const int i = q4_search(s, ptr, &found);
    return found ? &s->tab[i] : NULL;
}

static void q4_forget(tpc_q4 *s, const void *ptr) {
    int found;
    const int i = q4_search(s, ptr, &found);
    if (!found) return;
    memmove(&s->tab[i], &s->tab[i + 1], (size_t)(s->n - i - 1) * sizeof *s->tab);
    s->n--;
}

static void q4_remember(tpc_q4 *s, const void *ptr, int N, int K, int G) {
    int found;
    const int i = q4_search(s, ptr, &found);
    if (!found) {
        if (s->n == s->cap) {
            const int cap = s->cap ? 2 * s->cap : 64;
            q4_entry *t = (q4_entry *)realloc(s->tab, (size_t)cap * sizeof *t);
            if (!t) tp_die("out of host memory: the int4 matrix table (%d entries)", cap);
            s->tab = t;
            s->cap = cap;
        }
        memmove(&s->tab[i + 1], &s->tab[i], (size_t)(s->n - i) * sizeof *s->tab);
        s->n++;
    }
    s->tab[i].ptr = ptr;
    s->tab[i].N = N;
    s->tab[i].K = K;
    s->tab[i].G = G;
}

/* ---- weights (host side) ---- */

/* Dies naming the shape and group when an int4 matrix cannot have them. */
static void q4_check_shape(const char *what, int rows, int cols, int group) {
    if (rows <= 0 || cols <= 0)
        tp_die("cuda int4: %s: a [%d, %d] matrix: rows and columns must be positive", what, rows, cols);
    if (group <= 0 || group % TP_Q4_GROUP_ALIGN != 0)
        tp_die("cuda int4: %s: group size %d of a [%d, %d] matrix: must be a positive multiple of %d", what, group,
               rows, cols, TP_Q4_GROUP_ALIGN);
    if (cols % group != 0)
        tp_die("cuda int4: %s: a [%d, %d] matrix has %d columns, not a multiple of its group size %d", what, rows, cols,
               cols, group);
}

static size_t q4_matrix_bytes(tp_backend *b, int rows, int cols, int group) {
    (void)b;
    q4_check_shape("matrix_bytes_q4", rows, cols, group);
    return q4_offsets(rows, cols, group).total;
}

/* Builds the buffer's host image row by row (row(r, q [K], scale [KG], zero [KG]) fills row r
 * in canonical form), copies it to dst and records dst as int4. */
template <typename RowFn>
static void q4_upload_image(tp_backend *b, void *dst, int rows, int cols, int group, const char *what, RowFn row) {
    tp_cuda *c = tpc(b);
    tpc_no_capture(c, what);
    q4_check_shape(what, rows, cols, group);
    if ((uintptr_t)dst & 15u) tp_die("internal: cuda int4: %s into %p: not 16-byte aligned", what, dst);
    const int kg = cols / group;
    const q4_layout l = q4_offsets(rows, cols, group);
    uint8_t *img = (uint8_t *)calloc(l.total, 1);
    uint8_t *qr = (uint8_t *)malloc((size_t)cols), *zr = (uint8_t *)malloc((size_t)kg);
    if (!img || !qr || !zr) tp_die("out of host memory packing a [%d, %d] matrix to int4", rows, cols);
    float *sc = (float *)(img + l.scale);
    uint8_t *zero = img + l.zero;
    for (int r = 0; r < rows; r++) {
        row(r, qr, sc + (size_t)r * kg, zr);
        uint8_t *qp = img + (size_t)r * cols / 2;
        for (int k = 0; k < cols; k++) {
            if (qr[k] > TP_Q4_LEVELS)
                tp_die("cuda int4: %s: q[%d, %d] = %d of a [%d, %d] matrix is not a 4-bit value (0..%d)", what, r, k,
                       qr[k], rows, cols, TP_Q4_LEVELS);
            qp[k / 2] |= (uint8_t)(qr[k] << (4 * (k & 1)));
        }
        for (int g = 0; g < kg; g++) {
            if (zr[g] > TP_Q4_LEVELS)
                tp_die("cuda int4: %s: zero[%d, %d] = %d of a [%d, %d] matrix is not a 4-bit value (0..%d)", what, r, g,
                       zr[g], rows, cols, TP_Q4_LEVELS);
            zero[(size_t)r * kg + g] = zr[g];
        }
    }
    CUDA_CHECK(cudaSetDevice(c->device));
    CUDA_CHECK(cudaStreamSynchronize(c->stream)); /* ordered after every earlier op of the stream */
    CUDA_CHECK(cudaMemcpy(dst, img, l.total, cudaMemcpyHostToDevice));
    free(img);
    free(qr);
    free(zr);
    q4_remember(q4s(b), dst, rows, cols, group);
}

static void q4_matrix_upload(tp_backend *b, void *dst, const tp_q4_host *src, int rows, int cols) {
    const int G = src->group, kg = G > 0 ? cols / G : 0;
    q4_upload_image(b, dst, rows, cols, G, "matrix_upload_q4", [&](int r, uint8_t *q, float *s, uint8_t *z) {
        memcpy(q, src->q + (size_t)r * cols, (size_t)cols);
        memcpy(s, src->scale + (size_t)r * kg, (size_t)kg * sizeof(float));
        memcpy(z, src->zero + (size_t)r * kg, (size_t)kg);
    });
}

/* Element (r, c) is the f32 backend's draw r * cols + c (tp_q8_random_row), quantized per group by
 * tp_q4_quantize_group on the host: the CPU backend's bits. */
static void q4_matrix_fill_random(tp_backend *b, void *dst, int rows, int cols, int group, uint64_t seed, float mean,
                                  float std) {
    const uint64_t key = tp_rng_key(seed);
    float *tmp = (float *)malloc((size_t)(cols > 0 ? cols : 1) * sizeof(float));
    if (!tmp) tp_die("out of host memory drawing a [%d, %d] int4 matrix", rows, cols);
    q4_upload_image(b, dst, rows, cols, group, "matrix_fill_random_q4", [&](int r, uint8_t *q, float *s, uint8_t *z) {
        tp_q8_random_row(tmp, key, r, cols, mean, std);
        for (int g = 0; g < cols / group; g++)
            tp_q4_quantize_group(tmp + (size_t)g * group, group, q + (size_t)g * group, &s[g], &z[g]);
    });
    free(tmp);
}

/* The int8 uploads: the address holds int8 from now on. */
static void q4_i8_upload(tp_backend *b, void *dst, const void *src, tp_dtype st, int rows, int cols) {
    q4_forget(q4s(b), dst);
    q4s(b)->i8_upload(b, dst, src, st, rows, cols);
}
static void q4_i8_upload_rowmax(tp_backend *b, void *dst, const void *src, tp_dtype st, int rows, int cols,
                                const float *row_absmax) {
    q4_forget(q4s(b), dst);
    q4s(b)->i8_upload_rowmax(b, dst, src, st, rows, cols, row_absmax);
}
static void q4_i8_fill_random(tp_backend *b, void *dst, int rows, int cols, uint64_t seed, float mean, float std) {
    q4_forget(q4s(b), dst);
    q4s(b)->i8_fill_random(b, dst, rows, cols, seed, mean, std);
}
static void q4_free(tp_backend *b, void *p) {
    q4_forget(q4s(b), p);
    q4s(b)->base_free(b, p);
}

/* ---- kernels ---- */

/* v = sum (+ y) (+ bias) (GELU), one rounding: the int8 path's epilogue without its row scale. */
template <typename T, typename OT>
__device__ __forceinline__ void q4_store(OT *y, const T *bias, int N, int t, int n, float v, int accumulate, int gelu) {
    OT *yp = y + (size_t)t * N + n;
    if (accumulate) v += tpc_f(*yp);
    if (bias) v += tpc_f(bias[n]);
    if (gelu) v = tp_gelu_new(v);
    *yp = tpc_from<OT>(v);
}

/* ---- GEMV, T = TT tokens: a warp owns Q4_RR rows; a lane takes 32 k (16 bytes) of a row at a time,
 * Q4_UNROLL chunks per iteration with every load (nibbles, scale, zero) issued before the math, so
 * each lane keeps Q4_RR * Q4_UNROLL weight loads in flight (as the F16 GEMV, cuda_matmul.cu) ---- */
#define Q4_RR 2
#define Q4_UNROLL 4
#define Q4_THREADS 128

template <int TT, typename T, typename OT>
__global__ void __launch_bounds__(Q4_THREADS)
q4_gemv_kernel(OT *y, const T *x, const uint8_t *q, const float *scale, const uint8_t *zero, const T *bias, int N,
               int K, int G, int accumulate, int gelu) {
    const int warp = (blockIdx.x * Q4_THREADS + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    const int row0 = warp * Q4_RR;
    if (row0 >= N) return;
    const int K32 = K >> 5, K8 = K >> 3, KG = K / G;
    const uint4 *x8 = reinterpret_cast<const uint4 *>(x);
    const uint4 *w32[Q4_RR];
    const float *srow[Q4_RR];
    const uint8_t *zrow[Q4_RR];
#pragma unroll
    for (int r = 0; r < Q4_RR; r++) { /* rows past N re-read the last row; their sums are dropped */
        const size_t row = (size_t)min(row0 + r, N - 1);
        w32[r] = reinterpret_cast<const uint4 *>(q + row * (size_t)(K >> 1));
        srow[r] = scale + row * KG;
        zrow[r] = zero + row * KG;
    }
    float acc[Q4_RR][TT];
#pragma unroll
    for (int r = 0; r < Q4_RR; r++)
#pragma unroll
        for (int t = 0; t < TT; t++) acc[r][t] = 0.0f;
    for (int c0 = lane; c0 < K32; c0 += 32 * Q4_UNROLL) {
        uint4 wv[Q4_UNROLL][Q4_RR];
        float s[Q4_UNROLL][Q4_RR], z[Q4_UNROLL][Q4_RR];
#pragma unroll
        for (int u = 0; u < Q4_UNROLL; u++) {
            const int c = c0 + 32 * u, g = (c << 5) / G; /* chunk c's 32 k lie in one group (G % 32 == 0) */
#pragma unroll
            for (int r = 0; r < Q4_RR; r++) {
                wv[u][r] = c < K32 ? __ldcs(w32[r] + c) : make_uint4(0, 0, 0, 0);
                s[u][r] = c < K32 ? srow[r][g] : 0.0f;
                z[u][r] = c < K32 ? (float)zrow[r][g] : 0.0f;
            }
        }
#pragma unroll
        for (int u = 0; u < Q4_UNROLL; u++) {
            const int c = c0 + 32 * u;
            if (c >= K32) break;
            float part[Q4_RR][TT];
#pragma unroll
            for (int r = 0; r < Q4_RR; r++)
#pragma unroll
                for (int t = 0; t < TT; t++) part[r][t] = 0.0f;
#pragma unroll
            for (int h = 0; h < 4; h++) { /* word h: k = 32 c + 8 h .. + 7 */
                float xf[TT][8];
#pragma unroll
                for (int t = 0; t < TT; t++) tpc_unpack8(x8[(size_t)t * K8 + 4 * c + h], xf[t], T());
#pragma unroll
                for (int r = 0; r < Q4_RR; r++) {
                    const uint32_t word = reinterpret_cast<const uint32_t *>(&wv[u][r])[h];
                    float wf[8];
#pragma unroll
                    for (int j = 0; j < 8; j++) wf[j] = (float)((word >> (4 * j)) & 15u) - z[u][r]; /* exact */
#pragma unroll
                    for (int t = 0; t < TT; t++)
#pragma unroll
                        for (int j = 0; j < 8; j++) part[r][t] = fmaf(wf[j], xf[t][j], part[r][t]);
                }
            }
#pragma unroll
            for (int r = 0; r < Q4_RR; r++)
#pragma unroll
                for (int t = 0; t < TT; t++) acc[r][t] = fmaf(part[r][t], s[u][r], acc[r][t]);
        }
    }
    float out = 0.0f;
#pragma unroll
    for (int r = 0; r < Q4_RR; r++)
#pragma unroll
        for (int t = 0; t < TT; t++) {
            const float v = tpc_warp_sum(acc[r][t]);
            if (lane == t * Q4_RR + r) out = v;
        }
    const int t = lane / Q4_RR, r = lane % Q4_RR, n = row0 + r;
    if (t < TT && n < N) q4_store<T, OT>(y, bias, N, t, n, out, accumulate, gelu);
}

/* ---- dequantized tile: tile[r, k] = act((q - zero) * scale) of rows n0.., columns k0.., [bn, bk]
 * (bk % 8 == 0); one thread per 8 k (one 32-bit word of nibbles, one 16-byte store) ---- */
template <typename T>
__global__ void q4_dequant_kernel(T *tile, const uint8_t *q, const float *scale, const uint8_t *zero, int K, int G,
                                  int n0, int k0, int bn, int bk) {
    const int per_row = bk >> 3, KG = K / G;
    const size_t total = (size_t)bn * per_row;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const int r = (int)(i / per_row), k = k0 + 8 * (int)(i % per_row);
        const size_t n = (size_t)(n0 + r);
        const uint32_t word = *reinterpret_cast<const uint32_t *>(q + n * (size_t)(K >> 1) + (k >> 1));
        const float s = scale[n * KG + k / G];
        const int z = zero[n * KG + k / G];
        float f[8];
#pragma unroll
        for (int j = 0; j < 8; j++) f[j] = tp_q4_dequant((int)((word >> (4 * j)) & 15u), z, s);
        reinterpret_cast<uint4 *>(tile)[i] = tpc_pack8<T>(f);
    }
}

/* ---- epilogue of a tile's f32 sums [tc, bn]: y[t0 + t, n0 + j] ---- */
template <typename T, typename OT>
__global__ void q4_epilogue_kernel(OT *y, const float *sums, const T *bias, int N, int t0, int tc, int n0, int bn,
                                   int accumulate, int gelu) {
    const size_t total = (size_t)tc * bn;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const int t = (int)(i / bn), j = (int)(i % bn);
        q4_store<T, OT>(y, bias, N, t0 + t, n0 + j, sums[i], accumulate, gelu);
    }
}

/* ---- launchers ---- */

static void report(tpc_q4 *s, unsigned bit, const char *op, const char *path) {
    if (!s->verbose || (s->printed & (1u << bit))) return;
    s->printed |= 1u << bit;
    tp_log0("cuda int4: %s -> %s\n", op, path);
}

/* The GEMM scratch, allocated at its fixed size on first use when no plan reserved it. */
static void q4_scratch(tp_cuda *c, tpc_q4 *s) {
    if (s->tile) return;
    const size_t tb = (size_t)Q4_BN * Q4_BK * tp_dtype_size(c->base.act), sb = (size_t)Q4_TB * Q4_BN * sizeof(float);
    /* no plan (op tests): cudaMalloc is allowed in a relaxed-mode capture (cuda_graphs.cu) */
    if (cudaMalloc(&s->tile, tb) != cudaSuccess || cudaMalloc((void **)&s->sums, sb) != cudaSuccess) {
        cudaGetLastError();
        tp_die("out of device memory: the int4 GEMM scratch needs %.1f MiB (rank %d)", (tb + sb) / 1048576.0, c->rank);
    }
    s->sum_rows = Q4_TB;
}

static unsigned grid_for(size_t total) {
    const size_t g = (total + 255) / 256;
    return (unsigned)(g < 65535u * 8 ? (g ? g : 1) : 65535u * 8);
}

template <typename T, typename OT>
static void q4_gemm(tp_cuda *c, OT *y, const T *x, const q4_entry *e, const T *bias, int T_, int N, int K, int acc,
                    int gelu, unsigned bit, const char *op) {
    if (T_ <= 0) return;
    tpc_q4 *s = c->q4;
    const int G = e->G;
    const q4_layout l = q4_offsets(N, K, G);
    const uint8_t *q = (const uint8_t *)e->ptr;
    const float *scale = (const float *)(q + l.scale);
    const uint8_t *zero = q + l.zero;
    if (T_ <= c->gemv_max_t && ((uintptr_t)x & 15u) == 0) {
        report(s, bit, op, "int4 GEMV (nibbles widened in registers, f32 group sums)");
        const int warps = (N + Q4_RR - 1) / Q4_RR;
        const int blocks = (warps * 32 + Q4_THREADS - 1) / Q4_THREADS;
        switch (T_) {
        case 1: q4_gemv_kernel<1, T, OT><<<blocks, Q4_THREADS, 0, c->stream>>>(y, x, q, scale, zero, bias, N, K, G, acc, gelu); break;
        case 2: q4_gemv_kernel<2, T, OT><<<blocks, Q4_THREADS, 0, c->stream>>>(y, x, q, scale, zero, bias, N, K, G, acc, gelu); break;
        case 3: q4_gemv_kernel<3, T, OT><<<blocks, Q4_THREADS, 0, c->stream>>>(y, x, q, scale, zero, bias, N, K, G, acc, gelu); break;
        default: q4_gemv_kernel<4, T, OT><<<blocks, Q4_THREADS, 0, c->stream>>>(y, x, q, scale, zero, bias, N, K, G, acc, gelu); break;
        }
        CUDA_CHECK_LAUNCH();
        return;
    }
    report(s, bit + 1, op, "int4 tiles dequantized to the act dtype, cublasGemmEx into f32 sums, epilogue kernel");
    q4_scratch(c, s);
    const cudaDataType in = c->base.act == TP_F16 ? CUDA_R_16F : CUDA_R_16BF;
    const float one = 1.0f, zero_f = 0.0f;
    for (int t0 = 0; t0 < T_; t0 += s->sum_rows) {
        const int tc = T_ - t0 < s->sum_rows ? T_ - t0 : s->sum_rows;
        for (int n0 = 0; n0 < N; n0 += Q4_BN) {
            const int bn = N - n0 < Q4_BN ? N - n0 : Q4_BN;
            for (int k0 = 0; k0 < K; k0 += Q4_BK) {
                const int bk = K - k0 < Q4_BK ? K - k0 : Q4_BK; /* a multiple of 32: K and Q4_BK are */
                q4_dequant_kernel<T><<<grid_for((size_t)bn * (bk / 8)), 256, 0, c->stream>>>(
                    (T *)s->tile, q, scale, zero, K, G, n0, k0, bn, bk);
                CUDA_CHECK_LAUNCH();
                /* column-major: sums^T [bn, tc] = tile^T [bn, bk] x^T [bk, tc] (+ sums^T for k0 > 0) */
                CUBLAS_CHECK(cublasGemmEx(c->cublas, CUBLAS_OP_T, CUBLAS_OP_N, bn, tc, bk, &one, s->tile, in, bk,
                                          x + (size_t)t0 * K + k0, in, K, k0 ? &one : &zero_f, s->sums, CUDA_R_32F, bn,
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
            }
            q4_epilogue_kernel<T, OT><<<grid_for((size_t)tc * bn), 256, 0, c->stream>>>(y, s->sums, bias, N, t0, tc, n0,
                                                                                         bn, acc, gelu);
            CUDA_CHECK_LAUNCH();
        }
    }
}

/* The int4 entry of W for a GEMM of [N, K], or NULL (an int8 matrix). */
static const q4_entry *q4_weight(tp_backend *b, const void *W, int N, int K, const char *op) {
    const q4_entry *e = q4_find(q4s(b), W);
    if (e && (e->N != N || e->K != K))
        tp_die("internal: cuda int4: %s of [%d, %d] on the int4 matrix at %p uploaded as [%d, %d]", op, N, K, W, e->N,
               e->K);
    return e;
}

static void q4_matmul(tp_backend *b, void *y, const void *x, const void *W, const void *bias, int T, int N, int K,
                      int accumulate) {
    const q4_entry *e = q4_weight(b, W, N, K, "matmul");
    if (!e) return q4s(b)->i8_matmul(b, y, x, W, bias, T, N, K, accumulate);
    if (b->act == TP_F16)
        q4_gemm<__half, __half>(tpc(b), (__half *)y, (const __half *)x, e, (const __half *)bias, T, N, K, accumulate, 0, 0,
                                "matmul");
    else
        q4_gemm<__nv_bfloat16, __nv_bfloat16>(tpc(b), (__nv_bfloat16 *)y, (const __nv_bfloat16 *)x, e,
                                              (const __nv_bfloat16 *)bias, T, N, K, accumulate, 0, 0,
                                              "matmul");
}

static void q4_matmul_f32out(tp_backend *b, float *y, const void *x, const void *W, const void *bias, int T, int N,
                             int K) {
    const q4_entry *e = q4_weight(b, W, N, K, "matmul_f32out");
    if (!e) return q4s(b)->i8_matmul_f32out(b, y, x, W, bias, T, N, K);
    if (b->act == TP_F16)
        q4_gemm<__half, float>(tpc(b), y, (const __half *)x, e, (const __half *)bias, T, N, K, 0, 0, 2,
                               "matmul_f32out (logits)");
    else
        q4_gemm<__nv_bfloat16, float>(tpc(b), y, (const __nv_bfloat16 *)x, e, (const __nv_bfloat16 *)bias, T, N, K, 0,
                                      0, 2, "matmul_f32out (logits)");
}

static void q4_matmul_gelu(tp_backend *b, void *y, const void *x, const void *W, const void *bias, int T, int N,
                           int K) {
    const q4_entry *e = q4_weight(b, W, N, K, "matmul_gelu");
    if (!e) return q4s(b)->i8_matmul_gelu(b, y, x, W, bias, T, N, K);
    if (b->act == TP_F16)
        q4_gemm<__half, __half>(tpc(b), (__half *)y, (const __half *)x, e, (const __half *)bias, T, N, K, 0, 1, 4,
                                "matmul_gelu (fc_in)");
    else
        q4_gemm<__nv_bfloat16, __nv_bfloat16>(tpc(b), (__nv_bfloat16 *)y, (const __nv_bfloat16 *)x, e,
                                              (const __nv_bfloat16 *)bias, T, N, K, 0, 1, 4,
                                              "matmul_gelu (fc_in)");
}

/* kernel_name: the layers' GEMMs (MATMUL) are int4, lm_head (LOGITS) int8 (cuda_int8.cu). */
static const char *q4_kernel_name(tp_backend *b, tp_op_class op, int T, int D) {
    if (op != TP_OP_MATMUL) return q4s(b)->i8_kernel_name(b, op, T, D);
    const int f16 = b->act == TP_F16;
    if (T <= tpc(b)->gemv_max_t) return f16 ? "gemv-int4-f16" : "gemv-int4-bf16";
    return f16 ? "dequant-cublas-int4-f16" : "dequant-cublas-int4-bf16";
}

/* ---- scratch and lifetime ---- */

static int q4_sum_rows(const tp_step_limits *lim) {
    return lim->max_tokens < 1 ? 1 : lim->max_tokens < Q4_TB ? lim->max_tokens : Q4_TB;
}

static void q4_plan_scratch(tp_backend *b, const tp_step_limits *lim, tp_mem_plan *plan) {
    q4s(b)->base_plan_scratch(b, lim, plan);
    tp_mem_plan_add(plan, Q4_PLAN_TILE, (size_t)Q4_BN * Q4_BK * tp_dtype_size(b->act), TP_MEM_DEVICE,
                    "%d x %d %s weights", Q4_BN, Q4_BK, tp_dtype_name(b->act));
    tp_mem_plan_add(plan, Q4_PLAN_SUMS, (size_t)q4_sum_rows(lim) * Q4_BN * sizeof(float), TP_MEM_DEVICE,
                    "%d tokens x %d rows", q4_sum_rows(lim), Q4_BN);
}

static void q4_release_scratch(tpc_q4 *s) {
    if (s->tile) CUDA_CHECK(cudaFree(s->tile));
    if (s->sums) CUDA_CHECK(cudaFree(s->sums));
    s->tile = NULL;
    s->sums = NULL;
}

static void q4_reserve_scratch(tp_backend *b, const tp_step_limits *lim) {
    tpc_q4 *s = q4s(b);
    s->base_reserve_scratch(b, lim); /* no capture, no graphs yet, the stream drained: checked there */
    q4_release_scratch(s);
    s->tile = b->alloc(b, (size_t)Q4_BN * Q4_BK * tp_dtype_size(b->act), Q4_PLAN_TILE);
    s->sum_rows = q4_sum_rows(lim);
    s->sums = (float *)b->alloc(b, (size_t)s->sum_rows * Q4_BN * sizeof(float), Q4_PLAN_SUMS);
}

static void q4_destroy(tp_backend *b) {
    tp_cuda *c = tpc(b);
    tpc_q4 *s = c->q4;
    CUDA_CHECK(cudaSetDevice(c->device));
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
    q4_release_scratch(s);
    void (*destroy)(tp_backend *) = s->base_destroy;
    free(s->tab);
    free(s);
    c->q4 = NULL;
    destroy(b);
}

extern "C" TP_CUDA_EXPORT int tpcuda_use_int4(tp_backend *b, int verbose, char *err, size_t err_size) {
    if (!b || !b->name || strcmp(b->name, "cuda") != 0) {
        snprintf(err, err_size, "internal: tpcuda_use_int4 on the %s backend", b && b->name ? b->name : "(null)");
        return -1;
    }
    if (tpc(b)->q4) {
        snprintf(err, err_size, "internal: tpcuda_use_int4 called twice on one backend");
        return -1;
    }
    if (tpcuda_use_int8(b, verbose, err, err_size)) return -1; /* matrix_upload: int8 (lm_head) */
    tpc_q4 *s = (tpc_q4 *)calloc(1, sizeof *s);
    if (!s) tp_die("out of host memory creating the int4 state of the CUDA backend");
    s->verbose = verbose;
    s->i8_upload = b->matrix_upload;
    s->i8_upload_rowmax = b->matrix_upload_rowmax;
    s->i8_fill_random = b->matrix_fill_random;
    s->i8_matmul = b->matmul;
    s->i8_matmul_f32out = b->matmul_f32out;
    s->i8_matmul_gelu = b->matmul_gelu;
    s->i8_kernel_name = b->kernel_name;
    s->base_free = b->free;
    s->base_plan_scratch = b->plan_scratch;
    s->base_reserve_scratch = b->reserve_scratch;
    s->base_destroy = b->destroy;
    tpc(b)->q4 = s;
    if (verbose)
        tp_log0("cuda int4: layer weights int4 (f32 scale + zero per group); GEMV (T <= %d) on the nibbles, larger T "
                "through dequantized %d x %d tiles and cuBLAS; other matrices int8\n", tpc(b)->gemv_max_t, Q4_BN,
                Q4_BK);
    b->weights = "int4";
    b->matrix_bytes_q4 = q4_matrix_bytes;
    b->matrix_upload_q4 = q4_matrix_upload;
    b->matrix_fill_random_q4 = q4_matrix_fill_random;
    b->matrix_upload = q4_i8_upload;
    b->matrix_upload_rowmax = q4_i8_upload_rowmax;
    b->matrix_fill_random = q4_i8_fill_random;
    b->free = q4_free;
    b->matmul = q4_matmul;
    b->matmul_f32out = q4_matmul_f32out;
    b->matmul_gelu = q4_matmul_gelu;
    b->kernel_name = q4_kernel_name;
    b->plan_scratch = q4_plan_scratch;
    b->reserve_scratch = q4_reserve_scratch;
    b->destroy = q4_destroy;
    return 0;
}
