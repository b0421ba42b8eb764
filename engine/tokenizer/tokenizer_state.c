/* The encoders' states (tokenizer_internal.h, tpk_state): a pool, so that encoding is thread-safe
 * without one lock held over a whole encode. The lock guards only the pool's list; a long encode
 * (megabytes of one word) keeps its own state and never makes another encode wait. A state holds
 * only a cache, so which one an encode gets never changes its ids. */
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "tokenizer_internal.h"

/* a state with an empty cache: calloc'd, so its pages are taken only as the cache fills */
static tpk_state *state_new(void) {
    tpk_state *st = tp_calloc(1, sizeof *st);
    st->cache = tp_calloc(TPK_CACHE_SLOTS, sizeof *st->cache);
    st->cache_keys = tp_calloc(TPK_CACHE_KEY_BYTES, 1);
    st->cache_ids = tp_calloc(TPK_CACHE_IDS, sizeof *st->cache_ids);
    return st;
}

static void state_free(tpk_state *st) {
    free(st->cache);
    free(st->cache_keys);
    free(st->cache_ids);
    free(st->scratch);
    free(st);
}

void tpk_cache_clear(tpk_state *st) {
    memset(st->cache, 0, TPK_CACHE_SLOTS * sizeof *st->cache);
    st->cache_used = st->cache_key_used = st->cache_ids_used = 0;
}

void tpk_pool_init(tp_tokenizer *t) {
    int rc = pthread_mutex_init(&t->pool_mu, NULL);
    if (rc) tp_die("tokenizer: pthread_mutex_init failed (error %d)", rc);
    t->pool = NULL;
    t->pool_n = 0;
    t->pool_ready = 1;
}

void tpk_pool_free(tp_tokenizer *t) {
    while (t->pool) {
        tpk_state *st = t->pool;
        t->pool = st->next;
        state_free(st);
    }
    t->pool_n = 0;
    pthread_mutex_destroy(&t->pool_mu);
}

tpk_state *tpk_state_take(tp_tokenizer *t) {
    pthread_mutex_lock(&t->pool_mu);
    tpk_state *st = t->pool;
    if (st) {
        t->pool = st->next;
        t->pool_n--;
    }
    pthread_mutex_unlock(&t->pool_mu);
    return st ? st : state_new();
}

void tpk_state_give(tp_tokenizer *t, tpk_state *st) {
    pthread_mutex_lock(&t->pool_mu);
    int keep = t->pool_n < TPK_POOL_KEEP;
    if (keep) {
        st->next = t->pool;
        t->pool = st;
        t->pool_n++;
    }
    pthread_mutex_unlock(&t->pool_mu);
    if (!keep) state_free(st); /* more encodes ran at once than the pool keeps: this one's is dropped */
}

void tpk_pool_clear(tp_tokenizer *t) {
    pthread_mutex_lock(&t->pool_mu);
    for (tpk_state *st = t->pool; st; st = st->next) tpk_cache_clear(st);
    pthread_mutex_unlock(&t->pool_mu);
}
