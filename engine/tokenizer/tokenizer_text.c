/* One sequence's text stream: tp_detok_stream, then tp_stop_matcher (tokenizer.h). */
#include <stdlib.h>

#include "tokenizer.h"
#include "util/log.h"

struct tp_text_stream {
    tp_detok_stream *detok;
    tp_stop_matcher *stops; /* NULL: no stop strings */
    int stopped;            /* a stop string matched */
};

tp_text_stream *tp_text_stream_new(const tp_tokenizer *t, const char *const *stops, int n_stops, int shared) {
    tp_text_stream *s = tp_calloc(1, sizeof *s);
    s->detok = tp_detok_stream_new(t, 1);
    if (n_stops > 0)
        s->stops = shared ? tp_stop_matcher_new_shared(stops, n_stops) : tp_stop_matcher_new(stops, n_stops);
    return s;
}

/* decoded text [text, n) through the stop strings, into *out */
static int pass(tp_text_stream *s, const char *text, size_t n, char **out, size_t *out_len) {
    if (!s->stops) {
        tp_text_append(out, out_len, text, n);
        return 0;
    }
    return tp_stop_matcher_feed(s->stops, text ? text : "", n, out, out_len);
}

int tp_text_stream_push(tp_text_stream *s, int32_t id, char **out, size_t *out_len, size_t *decoded) {
    char *chunk = NULL;
    size_t n = 0;
    tp_detok_stream_push(s->detok, id, &chunk, &n);
    if (decoded) *decoded = n;
    int stop = pass(s, chunk, n, out, out_len);
    free(chunk);
    if (stop) s->stopped = 1;
    return stop;
}

void tp_text_stream_finish(tp_text_stream *s, char **out, size_t *out_len, size_t *decoded) {
    if (decoded) *decoded = 0;
    tp_text_append(out, out_len, "", 0);
    if (s->stopped) return;
    char *rest = NULL;
    size_t n = 0;
    tp_detok_stream_flush(s->detok, &rest, &n);
    if (decoded) *decoded = n;
    pass(s, rest, n, out, out_len);
    free(rest);
    if (s->stops) tp_stop_matcher_finish(s->stops, out, out_len);
}

int tp_text_stream_stopped(const tp_text_stream *s) { return s->stopped; }

void tp_text_stream_free(tp_text_stream *s) {
    if (!s) return;
    tp_detok_stream_free(s->detok);
    tp_stop_matcher_free(s->stops);
    free(s);
}
