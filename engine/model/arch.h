/* The architectures tpgen runs, as data: one table row per architecture says how its block is
 * built (norm kind, MLP kind, rotary style, residual order), what its tensors are called and
 * which config.json keys it reads, with HF's defaults. The forward pass (model.c), the loader
 * (weights.c) and the shard plan ask these fields, never the model's name (the habit of
 * llama.cpp's src/llama-arch.* and calm's model.h).
 *
 *   CodeGen (CodeGenForCausalLM, GPT-J block): x = LN(h); h += attn(x) + mlp(x): one LayerNorm,
 *     attention and MLP in parallel on the same x, one all-reduce per layer; fused qkv_proj in
 *     mp_num groups; GPT-J interleaved rotary on rotary_dim dims; MLP fc_out(gelu_new(fc_in x)).
 *   LLaMA (LlamaForCausalLM; CodeGen2.5): h += attn(RMS1(h)); h += mlp(RMS2(h)): two RMSNorms,
 *     sequential residual, two all-reduces per layer; q/k/v/o_proj, grouped-query attention
 *     (num_key_value_heads); rotate-half rotary on all of head_dim, base rope_theta; MLP
 *     down(silu(gate x) * up x).
 */
#ifndef TPGEN_ARCH_H
#define TPGEN_ARCH_H

#include <stddef.h>

#include "kernels/backend.h" /* tp_rope_style */
#include "util/json.h"

typedef enum { TP_ARCH_CODEGEN = 0, TP_ARCH_LLAMA = 1, TP_ARCH_COUNT } tp_arch_id;
typedef enum { TP_NORM_LAYERNORM = 0, TP_NORM_RMSNORM = 1 } tp_norm_kind;
/* GELU: fc_out(gelu_new(fc_in x + b)); SILU_GATED: down(silu(gate x) * up x) */
typedef enum { TP_MLP_GELU = 0, TP_MLP_SILU_GATED = 1 } tp_mlp_kind;
/* PARALLEL: h += attn(N(h)) + mlp(N(h)), one norm and one all-reduce;
 * SEQUENTIAL: h += attn(N1(h)); h += mlp(N2(h)), two of each */
typedef enum { TP_RESIDUAL_PARALLEL = 0, TP_RESIDUAL_SEQUENTIAL = 1 } tp_residual_kind;

typedef struct tp_config tp_config;

/* Tensor names without ".weight" / ".bias"; the per-layer ones are printf formats of the layer
 * index. NULL: the architecture has no such tensor. */
typedef struct {
    const char *embed, *norm_f, *lm_head;
    const char *norm1, *norm2; /* norm2: SEQUENTIAL only */
    const char *qkv;           /* fused [3E, E] in mp_num groups (CodeGen), or NULL ... */
    const char *q, *k, *v;     /* ... and three projections (LLaMA) */
    const char *o;
    const char *mlp_in;        /* fc_in / gate_proj */
    const char *mlp_up;        /* up_proj (SILU_GATED), else NULL */
    const char *mlp_out;       /* fc_out / down_proj */
} tp_arch_names;

typedef struct {
    tp_arch_id id;
    const char *model_type; /* config.json "model_type" */
    const char *hf_class;   /* config.json "architectures"[0] */
    tp_norm_kind norm;
    tp_mlp_kind mlp;
    tp_rope_style rope;
    tp_residual_kind residual;
    int norm_bias;          /* LayerNorm has a bias; RMSNorm has none */
    tp_arch_names names;
    /* Reads this architecture's config.json keys into c (HF's defaults where absent). Returns 0,
     * or -1 with a message naming the file and the key in err. */
    int (*read)(const json_value *root, const char *path, tp_config *c, char *err, size_t err_size);
} tp_arch;

/* The architecture of a parsed config.json: by "architectures" (HF class names), else by
 * "model_type"; a config with neither is CodeGen (older tpgen configs). NULL + message naming
 * the value and the architectures tpgen runs. */
const tp_arch *tp_arch_of_config(const json_value *root, const char *path, char *err, size_t err_size);
const tp_arch *tp_arch_get(tp_arch_id id);

/* 0 when backend b has every op the architecture needs (LLaMA: rmsnorm, silu_mul), else -1 with
 * a message naming the backend and the op. */
int tp_arch_backend_ok(const tp_arch *a, const tp_backend *b, char *err, size_t err_size);

/* Layer tensor name: names->X formatted with layer l, then suffix (".weight", ".bias"). */
void tp_arch_tensor(char *buf, size_t size, const char *fmt, int l, const char *suffix);

/* GEMM weight elements of one layer on a rank with Hl query heads, Hkl KV heads and Il MLP rows
 * (qkv, o, the MLP matrices; for memory and FLOP counts: launcher/cmd_info.c, cmd_bench.c), and
 * their rows. */
long long tp_arch_layer_matrix_elems(const tp_config *c, int Hl, int Hkl, int Il, long long *rows);
/* Parameters of every weight the loader reads (the whole model, TP 1). */
long long tp_arch_param_count(const tp_config *c);

#endif
