/* Encoding: added-token split, pre-tokenizer, and byte-level BPE with a word cache.
 *
 * BPE works on raw bytes and token ids (never on strings): a word starts as the ids of its
 * bytes; the adjacent pair with the lowest merge rank is merged, leftmost first on equal ranks,
 * until no pair has a merge. That is HF's order (a heap on (rank, position)). Short words use a
 * quadratic scan over a rank array (fast for the usual < 20 bytes), long ones a heap. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "tokenizer_internal.h"

static inline void ids_reserve(tpk_ids *o, size_t more) {
    if (o->n + more <= o->cap) return;
    size_t c = o->cap ? o->cap : 256;
    while (c < o->n + more) c *= 2;
    o->ids = tp_realloc(o->ids, c * sizeof *o->ids);
    o->cap = c;
}

static inline void ids_push(tpk_ids *o, int32_t id) {
    ids_reserve(o, 1);
    o->ids[o->n++] = id;
}

#define BPE_SMALL_LIMIT 256

/* words of at most BPE_SMALL_LIMIT bytes; out has room for n ids */
static size_t bpe_small(const tp_tokenizer *t, const uint8_t *w, size_t n, int32_t *out) {
    int32_t ids[BPE_SMALL_LIMIT], mids[BPE_SMALL_LIMIT]; /* [m] symbols; [m-1] merged id of each pair */
    uint32_t ranks[BPE_SMALL_LIMIT];                     /* [m-1] merge rank of each pair */
    int m = 0;
    if (t->all_bytes) {
        for (size_t i = 0; i < n; i++) ids[i] = t->byte_id[w[i]];
        m = (int)n;
        for (int i = 0; i + 1 < m; i++) {
            uint64_t v = t->byte_pairs[w[i] << 8 | w[i + 1]];
            ranks[i] = (uint32_t)(v >> 32);
            mids[i] = (int32_t)(uint32_t)v;
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            int32_t id = t->byte_id[w[i]];
            if (id >= 0) ids[m++] = id;
        }
        for (int i = 0; i + 1 < m; i++) ranks[i] = tpk_merge_rank(t, ids[i], ids[i + 1], &mids[i]);
    }
    while (m > 1) {
        int k = 0;
        uint32_t best = ranks[0];
        for (int i = 1; i + 1 < m; i++)
            if (ranks[i] < best) best = ranks[i], k = i;
        if (best == UINT32_MAX) break;
        ids[k] = mids[k];
        /* drop symbol k+1 and pair k+1; pairs k-1 and k are new */
        if (m - k - 2 > 0) memmove(ids + k + 1, ids + k + 2, (size_t)(m - k - 2) * sizeof *ids);
        if (m - k - 3 > 0) {
            memmove(ranks + k + 1, ranks + k + 2, (size_t)(m - k - 3) * sizeof *ranks);
            memmove(mids + k + 1, mids + k + 2, (size_t)(m - k - 3) * sizeof *mids);
        }
        m--;
        if (k + 1 < m) ranks[k] = tpk_merge_rank(t, ids[k], ids[k + 1], &mids[k]);
        if (k > 0) ranks[k - 1] = tpk_merge_rank(t, ids[k - 1], ids[k], &mids[k - 1]);
    }
    memcpy(out, ids, (size_t)m * sizeof *ids);
    return (size_t)m;
}

/* binary min-heap of rank << 32 | position */
static void heap_push(uint64_t *h, size_t *n, uint64_t v) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p] <= v) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *n) {
    uint64_t top = h[0], v = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1] < h[c]) c++;
        if (h[c] >= v) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = v;
    return top;
}

