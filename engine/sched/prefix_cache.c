#include "prefix_cache.h"

#include <stdlib.h>
#include <string.h>

#include "util/log.h"

#define ROOT_HASH 0x9e3779b97f4a7c15ull /* with the salt mixed in: the parent hash of a sequence's first block */

void tp_prefix_cache_init(tp_prefix_cache *c, int n_blocks, int block_size) {
    memset(c, 0, sizeof *c);
    c->n_blocks = n_blocks;
    c->block_size = block_size;
    size_t n = n_blocks > 0 ? (size_t)n_blocks : 1;
    c->free_ids = tp_malloc(n * sizeof *c->free_ids);
    for (int i = 0; i < n_blocks; i++) c->free_ids[i] = n_blocks - 1 - i; /* handed out from id 0 upwards */
    c->n_free = n_blocks;
    c->ref = tp_calloc(n, sizeof *c->ref);
    c->registered = tp_calloc(n, 1);
    c->hash = tp_calloc(n, sizeof *c->hash);
    c->parent = tp_calloc(n, sizeof *c->parent);
    c->salt = tp_calloc(n, sizeof *c->salt);
    c->parent_epoch = tp_calloc(n, sizeof *c->parent_epoch);
    c->epoch = tp_calloc(n, sizeof *c->epoch);
    c->tokens = tp_malloc(n * block_size * sizeof *c->tokens);
    c->lru_prev = tp_malloc(n * sizeof *c->lru_prev);
    c->lru_next = tp_malloc(n * sizeof *c->lru_next);
    c->lru_head = c->lru_tail = -1;
    c->table_size = 2;
    while (c->table_size < 2 * n_blocks) c->table_size *= 2;
    c->table = tp_malloc((size_t)c->table_size * sizeof *c->table);
    for (int i = 0; i < c->table_size; i++) c->table[i] = -1;
    c->hash_mask = ~0ull;
}

void tp_prefix_cache_free(tp_prefix_cache *c) {
    free(c->free_ids); free(c->ref); free(c->registered); free(c->hash); free(c->parent); free(c->salt); free(c->parent_epoch);
    free(c->epoch); free(c->tokens); free(c->lru_prev); free(c->lru_next); free(c->table);
    memset(c, 0, sizeof *c);
}

