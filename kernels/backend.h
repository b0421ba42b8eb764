/* The op interface: everything the model forward asks of a compute backend.
 *
 * The model calls these function pointers and never knows whether they run on the CPU
 * (kernels/cpu, fp32) or a GPU (kernels/cuda, fp16/bf16 with fp32 accumulation). All buffer
 * arguments are *device* pointers (plain host memory on the CPU backend) obtained from
 * b->alloc, holding elements of b->act ("act" below) unless a comment says f32 or int32.
 * Calls are ordered like a stream: an op sees the results of every earlier op; to_host and
 * the *_to_host ops wait for the device. Ops never fail on valid arguments; a backend error
 * (CUDA, cuBLAS) ends the job through tp_die with the library's message.
 *
 * Shapes: T tokens in the step, E = n_embd, Hl = this rank's heads, D = head_dim,
 * R = rotary_dim, N/K GEMM dims. Row-major throughout.
 *
 * Paged KV cache. Each layer has a K cache and a V cache of [n_blocks, Hkl, block_size, D]
 * (act), this rank's KV heads only, head-contiguous (kernels/common/tp_kv.h). A sequence's token
 * at position p lives in physical block block_table[seq][p / block_size] at slot p % block_size. A step writes the K/V of its new
 * tokens first, then each token attends over positions 0..pos[t] of its own sequence, so a
 * prefill chunk, a decode token and a mix of both all take the same path.
 */
#ifndef TPGEN_BACKEND_H
#define TPGEN_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "mem_plan.h"
#include "kernels/common/tp_quant4.h" /* tp_q4_host */

/* Device-side description of one forward step (the arrays are device int32 buffers). */
typedef struct {
    int n_tokens;               /* T */
    int n_seqs;                 /* S: rows of block_table */
    int block_size;             /* tokens per KV block */
    int max_blocks;             /* columns of block_table */
    int max_pos;                /* max over t of pos[t] (host-known bound for launch sizing) */
    const int32_t *pos;         /* [T] position of each token in its sequence */
    const int32_t *seq;         /* [T] row of block_table each token belongs to */
    const int32_t *block_table; /* [S, max_blocks] physical block ids (-1 past the end) */
} tp_step;

/* The largest steps a job will run, known at start: what the backend's scratch is sized for. */
typedef struct {
    int max_tokens; /* T of the largest step */
    int max_seqs;   /* rows of the block table */
    int max_ctx;    /* positions a sequence can reach: block-table capacity max_blocks * block_size */
    int max_rows;   /* logits rows of one logits_stats call */
    int max_k;      /* k of logits_stats (<= 64) */
    int n_heads;    /* Hl */
    int head_dim;   /* D */
} tp_step_limits;

/* One layer's attention geometry on this rank, fixed at load (engine/model/arch.c fills it from the
 * architecture and the shard plan). The q/k/v rows of a token are [Hl*D q | Hkl*D k | Hkl*D v]:
 * this rank's query heads, then its KV heads' k, then their v. Grouped-query attention: query head
 * h reads KV head h / (Hl / Hkl); Hkl == Hl is plain multi-head attention (CodeGen).
 * Rotary on the first R dims of every q and k head at position pos, angle = pos * inv_freq[i] in
 * f32, inv_freq[i] = theta^(-2i/R) (tp_rope_inv_freq, kernels/common/tp_rotary.h); the pairs it
 * rotates depend on the style:
 *   TP_ROPE_GPTJ: (x[2i], x[2i+1]), i < R/2   (GPT-J interleaved: HF CodeGen)
 *   TP_ROPE_NEOX: (x[i], x[i + R/2]), i < R/2  (rotate-half: HF LLaMA, GPT-NeoX) */
typedef enum { TP_ROPE_GPTJ = 0, TP_ROPE_NEOX = 1 } tp_rope_style;
typedef struct {
    int n_heads;    /* Hl: this rank's query heads */
    int n_kv_heads; /* Hkl: this rank's KV heads, Hl % Hkl == 0 */
    int head_dim;   /* D */
    int rotary_dim; /* R <= D, even */
    tp_rope_style rope_style;
    float rope_theta; /* 10000 for CodeGen */
} tp_attn_shape;

