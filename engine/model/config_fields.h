/* struct tp_config, a model's hyper-parameters, and the limits a config must respect: apart from
 * config.h (config.c's reader and checks) because the architectures' readers in arch.c fill it and
 * config.c calls them; arch.c including config.h would make the two files use each other
 * (tests/layering/check_cycles.sh). */
#ifndef TPGEN_CONFIG_FIELDS_H
#define TPGEN_CONFIG_FIELDS_H

#include "arch.h"
#include "quant_config.h" /* tp_quant */

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
    tp_quant quant;   /* config.json's quantization_config (AWQ, GPTQ; method NONE for float weights) */
    int q4_group;     /* the layers' Linears in 4 bits, k per group: > 0; -1 the whole row (each rank's
                       * slice of it, row-parallel); 0 not 4-bit. From quant, or --weights int4 --group-size */
    int q4_from_flag; /* q4_group is --weights int4's (messages name the flag, not config.json) */
    int q4_lm_head;   /* lm_head in 4 bits too, groups of q4_group (--lm-head int4); else int8 with row scales */
};

/* Limits a config must respect (far above any CodeGen or LLaMA). */
#define TP_MAX_EMBD 65536L
#define TP_MAX_LAYERS 4096L
#define TP_MAX_HEADS 4096L
#define TP_MAX_VOCAB (1L << 24)
#define TP_MAX_INNER (1L << 20)

#endif