static size_t bpe_heap(tp_tokenizer *t, const uint8_t *w, size_t n, int32_t *out) {
    size_t need = n * (3 * sizeof(int32_t) + 3 * sizeof(uint64_t)) + 64;
    if (t->scratch_size < need) {
        free(t->scratch);
        t->scratch = tp_malloc(need);
        t->scratch_size = need;
    }
    uint64_t *heap = t->scratch;                  /* [3n] pending merges */
    int32_t *ids = (int32_t *)(heap + 3 * n);     /* [n] symbol id, -1 once merged into its left */
    int32_t *prev = ids + n, *next = prev + n;    /* [n] linked list of live symbols */
    size_t m = 0, hn = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[w[i]];
        if (id >= 0) ids[m++] = id;
    }
    if (m == 0) return 0;
    int32_t x;
    for (size_t i = 0; i < m; i++) {
        prev[i] = (int32_t)i - 1;
        next[i] = i + 1 < m ? (int32_t)i + 1 : -1;
        uint32_t r = i + 1 < m ? tpk_merge_rank(t, ids[i], ids[i + 1], &x) : UINT32_MAX;
        if (r != UINT32_MAX) heap_push(heap, &hn, (uint64_t)r << 32 | i);
    }
    while (hn) {
        uint64_t top = heap_pop(heap, &hn);
        uint32_t rank = (uint32_t)(top >> 32), pos = (uint32_t)top;
        int32_t q = next[pos], merged = -1;
        /* a stale entry: the symbol or its right neighbour changed since it was pushed */
        if (ids[pos] < 0 || q < 0 || tpk_merge_rank(t, ids[pos], ids[q], &merged) != rank) continue;
        ids[pos] = merged;
        ids[q] = -1;
        next[pos] = next[q];
        if (next[q] >= 0) prev[next[q]] = (int32_t)pos;
        uint32_t r;
        if (prev[pos] >= 0 && (r = tpk_merge_rank(t, ids[prev[pos]], ids[pos], &x)) != UINT32_MAX)
            heap_push(heap, &hn, (uint64_t)r << 32 | (uint32_t)prev[pos]);
        if (next[pos] >= 0 && (r = tpk_merge_rank(t, ids[pos], ids[next[pos]], &x)) != UINT32_MAX)
            heap_push(heap, &hn, (uint64_t)r << 32 | pos);
    }
    size_t k = 0;
    for (int32_t i = 0; i >= 0; i = next[i]) out[k++] = ids[i];
    return k;
}

/* memcmp(a, b, n) == 0 for the short keys of the cache, without a library call */
static inline int bytes_equal(const uint8_t *a, const uint8_t *b, size_t n) {
    uint64_t x, y;
    while (n >= 8) {
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        if (x != y) return 0;
        a += 8, b += 8, n -= 8;
    }
    while (n--)
        if (*a++ != *b++) return 0;
    return 1;
}

void tpk_cache_clear(tp_tokenizer *t) {
    memset(t->cache, 0, TPK_CACHE_SLOTS * sizeof *t->cache);
    t->cache_used = t->cache_key_used = t->cache_ids_used = 0;
}

void tpk_bpe_word(tp_tokenizer *t, const uint8_t *w, size_t n, tpk_ids *out) {
    if (n == 1) {
        if (t->byte_id[w[0]] >= 0) ids_push(out, t->byte_id[w[0]]);
        return;
    }
    if (t->ignore_merges) {
        int32_t id = tpk_vocab_lookup(t, w, n);
        if (id >= 0) {
            ids_push(out, id);
            return;
        }
    }
    uint64_t h = 0;
    uint32_t slot = UINT32_MAX;
    if (n <= TPK_CACHE_MAX_WORD) {
        h = tpk_hash_bytes(w, n);
        for (uint32_t i = tpk_slot(h) & (TPK_CACHE_SLOTS - 1);; i = (i + 1) & (TPK_CACHE_SLOTS - 1)) {
            const tpk_cache_slot *c = &t->cache[i];
            if (c->hash == 0) {
                slot = i;
                break;
            }
            if (c->hash == h && c->key_len == n && bytes_equal(t->cache_keys + c->key_off, w, n)) {
                ids_reserve(out, c->n_ids);
                memcpy(out->ids + out->n, t->cache_ids + c->ids_off, c->n_ids * sizeof *out->ids);
                out->n += c->n_ids;
                return;
            }
        }
    }
    ids_reserve(out, n); /* BPE gives at most one id per byte */
    int32_t *dst = out->ids + out->n;
    size_t m = n <= (size_t)t->bpe_small_max && n <= BPE_SMALL_LIMIT ? bpe_small(t, w, n, dst) : bpe_heap(t, w, n, dst);
    out->n += m;
    if (slot == UINT32_MAX) return;
    if (t->cache_used + 1 > TPK_CACHE_SLOTS / 2 || t->cache_key_used + n > TPK_CACHE_KEY_BYTES ||
        t->cache_ids_used + m > TPK_CACHE_IDS) {
        tpk_cache_clear(t); /* full: start over (cheap, and rare on real text) */
        slot = tpk_slot(h) & (TPK_CACHE_SLOTS - 1);
    }
    tpk_cache_slot *c = &t->cache[slot];
    c->hash = h;
    c->key_off = t->cache_key_used;
    c->key_len = (uint16_t)n;
    c->ids_off = t->cache_ids_used;
    c->n_ids = (uint16_t)m;
    memcpy(t->cache_keys + t->cache_key_used, w, n);
    memcpy(t->cache_ids + t->cache_ids_used, dst, m * sizeof *dst);
    t->cache_key_used += (uint32_t)n;
    t->cache_ids_used += (uint32_t)m;
    t->cache_used++;
}

