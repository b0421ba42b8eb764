/* Decoding: ids -> bytes (each id's bytes were worked out at load time), made valid UTF-8 the way
 * HF does it; the streaming decoder; stop strings on streamed text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "tokenizer_internal.h"

static int check_id(const tp_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_ids && (t->tok_flags[id] & TPK_TOK_PRESENT);
}

/* The ids' text. model_vocab 0: every id must have a token; else ids in [0, model_vocab) without
 * one decode to nothing (tp_tokenizer_decode_model). */
static int decode(const tp_tokenizer *t, int32_t model_vocab, const int32_t *ids, size_t n, int skip_special,
                  char **text, size_t *len, char *err, size_t err_size) {
    *text = NULL;
    *len = 0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (model_vocab > 0 && (id < 0 || id >= model_vocab)) {
            if (err && err_size)
                snprintf(err, err_size, "token id %d (position %zu) is out of range [0, %d)", id, i, model_vocab);
            return -1;
        }
        if (!check_id(t, id)) {
            if (model_vocab > 0) continue; /* a padded id: nothing */
            if (err && err_size)
                snprintf(err, err_size, "token id %d (position %zu) is %s (vocab size %d)", id, i,
                         id >= 0 && id < t->n_ids ? "not assigned to a token" : "out of range", t->n_ids);
            return -1;
        }
        if (!(skip_special && (t->tok_flags[id] & TPK_TOK_SPECIAL))) total += t->tok_off[id + 1] - t->tok_off[id];
    }
    char *raw = tp_malloc(total + 1); /* [total] the bytes of all ids */
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (!check_id(t, id)) continue; /* a padded id (checked above) */
        if (skip_special && (t->tok_flags[id] & TPK_TOK_SPECIAL)) continue;
        size_t k = t->tok_off[id + 1] - t->tok_off[id];
        memcpy(raw + o, t->tok_bytes + t->tok_off[id], k);
        o += k;
    }
    raw[total] = 0;
    if (tpk_utf8_validate((const uint8_t *)raw, total) == total) {
        *text = raw;
        *len = total;
        return 0;
    }
    char *buf = NULL;
    size_t bl = 0, cap = 0;
    tpk_buf_append(&buf, &bl, &cap, "", 0);
    tpk_utf8_append_lossy(&buf, &bl, &cap, (const uint8_t *)raw, total, 0);
    free(raw);
    *text = buf;
    *len = bl;
    return 0;
}

int tp_tokenizer_decode(const tp_tokenizer *t, const int32_t *ids, size_t n, int skip_special, char **text,
                        size_t *len, char *err, size_t err_size) {
    return decode(t, 0, ids, n, skip_special, text, len, err, err_size);
}

int tp_tokenizer_decode_model(const tp_tokenizer *t, int32_t model_vocab, const int32_t *ids, size_t n,
                              int skip_special, char **text, size_t *len, char *err, size_t err_size) {
    return decode(t, model_vocab > 0 ? model_vocab : t->n_ids, ids, n, skip_special, text, len, err, err_size);
}

/* ---- streaming ---- */

struct tp_detok_stream {
    const tp_tokenizer *t;
    int skip_special;
    uint8_t pend[4]; /* an unfinished UTF-8 character (at most 3 bytes) */
    int npend;
};

tp_detok_stream *tp_detok_stream_new(const tp_tokenizer *t, int skip_special) {
    tp_detok_stream *s = tp_calloc(1, sizeof *s);
    s->t = t;
    s->skip_special = skip_special;
    return s;
}

/* appends bytes to the caller's buffer, whose allocation is exactly *out_len + 1 or more */
void tp_text_append(char **out, size_t *out_len, const char *s, size_t n) {
    if (!*out) {
        *out = tp_malloc(n + 1);
        *out_len = 0;
    } else if (n) *out = tp_realloc(*out, *out_len + n + 1);
    if (n) memcpy(*out + *out_len, s, n);
    *out_len += n;
    (*out)[*out_len] = 0;
}

