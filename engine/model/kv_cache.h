/* The paged KV cache of one rank: K and V of this rank's KV heads (grouped-query attention: fewer
 * than its query heads; engine/model/shard.h) for every layer, in fixed-size
 * blocks carved from one device allocation made once at start. A sequence owns a list of blocks
 * (its block table); token p of a sequence lives in block table[p / block_size] at offset
 * p % block_size. Rank 0 decides which blocks a sequence gets (prefix_cache.h runs there)
 * and sends the block tables with each step, so every rank indexes its cache the same way.
 */
#ifndef TPGEN_KV_CACHE_H
#define TPGEN_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

typedef struct {
    int n_layer, n_blocks, block_size, n_heads, head_dim; /* n_heads: this rank's KV heads (Hkl) */
    size_t bytes_per_token;                               /* K+V, all layers, this rank */
    void *arena;                                          /* device: [L][2][n_blocks, Hkl, bs, D] (tp_kv.h) */
    void **k, **v;                                        /* [L] device pointers into the arena */
} tp_kv_cache;

void tp_kv_cache_init(tp_kv_cache *kv, tp_backend *b, int n_layer, int n_heads, int head_dim, int block_size,
                      int n_blocks);
void tp_kv_cache_free(tp_kv_cache *kv, tp_backend *b);
size_t tp_kv_bytes_per_token(tp_backend *b, int n_layer, int n_heads, int head_dim);

#endif