/* Op classes whose implementation a backend picks per call (CPU features, dtype, step size,
 * env overrides): what kernel_name names. MATMUL: matmul and matmul_gelu (the layers' GEMMs);
 * LOGITS: matmul_f32out (lm_head); ATTENTION: attention. */
typedef enum { TP_OP_MATMUL = 0, TP_OP_LOGITS = 1, TP_OP_ATTENTION = 2 } tp_op_class;

typedef struct tp_backend tp_backend;
struct tp_backend {
    const char *name; /* "cpu", "cuda" */
    tp_dtype act;     /* dtype of weights and activations in device memory */
    tp_dtype kv;      /* dtype of the KV cache: act, unless tp_backend_kv_dtype chose another */

    /* --- memory --- */
    void *(*alloc)(tp_backend *b, size_t bytes, const char *what); /* dies naming `what` and sizes */
    void (*free)(tp_backend *b, void *p);
    size_t (*mem_available)(tp_backend *b);                         /* bytes free for allocation */
    void (*to_device)(tp_backend *b, void *dst, const void *src_host, size_t bytes);
    void (*to_host)(tp_backend *b, void *dst_host, const void *src, size_t bytes); /* synchronous */
    void (*sync)(tp_backend *b);
    /* Device-to-device copy (bench measures the memory-bandwidth floor with it). */
    void (*copy)(tp_backend *b, void *dst, const void *src, size_t bytes);
    /* Host staging memory for to_device/to_host (pinned on CUDA; plain on the CPU). */
    void *(*host_alloc)(tp_backend *b, size_t bytes, const char *what);
    void (*host_free)(tp_backend *b, void *p);
    /* Optional (NULL: the backend needs no scratch of its own). plan_scratch adds to `plan` every
     * buffer the backend holds or will hold for steps within `lim` (kernels/mem_plan.h);
     * reserve_scratch then allocates its TP_MEM_DEVICE items, once, through alloc. After it no op
     * allocates: a step beyond `lim` dies naming the limit instead. */
    void (*plan_scratch)(tp_backend *b, const tp_step_limits *lim, tp_mem_plan *plan);
    void (*reserve_scratch)(tp_backend *b, const tp_step_limits *lim);

    /* --- weights (once, at load) ---
     * upload: n host elements of type st -> act at dst (vectors: biases, norms, embeddings).
     * matrix_bytes / matrix_upload: a [rows, cols] host matrix of type st (a Linear weight,
     * HF layout [out, in]) into device memory in whatever layout the backend's matmul wants. */
    void (*upload)(tp_backend *b, void *dst, const void *src_host, tp_dtype st, size_t n);
    size_t (*matrix_bytes)(tp_backend *b, int rows, int cols);
    void (*matrix_upload)(tp_backend *b, void *dst, const void *src_host, tp_dtype st, int rows, int cols);

    /* Fills n elements of act at dst (a vector, or a whole matrix_upload buffer of matrix_bytes)
     * with mean + std * N(0,1) draws from `seed`. Used by `tpgen bench --random-weights` so a
     * 16B-shaped model needs no file. */
    void (*fill_random)(tp_backend *b, void *dst, size_t n, uint64_t seed, float mean, float std);

    /* --- int8 weights (--weights int8; kernels/common/tp_quant.h) ---
     * weights: NULL when matrices hold act like everything else; "int8" when matrix_upload
     * quantizes each Linear weight per output row (int8 + an f32 scale per row; biases, norms and
     * embeddings stay act). Then these two are set (matrix_upload_rowmax is NULL otherwise):
     * matrix_upload_rowmax: matrix_upload with row_absmax[r] = max |w| over row r's *full* width
     * in the checkpoint, for a column slice (row-parallel out_proj, fc_out): every TP size then
     * quantizes with the same scales, so q is the same bits at TP 1, 2, 4.
     * matrix_fill_random: fill_random of a [rows, cols] matrix buffer: element (r, c) is the
     * f32 backend's draw r * cols + c, then quantized (bench --random-weights). The bf16 CPU
     * backend sets it too (its matrices may be stored in panels: kernels/cpu/cpu_bf16.h); NULL
     * where a matrix is plain act rows, which fill_random fills. */
    const char *weights;
    void (*matrix_upload_rowmax)(tp_backend *b, void *dst, const void *src_host, tp_dtype st, int rows, int cols,
                                 const float *row_absmax);
    void (*matrix_fill_random)(tp_backend *b, void *dst, int rows, int cols, uint64_t seed, float mean, float std);

