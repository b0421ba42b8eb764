/* Which part of every weight this rank owns (tensor parallelism over TP ranks).
 *
 * Heads: rank r owns heads [r*H/TP, (r+1)*H/TP) — its q, k, v rows (column-parallel qkv_proj) and
 * the matching out_proj columns (row-parallel). MLP: rank r owns fc_in rows / fc_out columns
 * [r*I/TP, (r+1)*I/TP) (integer bounds, so any I works). Vocab: lm_head is split into TP equal
 * slices of Vpad = ceil(V/TP)*TP rows; the padding rows are zero and ignored by the sampler.
 * Layer norms and the embedding table are replicated.
 */
#ifndef TPGEN_SHARD_H
#define TPGEN_SHARD_H

#include <stddef.h>

#include "config.h"

typedef struct {
    int tp, rank;
    int head0, n_heads; /* this rank's heads [head0, head0 + n_heads) = Hl */
    int inner0, n_inner; /* fc_in rows [inner0, inner0 + n_inner) = Il */
    int vocab0, n_vocab; /* lm_head rows [vocab0, vocab0 + n_vocab) = Vloc (with padding) */
    int n_vocab_valid;   /* rows < V among them */
} tp_shard;

/* Returns 0, or -1 with "TP=3 does not divide n_head=16; valid TP sizes: 1, 2, 4, 8, 16". */
int tp_shard_plan(const tp_config *c, int tp, int rank, tp_shard *s, char *err, size_t err_size);

#endif
