/* The model on one rank: its shard of the weights, its KV cache, its activation buffers, and the
 * forward pass, for every architecture of engine/model/arch.h. Every rank runs tp_model_forward on the
 * same step; the all-reduces (one per layer for CodeGen, two for LLaMA) go through the
 * communicator. Nothing here knows the backend. */
#ifndef TPGEN_MODEL_H
#define TPGEN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "config.h"
#include "kernels/backend.h"
#include "kv_cache.h"
#include "shard.h"

/* One layer's weights on this rank (device memory, act dtype); NULL where the architecture or
 * the config has no such tensor (engine/model/arch.h). Hl = this rank's query heads, Hkl = its KV heads,
 * Il = its MLP rows, D = head_dim. Matrices are in the backend's matrix_upload layout. */
typedef struct {
    void *norm1_g, *norm1_b; /* [E] each, replicated: ln_1 / input_layernorm (RMSNorm: no bias) */
    void *norm2_g, *norm2_b; /* [E]: post_attention_layernorm (sequential residual only) */
    void *qkv;           /* matrix [(Hl + 2 Hkl) D, E]: this rank's q heads, then its KV heads' k, then v */
    void *qkv_b;         /* [(Hl + 2 Hkl) D] (attention_bias) */
    void *out;           /* matrix [E, Hl * D]: out_proj / o_proj columns of this rank's heads */
    void *out_b;         /* [E], replicated; added on rank 0 only, so the all-reduce counts it once */
    void *mlp_in;        /* matrix [Il, E] fc_in rows, or [2 Il, E]: gate_proj rows then up_proj rows */
    void *mlp_in_b;      /* [Il] or [2 Il] */
    void *mlp_out;       /* matrix [E, Il]: fc_out / down_proj columns of this rank */
    void *mlp_out_b;     /* [E], replicated; added on rank 0 only */
} tp_layer;

typedef struct {
    void *wte;           /* [V, E], replicated */
    tp_layer *layers;    /* [L] */
    void *normf_g, *normf_b; /* [E] (RMSNorm: no bias) */
    void *lm_head;       /* matrix [Vloc, E]: vocab rows [vocab0, vocab0 + Vloc), zero past V */
    void *lm_head_b;     /* [Vloc] or NULL */
    void *arena;         /* the one device allocation all of the above live in */
    size_t arena_bytes;
    size_t matrix_bytes;      /* bytes the GEMM matrices occupy in the arena (padding, oneDNN copies) */
    size_t matrix_read_bytes; /* bytes of them every decode step reads (tp_matrix_read_bytes) */
} tp_weights;

/* Activation buffers, sized once for at most max_tokens tokens and max_rows logit rows. */
typedef struct {
    int max_tokens, max_rows, max_seqs, max_blocks;
    void *arena;
    void *h;        /* [T, E] residual stream */
    void *ln;       /* [T, E] norm output feeding the attention and MLP branches */
    void *qkv;      /* [T, (Hl + 2 Hkl) D] */
    void *att;      /* [T, Hl * D] attention output of this rank's heads */
    void *mlp;      /* [T, Il] the MLP's inner activations */
    void *gu;       /* [T, 2 Il] gate_proj then up_proj outputs (SiLU-gated MLP only, else NULL) */
    void *part;     /* [T, E] this rank's partial sum of a branch (or both), all-reduced */
    void *rows;     /* [max_rows, E] final-norm rows whose logits are wanted */
    float *logits;  /* [max_rows, Vloc] f32 */
    int32_t *ids, *pos, *seq; /* [T] device */
    int32_t *block_table;     /* [max_seqs, max_blocks] device */
} tp_acts;

typedef struct {
    tp_config cfg;
    tp_shard sh;
    tp_backend *b;
    tp_comm *comm;
    tp_weights w;
    tp_kv_cache kv;
    tp_acts a;
    long long forwarded_tokens; /* tokens run through the layers since load (stats) */
    int use_graphs;             /* replay pure-decode steps as CUDA graphs when the backend can */
    int no_prefix_cache;        /* rank 0's scheduler: 1 turns automatic prefix caching off (--no-prefix-cache);
                                 * read at each admission, so it may change between requests */
} tp_model;

/* Loads this rank's shard from an HF model dir (random != 0: draw random weights instead,
 * seeded, for benchmarks; the dir is not read). Dies on every rank with a clear message on any
 * problem with the files. */
void tp_model_load_weights(tp_model *m, const char *dir, int random, uint64_t seed);
void tp_model_alloc(tp_model *m, int max_tokens, int max_rows, int max_seqs, int kv_blocks, int block_size);
/* What tp_model_load_weights and tp_model_alloc will ask b->alloc for (engine/model/model_plan.c). */
size_t tp_model_weights_bytes(const tp_model *m);
size_t tp_model_acts_bytes(const tp_model *m, int max_tokens, int max_rows, int max_seqs, long kv_blocks,
                           int block_size);
void tp_model_free(tp_model *m);
/* Every layer's attention geometry on this rank (the op interface's tp_attn_shape). */
tp_attn_shape tp_model_attn_shape(const tp_model *m);

/* Decode steps of up to this many tokens get a CUDA graph each (keyed by token count). */
#define TP_MAX_GRAPH_TOKENS 32

/* A forward step as rank 0 describes it (host arrays). */
typedef struct {
    int n_tokens;             /* T <= max_tokens */
    const int32_t *ids;       /* [T] */
    const int32_t *pos;       /* [T] */
    const int32_t *seq;       /* [T] row of block_table */
    int n_seqs, max_blocks;   /* block_table is [n_seqs, max_blocks] */
    const int32_t *block_table;
    int n_rows;               /* logits wanted for these token indices */
    const int32_t *rows;      /* [n_rows] */
} tp_step_host;

/* Runs the layers on the step and leaves f32 logits of the wanted rows in m->a.logits
 * ([n_rows, Vloc], this rank's vocab slice). */
void tp_model_forward(tp_model *m, const tp_step_host *s);

#endif