    /* --- int4 weights (--weights int4, AWQ and GPTQ checkpoints; kernels/common/tp_quant4.h) ---
     * weights "int4": a matrix the model keeps in 4 bits (every layer's Linear weights) is stored by
     * matrix_upload_q4 from its canonical groups (tp_q4_host, group size per matrix) into
     * matrix_bytes_q4 bytes; every other matrix (lm_head, a Linear a checkpoint leaves unquantized)
     * through matrix_bytes / matrix_upload(_rowmax) / matrix_fill_random as under "int8". matmul,
     * matmul_gelu and matmul_f32out read either kind: the buffer says which. NULL elsewhere.
     * matrix_fill_random_q4: an int4 [rows, cols] buffer of the f32 backend's draws (element (r, c)
     * is draw r * cols + c, as int8's), quantized by tp_q4_quantize_group (bench --random-weights). */
    size_t (*matrix_bytes_q4)(tp_backend *b, int rows, int cols, int group);
    void (*matrix_upload_q4)(tp_backend *b, void *dst, const tp_q4_host *src, int rows, int cols);
    void (*matrix_fill_random_q4)(tp_backend *b, void *dst, int rows, int cols, int group, uint64_t seed, float mean,
                                  float std);

    /* --- ops --- */
    /* x[t,:] = wte[ids[t],:]. ids: device int32 [T]; wte: [V, E] (upload layout). */
    void (*embed)(tp_backend *b, void *x, const void *wte, const int32_t *ids, int T, int E);
    /* y = (x - mean) / sqrt(var + eps) * g + beta, per row; y may equal x. [T, E] */
    void (*layernorm)(tp_backend *b, void *y, const void *x, const void *g, const void *beta, int T, int E,
                      float eps);
    /* y[T,N] = (accumulate ? y : 0) + x[T,K] @ W^T + bias; W from matrix_upload of [N, K];
     * bias [N] or NULL. y never aliases x. */
    void (*matmul)(tp_backend *b, void *y, const void *x, const void *W, const void *bias, int T, int N, int K,
                   int accumulate);
    /* Same as matmul without accumulate, but y is f32 (logits keep full precision). */
    void (*matmul_f32out)(tp_backend *b, float *y, const void *x, const void *W, const void *bias, int T, int N,
                          int K);
    /* y[T,N] = gelu_new(x[T,K] @ W^T + bias) (fc_in + its activation, one op so a GPU can fuse
     * the bias and the GELU into the GEMM's f32 epilogue and round once). */
    void (*matmul_gelu)(tp_backend *b, void *y, const void *x, const void *W, const void *bias, int T, int N,
                        int K);
    /* x = gelu_new(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), n elements. */
    void (*gelu_new)(tp_backend *b, void *x, size_t n);
    /* y += x, n elements. */
    void (*add)(tp_backend *b, void *y, const void *x, size_t n);
    /* dst[i,:] = src[rows[i],:], rows: host int32 [n]; src [*, E], dst [n, E]. */
    void (*gather_rows)(tp_backend *b, void *dst, const void *src, const int32_t *rows_host, int n, int E);