int tp_detok_stream_push(tp_detok_stream *s, int32_t id, char **out, size_t *out_len) {
    tp_text_append(out, out_len, "", 0);
    const tp_tokenizer *t = s->t;
    if (!check_id(t, id)) return -1;
    if (s->skip_special && (t->tok_flags[id] & TPK_TOK_SPECIAL)) return 0;
    size_t k = t->tok_off[id + 1] - t->tok_off[id];
    /* the pending bytes, then the token's */
    uint8_t small[256], *in = k + 4 <= sizeof small ? small : tp_malloc(k + 4);
    memcpy(in, s->pend, (size_t)s->npend);
    memcpy(in + s->npend, t->tok_bytes + t->tok_off[id], k);
    size_t n = (size_t)s->npend + k;
    char *buf = NULL;
    size_t bl = 0, cap = 0;
    tpk_buf_append(&buf, &bl, &cap, "", 0);
    size_t used = tpk_utf8_append_lossy(&buf, &bl, &cap, in, n, 1);
    s->npend = (int)(n - used); /* at most 3: a valid start of one character */
    memcpy(s->pend, in + used, (size_t)s->npend);
    tp_text_append(out, out_len, buf, bl);
    free(buf);
    if (in != small) free(in);
    return 0;
}

int tp_detok_stream_flush(tp_detok_stream *s, char **out, size_t *out_len) {
    tp_text_append(out, out_len, "", 0);
    if (s->npend) {
        char *buf = NULL;
        size_t bl = 0, cap = 0;
        tpk_buf_append(&buf, &bl, &cap, "", 0);
        tpk_utf8_append_lossy(&buf, &bl, &cap, s->pend, (size_t)s->npend, 0);
        tp_text_append(out, out_len, buf, bl);
        free(buf);
        s->npend = 0;
    }
    return 0;
}

void tp_detok_stream_free(tp_detok_stream *s) { free(s); }

/* ---- stop strings ---- */

struct tp_stop_matcher {
    char **stops; /* [n] non-empty stop strings */
    size_t *lens; /* [n] */
    int n;
    int borrowed; /* stops are the caller's (tp_stop_matcher_new_shared), not copies */
    char *pend; /* text held back: it may be the start of a stop string */
    size_t npend, cap;
    int stopped;
};

static tp_stop_matcher *matcher_new(const char *const *stops, int n_stops, int borrow) {
    tp_stop_matcher *m = tp_calloc(1, sizeof *m);
    m->stops = tp_calloc((size_t)(n_stops > 0 ? n_stops : 1), sizeof *m->stops);
    m->lens = tp_calloc((size_t)(n_stops > 0 ? n_stops : 1), sizeof *m->lens);
    m->borrowed = borrow;
    for (int i = 0; i < n_stops; i++)
        if (stops[i] && stops[i][0]) {
            m->stops[m->n] = borrow ? (char *)stops[i] : tp_strdup(stops[i]);
            m->lens[m->n++] = strlen(stops[i]);
        }
    return m;
}

tp_stop_matcher *tp_stop_matcher_new(const char *const *stops, int n_stops) { return matcher_new(stops, n_stops, 0); }

tp_stop_matcher *tp_stop_matcher_new_shared(const char *const *stops, int n_stops) {
    return matcher_new(stops, n_stops, 1);
}

int tp_stop_matcher_feed(tp_stop_matcher *m, const char *text, size_t len, char **out, size_t *out_len) {
    tp_text_append(out, out_len, "", 0);
    if (m->stopped) return 1;
    tpk_buf_append(&m->pend, &m->npend, &m->cap, text, len);
    size_t first = m->npend; /* earliest stop string start */
    for (int i = 0; i < m->n; i++) {
        const char *hit = memmem(m->pend, m->npend, m->stops[i], m->lens[i]);
        if (hit && (size_t)(hit - m->pend) < first) first = (size_t)(hit - m->pend);
    }
    if (first < m->npend) {
        tp_text_append(out, out_len, m->pend, first);
        m->npend = 0;
        m->stopped = 1;
        return 1;
    }
    /* hold back the longest suffix that starts some stop string */
    size_t hold = 0;
    for (int i = 0; i < m->n; i++)
        for (size_t l = m->lens[i] - 1 < m->npend ? m->lens[i] - 1 : m->npend; l > hold; l--)
            if (memcmp(m->pend + m->npend - l, m->stops[i], l) == 0) {
                hold = l;
                break;
            }
    tp_text_append(out, out_len, m->pend, m->npend - hold);
    memmove(m->pend, m->pend + m->npend - hold, hold);
    m->npend = hold;
    return 0;
}

void tp_stop_matcher_finish(tp_stop_matcher *m, char **out, size_t *out_len) {
    tp_text_append(out, out_len, "", 0);
    if (!m->stopped) tp_text_append(out, out_len, m->pend, m->npend);
    m->npend = 0;
}

void tp_stop_matcher_free(tp_stop_matcher *m) {
    if (!m) return;
    if (!m->borrowed)
        for (int i = 0; i < m->n; i++) free(m->stops[i]);
    free(m->stops);
    free(m->lens);
    free(m->pend);
    free(m);
}
