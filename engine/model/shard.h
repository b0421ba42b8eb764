/* Which part of every weight this rank owns (tensor parallelism over TP ranks).
 *
 * Heads: rank r owns query heads [r*H/TP, (r+1)*H/TP) -- their q rows (column-parallel qkv_proj,
 * or q_proj) and the matching out_proj / o_proj columns (row-parallel). KV heads (grouped-query
 * attention, Hk < H; query head h reads KV head h / (H/Hk)): a rank keeps the whole KV heads its
 * query heads read, [kv0, kv0 + Hkl), their k_proj / v_proj rows and KV cache. When TP divides Hk
 * each rank has Hk/TP of them; when TP is a multiple of Hk (TP > Hk) each KV head is replicated
 * on TP/Hk ranks, each keeping one (as vLLM does): its weights and cache are copied, never split.
 * Other TP sizes are refused (tp_config_tp_ok). CodeGen: Hk = H, so Hkl = Hl, kv0 = head0.
 * MLP: rank r owns fc_in (gate_proj and up_proj) rows / fc_out (down_proj) columns
 * [r*I/TP, (r+1)*I/TP) (integer bounds, so any I works). Vocab: lm_head is split into TP equal
 * slices of Vpad = ceil(V/TP)*TP rows; the padding rows are zero and ignored by the sampler.
 * Norms and the embedding table are replicated.
 */
#ifndef TPGEN_SHARD_H
#define TPGEN_SHARD_H

#include <stddef.h>

#include "config.h"

typedef struct {
    int tp, rank;
    int head0, n_heads;     /* this rank's query heads [head0, head0 + n_heads) = Hl */
    int kv_head0, n_kv_heads; /* this rank's KV heads [kv_head0, kv_head0 + n_kv_heads) = Hkl, Hl % Hkl == 0 */
    int inner0, n_inner; /* fc_in rows [inner0, inner0 + n_inner) = Il */
    int vocab0, n_vocab; /* lm_head rows [vocab0, vocab0 + n_vocab) = Vloc (with padding) */
    int n_vocab_valid;   /* rows < V among them */
} tp_shard;

/* Returns 0, or -1 with "TP=3 does not divide n_head=16; valid TP sizes: 1, 2, 4, 8, 16". */
int tp_shard_plan(const tp_config *c, int tp, int rank, tp_shard *s, char *err, size_t err_size);

#endif