    /* qkv: [T, (Hl + 2 Hkl) D] laid out as tp_attn_shape says. Applies rotary (a->rope_style) to
     * the first R dims of every q and k head at position pos[t], in place, then writes k and v of
     * every token into its cache slot. k_cache, v_cache: this layer's [n_blocks, Hkl, bs, D]. */
    void (*rotary_kv_write)(tp_backend *b, void *qkv, void *k_cache, void *v_cache, const tp_step *st,
                            const tp_attn_shape *a);
    /* out[t, h*D + d] = sum_p softmax_p(q_t,h . k_p,g / sqrt(D)) v_p,g[d], g = h / (Hl / Hkl), over
     * p = 0..pos[t] of the token's sequence, read from the cache; scores and softmax in f32. out:
     * [T, Hl D]; q from qkv as above. */
    void (*attention)(tp_backend *b, void *out, const void *qkv, const void *k_cache, const void *v_cache,
                      const tp_step *st, const tp_attn_shape *a);
    /* Optional (NULL: one attention kernel, nothing to choose). Called once at load, before the
     * first step, with this rank's attention geometry and the KV cache's block size: a backend with
     * several attention kernels picks the one its attention runs for this shape (the CPU backends
     * time their builds on it, kernels/cpu/cpu_attn.h), and with verbose says which and why (rank 0). */
    void (*attention_tune)(tp_backend *b, const tp_attn_shape *a, int block_size, int verbose);
    /* LLaMA's ops (NULL on a backend without them; engine/model/arch.c refuses such a model there).
     * rmsnorm: y = g * act(x / sqrt(mean(x^2) + eps)) per row, statistics in f32 or better; y may
     * equal x. [T, E]. act(): rounded to act, as HF LlamaRMSNorm's `.to(input_dtype)` before the
     * weight (a no-op in f32; the CPU bf16 backend rounds there and after the product).
     * silu_mul: y[t, i] = act(silu(gu[t, i])) * gu[t, N + i], silu(z) = z / (1 + exp(-z)) in f32
     * (tp_silu in kernels/common/tp_act.h; act() as HF's bf16 act_fn output); gu: [T, 2N] (gate_proj's
     * outputs, then up_proj's, one GEMM), y: [T, N]. */
    void (*rmsnorm)(tp_backend *b, void *y, const void *x, const void *g, int T, int E, float eps);
    void (*silu_mul)(tp_backend *b, void *y, const void *gu, int T, int N);

    /* Per row r of logits [rows, ld] (f32), over columns c < n_valid (columns past it are vocab
     * padding): mx[r] = max, se[r] = sum exp(l - mx), the k largest (value descending, equal
     * values by lower column first) into topv[r*k..], topi[r*k..] (column indices), and
     * tgt_val[r] = logits[r, targets[r]] when 0 <= targets[r] < n_valid, else NaN.
     * targets may be NULL. Outputs are host arrays; k <= 64. */
    void (*logits_stats)(tp_backend *b, const float *logits, int rows, int ld, int n_valid, int k,
                         const int32_t *targets_host, float *mx, float *se, float *topv, int32_t *topi,
                         float *tgt_val);

    /* Optional (NULL on the CPU): CUDA-graph capture of a decode step keyed by batch bucket.
     * graph_launch returns 1 when a graph for `key` exists and was launched (the step is done). */
    int (*graph_launch)(tp_backend *b, int key);
    void (*graph_begin)(tp_backend *b, int key);
    void (*graph_end)(tp_backend *b, int key);

    /* Optional (NULL: the backend does not say; `tpgen bench` then writes null). The implementation
     * the op class takes on this backend as created, from the same decision the op makes:
     * MATMUL / LOGITS at T tokens (rows) of the step; ATTENTION with T queries of one sequence in
     * the step (1: decode, more: a prefill chunk) and head dim D (D is ignored elsewhere). A short
     * static or backend-owned name, "<kernel>-<dtype>[-<isa>]" (e.g. "gemv-bf16-avx2",
     * "openblas-sgemm-f32"), valid until destroy. */
    const char *(*kernel_name)(tp_backend *b, tp_op_class op, int T, int D);

    void (*destroy)(tp_backend *b);
    void *impl;
};

/* Bytes one product with a [rows, cols] matrix (from matrix_upload) reads: the matrix once in its
 * stored dtype -- int8 plus an f32 scale per row under --weights int8, act otherwise -- without
 * layout padding or a second copy (matrix_bytes may hold one: the bf16 CPU backend keeps oneDNN's
 * blocked W^T beside its rows or panels, and a product reads one of the two). The weight bytes
 * `tpgen bench` counts per decode step. */
static inline size_t tp_matrix_read_bytes(const tp_backend *b, int rows, int cols) {
    if (b->weights) return (size_t)rows * (size_t)cols + (size_t)rows * sizeof(float); /* "int8", int4's int8 */
    return (size_t)rows * (size_t)cols * tp_dtype_size(b->act);
}

