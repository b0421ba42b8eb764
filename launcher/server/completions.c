/* POST /v1/completions (and /v1/engines/{engine}/completions): admit the parsed request against
 * the client's and the server's limits, hand it to the engine thread, and wait: for the whole
 * answer as one JSON body, or as SSE chunks while the tokens come. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "route.h"
#include "util/log.h"

typedef struct {
    tp_server *s;
    srv_job *j;
    struct MHD_Connection *conn;
    int *sent_tok, *flags;
    size_t *sent_text;
    jbuf pend;
    size_t off;
    int ended;
} stream_ctx;

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream_ctx *st = cls;
    tp_server *s = st->s;
    if (st->off >= st->pend.n) {
        if (st->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        st->pend.n = 0;
        st->off = 0;
        srv_client_timer(s, st->conn, 0);
        pthread_mutex_lock(&s->mu);
        for (;;) {
            int all = srv_render_stream(s, st->j, st->sent_tok, st->sent_text, st->flags, &st->pend);
            if (all) {
                if (st->j->include_usage) srv_render_usage_chunk(s, st->j, &st->pend);
                jb_str(&st->pend, "data: [DONE]\n\n");
                st->ended = 1;
                break;
            }
            if (st->pend.n) break;
            struct timespec ts;
            srv_deadline_in(&ts, 100);
            pthread_cond_timedwait(&st->j->cv, &s->mu, &ts);
            if (st->j->cancel) { /* the client left (srv_conns_sweep) */
                pthread_mutex_unlock(&s->mu);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
        }
        pthread_mutex_unlock(&s->mu);
        srv_client_timer(s, st->conn, 1);
    }
    size_t n = st->pend.n - st->off < max ? st->pend.n - st->off : max;
    memcpy(buf, st->pend.s + st->off, n);
    st->off += n;
    return (ssize_t)n;
}

/* The stream is over (sent, or the client went away): an unfinished job is cancelled. */
static void stream_free(void *cls) {
    stream_ctx *st = cls;
    tp_server *s = st->s;
    pthread_mutex_lock(&s->mu);
    if (!st->ended) {
        st->j->cancel = 1;
        pthread_cond_signal(&s->engine_cv);
    }
    srv_conn_unwatch(s, st->j);
    srv_job_release(s, st->j);
    pthread_mutex_unlock(&s->mu);
    free(st->sent_tok);
    free(st->sent_text);
    free(st->flags);
    jb_free(&st->pend);
    free(st);
}

/* The --api-key the request's bearer key is: its index; -1 when none is configured (every
 * request passes), -2 when the key is missing or matches none. */

enum MHD_Result srv_route_completions(tp_server *s, struct MHD_Connection *c, srv_req *rq) {
    double t0 = tp_now_seconds();
    pthread_mutex_lock(&s->mu);
    int ready = s->ready, draining = s->draining || srv_stop_signal; /* the signal counts at once */
    pthread_mutex_unlock(&s->mu);
    if (!ready) return srv_send_error(s, c, rq, 503, "server_error", "loading", NULL, "the model is still loading; retry");
    if (draining) return srv_send_error(s, c, rq, 503, "server_error", "shutting_down", NULL, "the server is shutting down");
    int status = 400;
    jbuf err = {0};
    srv_job *j = srv_parse_completion(s, rq->body.s ? rq->body.s : "", rq->body.n, &status, &err);
    if (!j) return srv_send(s, c, rq, status, "application/json", &err, 1);
    static unsigned long counter;
    snprintf(j->id, sizeof j->id, "cmpl-%08lx%012lx", (unsigned long)time(NULL),
             __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
    j->created = (long)time(NULL);
    j->t_arrival = t0;

    srv_client_address(s, c, j->client, sizeof j->client);
    j->api_key = srv_api_key_of(s, c); /* its prefix-cache scope (step_loop.c) */
    int cap = s->o.max_seqs_per_client;
    if (j->n_choices > cap) {
        int nc = j->n_choices;
        pthread_mutex_lock(&s->mu);
        srv_job_release(s, j);
        pthread_mutex_unlock(&s->mu);
        return srv_send_error(s, c, rq, 400, "invalid_request_error", NULL, "n",
                          "this request makes %d sequences (n x prompts), more than a client may hold (%d, "
                          "--max-seqs-per-client)", nc, cap);
    }
    pthread_mutex_lock(&s->mu);
    int held = srv_client_held(s, j->client);
    if (held + j->n_choices > cap && !(s->draining || srv_stop_signal)) {
        int nc = j->n_choices;
        char who[sizeof j->client];
        snprintf(who, sizeof who, "%s", j->client);
        srv_job_release(s, j);
        pthread_mutex_unlock(&s->mu);
        return srv_send_error(s, c, rq, 429, "invalid_request_error", "too_many_sequences", NULL,
                          "client %s holds %d sequences (queued or running); %d more would pass --max-seqs-per-client "
                          "%d; retry when some finish", who, held, nc, cap);
    }
    if (s->draining || srv_stop_signal || s->n_jobs >= s->o.max_queue) {
        int full = !(s->draining || srv_stop_signal);
        srv_job_release(s, j);
        pthread_mutex_unlock(&s->mu);
        if (full)
            return srv_send_error(s, c, rq, 503, "server_error", "queue_full", NULL,
                              "the server has %d requests in flight (--max-queue); retry later", s->o.max_queue);
        return srv_send_error(s, c, rq, 503, "server_error", "shutting_down", NULL, "the server is shutting down");
    }
    srv_conn_watch(s, c, j); /* before the engine sees it: its first step already knows a client that left */
    srv_job_enqueue(s, j);

    if (!j->stream) {
        pthread_mutex_unlock(&s->mu);
        srv_client_timer(s, c, 0);
        pthread_mutex_lock(&s->mu);
        while (!(j->scored && j->n_done == j->n_choices) && !j->cancel) {
            struct timespec ts;
            srv_deadline_in(&ts, 100);
            pthread_cond_timedwait(&j->cv, &s->mu, &ts);
        }
        srv_conn_unwatch(s, j);
        if (j->cancel) { /* the client left (srv_conns_sweep): the engine cancels the rest */
            srv_job_release(s, j);
            pthread_mutex_unlock(&s->mu);
            return MHD_NO;
        }
        srv_client_timer(s, c, 1);
        jbuf b = {0};
        const char *failed = srv_job_error(j);
        int status = failed ? 500 : 200;
        if (failed) srv_error_json(&b, failed, "server_error", NULL, "engine_error");
        else srv_render_completion(s, j, &b);
        srv_job_release(s, j);
        pthread_mutex_unlock(&s->mu);
        return srv_send(s, c, rq, status, "application/json", &b, 1);
    }
    pthread_mutex_unlock(&s->mu);
    stream_ctx *st = tp_calloc(1, sizeof *st);
    st->s = s;
    st->j = j;
    st->conn = c;
    st->sent_tok = tp_calloc(j->n_choices, sizeof(int));
    st->flags = tp_calloc(j->n_choices, sizeof(int));
    st->sent_text = tp_calloc(j->n_choices, sizeof(size_t));
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, st, stream_free);
    if (!r) {
        stream_free(st);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    pthread_mutex_lock(&s->mu);
    srv_metrics_status(&s->met, 200);
    pthread_mutex_unlock(&s->mu);
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}
