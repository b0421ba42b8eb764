#include "kv_cache.h"

#include <stdlib.h>

#include "util/log.h"

size_t tp_kv_bytes_per_token(tp_backend *b, int n_layer, int n_heads, int head_dim) {
    return (size_t)2 * n_layer * n_heads * head_dim * tp_dtype_size(b->kv);
}

void tp_kv_cache_init(tp_kv_cache *kv, tp_backend *b, int n_layer, int n_heads, int head_dim, int block_size,
                      int n_blocks) {
    kv->n_layer = n_layer;
    kv->n_blocks = n_blocks;
    kv->block_size = block_size;
    kv->n_heads = n_heads;
    kv->head_dim = head_dim;
    kv->bytes_per_token = tp_kv_bytes_per_token(b, n_layer, n_heads, head_dim);
    size_t per_layer = (size_t)n_blocks * block_size * n_heads * head_dim * tp_dtype_size(b->kv);
    kv->arena = b->alloc(b, per_layer * 2 * n_layer, "KV cache");
    kv->k = tp_malloc(n_layer * sizeof *kv->k);
    kv->v = tp_malloc(n_layer * sizeof *kv->v);
    for (int l = 0; l < n_layer; l++) {
        kv->k[l] = (char *)kv->arena + (2 * (size_t)l) * per_layer;
        kv->v[l] = (char *)kv->arena + (2 * (size_t)l + 1) * per_layer;
    }
}

void tp_kv_cache_free(tp_kv_cache *kv, tp_backend *b) {
    if (kv->arena) b->free(b, kv->arena);
    free(kv->k);
    free(kv->v);
    kv->arena = NULL;
}