/* The backends. The CUDA ones are in a module loaded on first use (kernels/cuda_module.h); NULL +
 * message in err when not available. */
tp_backend *tp_backend_cpu_create(int n_threads);
/* The CPU backend in bf16 (kernels/cpu/cpu_bf16.h); NULL + message when this build lacks oneDNN.
 * verbose: print which path each op takes. */
tp_backend *tp_backend_cpu_bf16_create(int n_threads, int verbose, char *err, size_t err_size);
/* The OPENBLAS_CORETYPE this CPU needs because the loaded OpenBLAS took a generic core for it
 * (kernels/cpu/cpu_blas_core.c), or NULL: OpenBLAS knows the CPU, the CPU has no AVX2, or the
 * user set OPENBLAS_CORETYPE. For util/threads.c's re-exec at start (launcher/main.c). */
const char *tp_cpu_blas_core_override(void);
/* The kernels OpenBLAS runs (its openblas_get_corename: "Haswell", "SkylakeX", "Prescott", ...). */
const char *tp_cpu_blas_core_name(void);
/* The rule, pure for tests: corename is OpenBLAS's choice (openblas_get_corename). */
const char *tp_blas_core_for(const char *corename, int avx2_fma, int avx512, int avx512bf16);
/* --weights int8 on a backend just created (f32 CPU, or CUDA in f16/bf16): its matrices become
 * int8 with f32 row scales and its GEMMs read them (kernels/cpu/cpu_int8.c,
 * kernels/cuda/cuda_int8.cu). Returns 0, or -1 with the reason (an incompatible --dtype, a
 * build without CUDA) in err. verbose: print which path each GEMM takes. */
int tp_backend_use_int8(tp_backend *b, int verbose, char *err, size_t err_size);
int tp_backend_cpu_use_int8(tp_backend *b, int verbose, char *err, size_t err_size);
int tp_backend_cuda_use_int8(tp_backend *b, int verbose, char *err, size_t err_size);
/* --weights int4 (or an AWQ / GPTQ checkpoint) on a backend just created: as use_int8 (its
 * matrix_upload stores int8, for lm_head), plus the int4 matrices above and GEMMs that read both
 * (kernels/cpu/cpu_int4.c, kernels/cuda/cuda_int4.cu). Returns 0, or -1 with the reason in err. */
int tp_backend_use_int4(tp_backend *b, int verbose, char *err, size_t err_size);
int tp_backend_cpu_use_int4(tp_backend *b, int verbose, char *err, size_t err_size);
int tp_backend_cuda_use_int4(tp_backend *b, int verbose, char *err, size_t err_size);
/* --int4-activations int8, after use_int4 and before any matrix is stored: the CPU int4 kernels
 * round x to int8 per token and group instead of int16 per token (faster, not exact:
 * docs/KERNELS.md). Returns 0, or -1 with the reason in err (another backend, no int4 weights). */
int tp_backend_int4_act8(tp_backend *b, char *err, size_t err_size);
int tp_backend_cpu_int4_act8(tp_backend *b, char *err, size_t err_size);
/* --kv-cache-dtype, on a backend just created (before the KV cache is allocated): K and V kept in
 * kv (b->kv) while activations stay in b->act. Every backend takes its own act; the f32 CPU
 * backend also bf16 (K and V rounded to nearest even when written, widened exactly when read:
 * half the cache's bytes and reads; attention's scores, softmax and sums stay f32). Returns 0,
 * or -1 with the reason in err. */
int tp_backend_kv_dtype(tp_backend *b, tp_dtype kv, char *err, size_t err_size);
/* dtype: TP_F16 or TP_BF16; device: CUDA device ordinal. */
tp_backend *tp_backend_cuda_create(int device, tp_dtype act, char *err, size_t err_size);
int tp_backend_cuda_compiled(void);   /* 1 when built with CUDA (the module may still fail to load) */
int tp_backend_cuda_device_count(void); /* 0 when none, not built, no driver or no module (kernels/cuda_module.h) */

#endif