/* pre-tokenize [s, e) and BPE each piece */
static void encode_plain(tp_tokenizer *t, const uint8_t *p, size_t s, size_t e, tpk_ids *out) {
    while (s < e) {
        size_t j = tpk_pretok_next(t, p, s, e);
        tpk_bpe_word(t, p + s, j - s, out);
        s = j;
    }
}

/* split [s, e) on the added tokens of tr; the gaps go to the trie next (NULL: pre-tokenizer + BPE) */
static void split_added(tp_tokenizer *t, const tpk_trie *tr, const tpk_trie *next, const uint8_t *p, size_t s,
                        size_t e, tpk_ids *out) {
    size_t start = s;
    if (tr->n > 0) {
        for (size_t i = s; i < e;) {
            int32_t id;
            size_t m;
            int32_t node = tr->root[p[i]];
            /* most candidates fail at once: a lone space before a word */
            if (node >= 0 && tr->id[node] < 0 && (i + 1 >= e || (tr->child[node] >= 0 && tr->sibling[tr->child[node]] < 0 &&
                                                                 tr->byte[tr->child[node]] != p[i + 1]))) {
                i++;
                continue;
            }
            if (node >= 0 && (m = tpk_trie_match(tr, p, i, e, &id)) > 0) {
                if (i > start) {
                    if (next) split_added(t, next, NULL, p, start, i, out);
                    else encode_plain(t, p, start, i, out);
                }
                ids_push(out, id);
                i += m;
                start = i;
            } else i++;
        }
    }
    if (start < e) {
        if (next) split_added(t, next, NULL, p, start, e, out);
        else encode_plain(t, p, start, e, out);
    }
}

static int encode(tp_tokenizer *t, int plain, const char *text, size_t len, int32_t **ids, size_t *n, char *err,
                  size_t err_size) {
    const uint8_t *p = (const uint8_t *)text;
    *ids = NULL;
    *n = 0;
    size_t bad = tpk_utf8_validate(p, len);
    if (bad < len) {
        if (err && err_size)
            snprintf(err, err_size, "invalid UTF-8 at byte offset %zu (byte 0x%02X); the text must be UTF-8", bad,
                     p[bad]);
        return -1;
    }
    tpk_ids out = {NULL, 0, 0};
    ids_reserve(&out, len / 3 + 16);
    if (plain) split_added(t, &t->plain_raw, &t->plain_norm, p, 0, len, &out);
    else split_added(t, &t->trie_raw, &t->trie_norm, p, 0, len, &out);
    *ids = out.ids;
    *n = out.n;
    return 0;
}

int tp_tokenizer_encode(tp_tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n, char *err,
                        size_t err_size) {
    return encode(t, 0, text, len, ids, n, err, err_size);
}

int tp_tokenizer_encode_text(tp_tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n, char *err,
                             size_t err_size) {
    return encode(t, 1, text, len, ids, n, err, err_size);
}