/* splitmix64's finalizer: a 64-bit mix in which every input bit moves every output bit */
static uint64_t mix(uint64_t x) {
    x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27; x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t chain_hash(const tp_prefix_cache *c, uint64_t parent_hash, const int32_t *ids) {
    uint64_t h = parent_hash;
    for (int i = 0; i < c->block_size; i++) h = mix(h ^ (uint32_t)ids[i]) + (uint64_t)i;
    return h & c->hash_mask;
}

static uint64_t root_hash(uint64_t salt) { return salt ? mix(ROOT_HASH ^ salt) : ROOT_HASH; }

static int home(const tp_prefix_cache *c, uint64_t h) { return (int)(mix(h) & (uint64_t)(c->table_size - 1)); }

static void lru_unlink(tp_prefix_cache *c, int32_t b) {
    int32_t p = c->lru_prev[b], n = c->lru_next[b];
    if (p >= 0) c->lru_next[p] = n; else c->lru_head = n;
    if (n >= 0) c->lru_prev[n] = p; else c->lru_tail = p;
    c->n_cached--;
}

static void lru_push_tail(tp_prefix_cache *c, int32_t b) {
    c->lru_prev[b] = c->lru_tail;
    c->lru_next[b] = -1;
    if (c->lru_tail >= 0) c->lru_next[c->lru_tail] = b; else c->lru_head = b;
    c->lru_tail = b;
    c->n_cached++;
}

/* removes b from the table (backward-shift deletion keeps every probe chain unbroken) */
static void table_remove(tp_prefix_cache *c, int32_t b) {
    int mask = c->table_size - 1, i = home(c, c->hash[b]);
    while (c->table[i] != b) {
        if (c->table[i] < 0) tp_die("internal: prefix cache block %d registered but not in the table", b);
        i = (i + 1) & mask;
    }
    for (int j = (i + 1) & mask; c->table[j] >= 0; j = (j + 1) & mask) {
        int k = home(c, c->hash[c->table[j]]);
        /* entry j may move into the hole i unless its home lies cyclically in (i, j] */
        int stays = i <= j ? (k > i && k <= j) : (k > i || k <= j);
        if (stays) continue;
        c->table[i] = c->table[j];
        i = j;
    }
    c->table[i] = -1;
}

int tp_prefix_cache_take(tp_prefix_cache *c) {
    int32_t b;
    if (c->n_free) b = c->free_ids[--c->n_free];
    else if (c->lru_head >= 0) { /* evict the least recently used cached block */
        b = c->lru_head;
        lru_unlink(c, b);
        table_remove(c, b);
        c->registered[b] = 0;
        c->epoch[b]++; /* its registered children no longer match a lookup through it */
    } else return -1;
    c->ref[b] = 1;
    return b;
}

int tp_prefix_cache_available(const tp_prefix_cache *c) { return c->n_free + c->n_cached; }

void tp_prefix_cache_release(tp_prefix_cache *c, int32_t b) {
    if (b < 0 || b >= c->n_blocks || c->ref[b] <= 0) tp_die("internal: KV block %d released but not held", b);
    if (--c->ref[b]) return;
    if (c->registered[b]) lru_push_tail(c, b);
    else c->free_ids[c->n_free++] = b;
}

void tp_prefix_cache_acquire(tp_prefix_cache *c, int32_t b) {
    if (!c->registered[b]) tp_die("internal: KV block %d shared but not registered", b);
    if (c->ref[b]++ == 0) lru_unlink(c, b);
}

/* the registered block holding ids after parent (a first block: under salt) (hash h), or -1 */
static int32_t find(const tp_prefix_cache *c, uint64_t h, int32_t parent, uint64_t salt, const int32_t *ids) {
    int mask = c->table_size - 1;
    for (int i = home(c, h); c->table[i] >= 0; i = (i + 1) & mask) {
        int32_t b = c->table[i];
        if (c->hash[b] != h || c->parent[b] != parent) continue;
        if (parent >= 0 && c->parent_epoch[b] != c->epoch[parent]) continue;
        if (parent < 0 && c->salt[b] != salt) continue;
        if (memcmp(c->tokens + (size_t)b * c->block_size, ids, c->block_size * sizeof *ids) == 0) return b;
    }
    return -1;
}

int tp_prefix_cache_lookup(const tp_prefix_cache *c, uint64_t salt, const int32_t *ids, int n_full, int32_t *out) {
    int32_t parent = -1;
    uint64_t ph = root_hash(salt);
    int n = 0;
    for (; n < n_full; n++) {
        const int32_t *blk = ids + (size_t)n * c->block_size;
        uint64_t h = chain_hash(c, ph, blk);
        int32_t b = find(c, h, parent, salt, blk);
        if (b < 0) break;
        out[n] = parent = b;
        ph = h;
    }
    return n;
}

int tp_prefix_cache_count_cached(const tp_prefix_cache *c, const int32_t *blocks, int n) {
    int k = 0;
    for (int i = 0; i < n; i++) k += c->ref[blocks[i]] == 0;
    return k;
}

int tp_prefix_cache_register(tp_prefix_cache *c, int32_t b, int32_t parent, uint64_t salt, const int32_t *ids) {
    if (c->registered[b]) return 1;
    if (parent >= 0 && !c->registered[parent]) return 0; /* no lookup could reach it */
    if (parent >= 0) salt = 0; /* the chain carries it */
    uint64_t h = chain_hash(c, parent >= 0 ? c->hash[parent] : root_hash(salt), ids);
    if (find(c, h, parent, salt, ids) >= 0) return 0; /* the same tokens are cached in another block */
    c->registered[b] = 1;
    c->hash[b] = h;
    c->parent[b] = parent;
    c->salt[b] = salt;
    c->parent_epoch[b] = parent >= 0 ? c->epoch[parent] : 0;
    memcpy(c->tokens + (size_t)b * c->block_size, ids, c->block_size * sizeof *ids);
    int mask = c->table_size - 1, i = home(c, h);
    while (c->table[i] >= 0) i = (i + 1) & mask;
    c->table[i] = b;
    return 1;
}
