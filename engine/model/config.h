/* Model hyper-parameters, read once from an HF config.json into one struct. Which keys are read,
 * and their defaults, is the architecture's (engine/model/arch.c); what every architecture shares is
 * checked here. */
#ifndef TPGEN_CONFIG_H
#define TPGEN_CONFIG_H

#include <stddef.h>

#include "arch.h"

struct tp_config {
    const tp_arch *arch; /* CodeGen or LLaMA: the block's structure, tensor names, rotary style */
    int vocab_size;   /* V (51200 for real CodeGen; the tokenizer has 50295) */
    int n_positions;  /* longest sequence, prompt + generated (LLaMA: max_position_embeddings) */
    int n_embd;       /* E (LLaMA: hidden_size) */
    int n_layer;      /* L */
    int n_head;       /* H query heads, a multiple of qkv_groups (CodeGen) and of n_kv_head */
    int n_kv_head;    /* Hk: K/V heads (grouped-query attention when < H; CodeGen: H) */
    int head_dim;     /* D = E / H (LLaMA: head_dim when given) */
    int rotary_dim;   /* R <= D, even (LLaMA: D) */
    int n_inner;      /* inner MLP width I (CodeGen: n_inner, or 4E when null; LLaMA: intermediate_size) */
    float norm_eps;   /* layer_norm_epsilon / rms_norm_eps */
    float rope_theta; /* rotary base (CodeGen: 10000) */
    int eos_token_id; /* -1 when absent */
    int bos_token_id;
    int tie_word_embeddings;
    /* Linear biases the checkpoint holds (the architecture's and the config's: attention_bias,
     * mlp_bias): qkv, o, MLP input (fc_in / gate and up), MLP output (fc_out / down), lm_head. */
    int qkv_bias, o_bias, mlp_in_bias, mlp_out_bias, lm_head_bias;
    int qkv_groups;   /* G: CodeGen's qkv_proj groups (mp_num), 0 until set from tp_checkpoint_qkv_groups
                       * (engine/checkpoint/remote_code.h); 0 for architectures without a fused qkv_proj */
};

/* Limits a config must respect (far above any CodeGen or LLaMA). */
#define TP_MAX_EMBD 65536L
#define TP_MAX_LAYERS 4096L
#define TP_MAX_HEADS 4096L
#define TP_MAX_VOCAB (1L << 24)
#define TP_MAX_INNER (1L << 20)

/* Reads DIR/config.json (or a config file path). Returns 0, or -1 with a message naming the
 * file and field in err. */
int tp_config_load(const char *path, tp_config *c, char *err, size_t err_size);

/* 1 when TP ranks can split this model's heads: TP divides H, and TP divides Hk (each rank keeps
 * whole KV heads) or Hk divides TP (each KV head replicated on TP / Hk ranks). */
int tp_config_tp_ok(const tp_config *c, int tp);
/* Valid tensor-parallel sizes (tp_config_tp_ok). Writes "1, 2, 4, ..." into buf. */
void tp_config_valid_tp(const tp_config *c, char *buf, size_t size);

#endif
