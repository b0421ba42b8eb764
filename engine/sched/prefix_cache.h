/* The KV block manager of rank 0 with automatic prefix caching (docs/ARCHITECTURE.md, "Prefix
 * cache and KV on demand"). Every block of the KV cache is in exactly one of three places:
 *   held:   reference count > 0, in the block tables of that many running sequences;
 *   cached: count 0 and registered (a full block of known tokens): kept for a later hit, in an
 *           LRU list, evicted (unregistered) only when a block is needed and none is free;
 *   free:   count 0 and not registered, on the free stack.
 * At idle (no sequence running) free + cached == total.
 *
 * A registered block is identified by a 64-bit chained hash of (its parent block's hash, its
 * block_size token ids), the parent being the block before it in the sequence; a sequence's
 * first block chains from its salt instead (the request's cache_salt: blocks are shared only
 * between sequences of equal salt, so that one client cannot learn from hits what another
 * sent). The table (open addressing, linear probing) maps hash -> block; a lookup confirms a
 * candidate by its token ids and its parent block (id and that block's registration epoch,
 * bumped at each eviction), or for a first block by its salt, so a hash collision never makes
 * a hit: equal ids, an equal salt and an equal chain of parents mean the same tokens at the same
 * positions, hence the same K and V.
 *
 * Not thread-safe: the scheduler's thread owns it.
 */
#ifndef TPGEN_PREFIX_CACHE_H
#define TPGEN_PREFIX_CACHE_H

#include <stdint.h>

typedef struct {
    int n_blocks, block_size;
    int32_t *free_ids;   /* [n_blocks] stack of free (unregistered, count 0) blocks */
    int n_free;
    int32_t *ref;        /* [n_blocks] reference counts */
    /* registration, valid where registered[b] */
    uint8_t *registered; /* [n_blocks] */
    uint64_t *hash;      /* [n_blocks] chained hash */
    int32_t *parent;     /* [n_blocks] parent block, -1: the sequence's first block */
    uint64_t *salt;      /* [n_blocks] a first block's salt (0 for the others) */
    uint32_t *parent_epoch; /* [n_blocks] the parent's epoch when this one was registered */
    uint32_t *epoch;     /* [n_blocks] bumped when the block is unregistered (evicted) */
    int32_t *tokens;     /* [n_blocks, block_size] its token ids */
    /* LRU of cached blocks (registered, count 0): head is the least recently used */
    int32_t *lru_prev, *lru_next; /* [n_blocks], -1 at the ends */
    int lru_head, lru_tail, n_cached;
    int32_t *table;      /* [table_size] hash table of registered blocks, -1: empty */
    int table_size;      /* a power of two >= 2 n_blocks */
    uint64_t hash_mask;  /* every hash is and-ed with it: ~0; a test narrows it to force collisions */
} tp_prefix_cache;

void tp_prefix_cache_init(tp_prefix_cache *c, int n_blocks, int block_size);
void tp_prefix_cache_free(tp_prefix_cache *c);

/* A block for a sequence (count 1): a free one, else the least recently used cached one
 * (unregistered first). -1 when every block is held. */
int tp_prefix_cache_take(tp_prefix_cache *c);
/* Blocks tp_prefix_cache_take can still give: free + cached. */
int tp_prefix_cache_available(const tp_prefix_cache *c);
/* One holder less: at count 0 a registered block becomes the most recently used cached one, an
 * unregistered one goes back to the free stack. */
void tp_prefix_cache_release(tp_prefix_cache *c, int32_t b);
/* One holder more of a registered block found by lookup (out of the LRU if it was cached). */
void tp_prefix_cache_acquire(tp_prefix_cache *c, int32_t b);

/* The longest chain of registered blocks holding ids[0 .. n_full * block_size) under salt, block
 * by block from the first: up to n_full blocks into out (not acquired). Returns how many.
 * Changes nothing. */
int tp_prefix_cache_lookup(const tp_prefix_cache *c, uint64_t salt, const int32_t *ids, int n_full, int32_t *out);
/* Of blocks[0 .. n), those that are cached (count 0): what acquiring them takes from
 * tp_prefix_cache_available. */
int tp_prefix_cache_count_cached(const tp_prefix_cache *c, const int32_t *blocks, int n);
/* Registers held block b, now full of ids[0 .. block_size), after parent (-1: a first block,
 * under salt; else a registered block, whose salt it inherits: salt is not read). Returns 1, or 0
 * when it stays unregistered: the same tokens after the same parent (or salt) are registered
 * already (another sequence wrote them), or parent is not registered. */
int tp_prefix_cache_register(tp_prefix_cache *c, int32_t b, int32_t parent, uint64_t salt, const int32_t *ids);

#endif
