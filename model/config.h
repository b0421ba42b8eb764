/* CodeGen model hyper-parameters, read from an HF config.json. */
#ifndef TPGEN_CONFIG_H
#define TPGEN_CONFIG_H

#include <stddef.h>

typedef struct {
    int vocab_size;   /* V (51200 for real CodeGen; the tokenizer has 50295) */
    int n_positions;  /* longest sequence, prompt + generated */
    int n_embd;       /* E */
    int n_layer;      /* L */
    int n_head;       /* H, a multiple of qkv_groups */
    int head_dim;     /* D = E / H */
    int rotary_dim;   /* R <= D, even */
    int n_inner;      /* inner MLP width (n_inner, or 4E when null) */
    float layer_norm_epsilon;
    int eos_token_id; /* -1 when absent */
    int bos_token_id;
    int tie_word_embeddings;
    int qkv_groups;   /* G: qkv_proj's groups (mp_num), 0 until set from tp_checkpoint_qkv_groups (checkpoint/remote_code.h) */
} tp_config;

/* Limits a config must respect (far above any CodeGen); see tp_config_load. */
#define TP_MAX_EMBD 65536L
#define TP_MAX_LAYERS 4096L
#define TP_MAX_HEADS 4096L
#define TP_MAX_VOCAB (1L << 24)
#define TP_MAX_INNER (1L << 20)

/* Reads DIR/config.json (or a config file path). Returns 0, or -1 with a message naming the
 * file and field in err. */
int tp_config_load(const char *path, tp_config *c, char *err, size_t err_size);

/* Valid tensor-parallel sizes: those dividing n_head. Writes "1, 2, 4, ..." into buf. */
void tp_config_valid_tp(const tp_config *c, char *buf, size_t size);

#endif
