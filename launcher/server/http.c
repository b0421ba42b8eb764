/* HTTP with libmicrohttpd, one thread per connection: routes, auth, body limits, error objects,
 * and the waiting side of completions (a whole JSON body, or SSE chunks as tokens come). */
#include <errno.h>
#include <stdarg.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "internal.h"
#include "util/json.h"
#include "util/log.h"

/* The routes, decided on the request line and headers (before any body byte is read). */
typedef enum {
    R_NONE, R_HEALTH, R_METRICS, R_MODELS, R_COMPLETIONS, R_TOKENIZE, R_DETOKENIZE, R_COPILOT_TOKEN
} route_id;

typedef struct {
    jbuf body;
    route_id what;
    int too_big;  /* a chunked body ran over its limit: dropped as it comes */
    size_t body_limit; /* --max-body-bytes, or the route's own (SRV_DETOK_MAX_BODY) */
    size_t detok;      /* bytes held against SRV_DETOK_BUDGET (under s->mu), released when it ends */
    int answered; /* a response is queued (or refused on the headers) */
    /* An answer decided on the headers of a request without a body waits here for the handler's
     * next call. libmicrohttpd 0.9.75 takes a response queued on the first call (the headers
     * only) as an early one and closes the connection after it, whatever the method: 50
     * pipelined GET /health got one answer (issue 34). Queued on the second call (the end of
     * an empty body) it keeps the connection alive. */
    int hold;                    /* on_headers of a request without a body: hold the answer */
    struct MHD_Response *held;   /* that answer */
    unsigned held_status;
} req_ctx;

static void on_signal(int sig) {
    (void)sig;
    srv_stop_signal = 1;
}

void tp_serve_install_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    /* SIGUSR1 too: Open MPI's mpirun forwards it to every rank (SIGTERM to mpirun kills the
     * job after 1 s instead), so `kill -USR1 <mpirun>` drains */
    int sigs[] = {SIGTERM, SIGINT, SIGUSR1};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        if (sigaction(sigs[i], &sa, NULL)) tp_die("sigaction(%s): %s", strsignal(sigs[i]), strerror(errno));
    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR) tp_die("signal(SIGPIPE): %s", strerror(errno));
}

/* The client's address, numeric ("127.0.0.1", "::1"): who holds what (--max-seqs-per-client). */
static void peer_address(struct MHD_Connection *c, char *out, size_t size) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    snprintf(out, size, "?");
    if (!ci || !ci->client_addr) return;
    socklen_t len = ci->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    int rc = getnameinfo(ci->client_addr, len, out, (socklen_t)size, NULL, 0, NI_NUMERICHOST);
    if (rc) snprintf(out, size, "?");
}

/* --conn-timeout limits how long a client may stay silent, not how long the server makes it
 * wait: while a completion waits for the engine (its answer, or a stream's next tokens) the
 * connection's timer is paused. libmicrohttpd restarts the timer when a timeout is set on a
 * connection whose timeout is 0 (microhttpd.h, MHD_CONNECTION_OPTION_TIMEOUT). */
static void client_timer(tp_server *s, struct MHD_Connection *c, int on) {
    if (!s->o.conn_timeout) return;
    unsigned secs = on ? (unsigned)s->o.conn_timeout : 0u;
    if (MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, secs) != MHD_YES)
        fprintf(stderr, "tpgen: warning: libmicrohttpd refused to %s a connection's timeout\n",
                on ? "restart" : "pause");
}

/* close: the connection ends after this response (its request's framing cannot be trusted, or
 * its body was never read). */
static enum MHD_Result send_body(tp_server *s, struct MHD_Connection *c, req_ctx *rc, int status, const char *type,
                                 jbuf *b, int count, int close) {
    struct MHD_Response *r = MHD_create_response_from_buffer(b->n, b->s ? b->s : "", MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    pthread_mutex_lock(&s->mu);
    if (s->draining || close) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    if (count) srv_metrics_status(&s->met, status);
    pthread_mutex_unlock(&s->mu);
    if (status == 503) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (status == 405) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, POST");
    if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (status == 429) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    jb_free(b);
    if (rc && rc->hold && !close) { /* queued at the handler's next call */
        rc->held = r;
        rc->held_status = (unsigned)status;
        return MHD_YES;
    }
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result send_json(tp_server *s, struct MHD_Connection *c, int status, jbuf *b) {
    return send_body(s, c, NULL, status, "application/json", b, 1, 0);
}

static enum MHD_Result send_error_v(tp_server *s, struct MHD_Connection *c, req_ctx *rc, int status, int close,
                                    const char *type, const char *code, const char *param, const char *fmt, va_list ap) {
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    jbuf b = {0};
    srv_error_json(&b, msg, type, param, code);
    return send_body(s, c, rc, status, "application/json", &b, 1, close);
}

static enum MHD_Result send_error(tp_server *s, struct MHD_Connection *c, int status, const char *type,
                                  const char *code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
static enum MHD_Result send_error(tp_server *s, struct MHD_Connection *c, int status, const char *type,
                                  const char *code, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    enum MHD_Result r = send_error_v(s, c, NULL, status, 0, type, code, param, fmt, ap);
    va_end(ap);
    return r;
}

/* A refusal on the headers. close: the connection ends after it (its framing cannot be trusted,
 * or a body was announced: it is not read, and none of its bytes may be taken for the next
 * request). */
static enum MHD_Result refuse(tp_server *s, struct MHD_Connection *c, req_ctx *rc, int status, int close,
                              const char *code, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
static enum MHD_Result refuse(tp_server *s, struct MHD_Connection *c, req_ctx *rc, int status, int close,
                              const char *code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    enum MHD_Result r = send_error_v(s, c, rc, status, close, "invalid_request_error", code, NULL, fmt, ap);
    va_end(ap);
    return r;
}

/* ---- completions ---- */

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
        client_timer(s, st->conn, 0);
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
        client_timer(s, st->conn, 1);
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
static int api_key_of(tp_server *s, struct MHD_Connection *c) {
    if (s->o.n_api_keys == 0) return -1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7)) return -2;
    h += 7;
    while (*h == ' ') h++;
    /* compare every byte of every key, whatever matches first */
    size_t n = strlen(h);
    int which = -2;
    for (int j = 0; j < s->o.n_api_keys; j++) {
        const char *key = s->o.api_keys[j];
        size_t k = strlen(key);
        unsigned diff = n != k;
        for (size_t i = 0; i < k; i++) diff |= (unsigned char)key[i] ^ (unsigned char)(i < n ? h[i] : 0);
        if (diff == 0) which = j;
    }
    return which;
}

static enum MHD_Result completions(tp_server *s, struct MHD_Connection *c, req_ctx *rc) {
    double t0 = tp_now_seconds();
    pthread_mutex_lock(&s->mu);
    int ready = s->ready, draining = s->draining || srv_stop_signal; /* the signal counts at once */
    pthread_mutex_unlock(&s->mu);
    if (!ready) return send_error(s, c, 503, "server_error", "loading", NULL, "the model is still loading; retry");
    if (draining) return send_error(s, c, 503, "server_error", "shutting_down", NULL, "the server is shutting down");
    int status = 400;
    jbuf err = {0};
    srv_job *j = srv_parse_completion(s, rc->body.s ? rc->body.s : "", rc->body.n, &status, &err);
    if (!j) return send_json(s, c, status, &err);
    static unsigned long counter;
    snprintf(j->id, sizeof j->id, "cmpl-%08lx%012lx", (unsigned long)time(NULL),
             __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
    j->created = (long)time(NULL);
    j->t_arrival = t0;

    peer_address(c, j->client, sizeof j->client);
    j->api_key = api_key_of(s, c); /* its prefix-cache scope (step_loop.c) */
    int cap = s->o.max_seqs_per_client;
    if (j->n_choices > cap) {
        int nc = j->n_choices;
        pthread_mutex_lock(&s->mu);
        srv_job_release(s, j);
        pthread_mutex_unlock(&s->mu);
        return send_error(s, c, 400, "invalid_request_error", NULL, "n",
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
        return send_error(s, c, 429, "invalid_request_error", "too_many_sequences", NULL,
                          "client %s holds %d sequences (queued or running); %d more would pass --max-seqs-per-client "
                          "%d; retry when some finish", who, held, nc, cap);
    }
    if (s->draining || srv_stop_signal || s->n_jobs >= s->o.max_queue) {
        int full = !(s->draining || srv_stop_signal);
        srv_job_release(s, j);
        pthread_mutex_unlock(&s->mu);
        if (full)
            return send_error(s, c, 503, "server_error", "queue_full", NULL,
                              "the server has %d requests in flight (--max-queue); retry later", s->o.max_queue);
        return send_error(s, c, 503, "server_error", "shutting_down", NULL, "the server is shutting down");
    }
    srv_conn_watch(s, c, j); /* before the engine sees it: its first step already knows a client that left */
    srv_job_enqueue(s, j);

    if (!j->stream) {
        pthread_mutex_unlock(&s->mu);
        client_timer(s, c, 0);
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
        client_timer(s, c, 1);
        jbuf b = {0};
        const char *failed = srv_job_error(j);
        int status = failed ? 500 : 200;
        if (failed) srv_error_json(&b, failed, "server_error", NULL, "engine_error");
        else srv_render_completion(s, j, &b);
        srv_job_release(s, j);
        pthread_mutex_unlock(&s->mu);
        return send_json(s, c, status, &b);
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

/* ---- small routes ---- */

/* The body of /tokenize or /detokenize parsed, with its member `field` of JSON type `type` in *v
 * (`want`: what the error says it must be) and a tokenizer to serve it; NULL when not, the 400
 * already queued in *res. The caller frees the root. */
static json_value *tok_route_body(tp_server *s, struct MHD_Connection *c, req_ctx *rc, const char *field,
                                  json_type type, const char *want, const json_value **v, enum MHD_Result *res) {
    char perr[256];
    json_value *root = json_parse_limited(rc->body.s ? rc->body.s : "", rc->body.n, SRV_JSON_DEPTH,
                                          srv_json_budget(rc->body.n), perr, sizeof perr);
    if (!root) {
        *res = send_error(s, c, 400, "invalid_request_error", NULL, NULL, "the request body is not valid JSON: %s", perr);
        return NULL;
    }
    *v = root->type == JSON_OBJECT ? json_get(root, field) : NULL;
    if (!*v || (*v)->type != type)
        *res = send_error(s, c, 400, "invalid_request_error", NULL, field, "'%s' must be %s", field, want);
    else if (!s->tok)
        *res = send_error(s, c, 400, "invalid_request_error", NULL, field,
                          "the model directory has no tokenizer (vocab.json + merges.txt, or tokenizer.json)");
    else
        return root;
    json_free(root);
    return NULL;
}

static enum MHD_Result tokenize(tp_server *s, struct MHD_Connection *c, req_ctx *rc) {
    const json_value *p;
    enum MHD_Result res;
    json_value *root = tok_route_body(s, c, rc, "prompt", JSON_STRING, "a string", &p, &res);
    if (!root) return res;
    int32_t *ids = NULL;
    size_t n = 0;
    char err[256];
    pthread_mutex_lock(&s->tok_mu);
    int bad = tp_tokenizer_encode(s->tok, p->str, p->str_len, &ids, &n, err, sizeof err);
    pthread_mutex_unlock(&s->tok_mu);
    json_free(root);
    if (bad) return send_error(s, c, 400, "invalid_request_error", NULL, "prompt", "%s", err);
    jbuf b = {0};
    jb_str(&b, "{\"tokens\": [");
    for (size_t i = 0; i < n; i++) jb_printf(&b, "%s%d", i ? ", " : "", ids[i]);
    jb_printf(&b, "], \"count\": %zu", n);
    if (s->ready) jb_printf(&b, ", \"max_model_len\": %d", s->n_positions);
    jb_str(&b, "}");
    free(ids);
    return send_json(s, c, 200, &b);
}

static enum MHD_Result detokenize(tp_server *s, struct MHD_Connection *c, req_ctx *rc) {
    const json_value *t;
    enum MHD_Result res;
    json_value *root = tok_route_body(s, c, rc, "tokens", JSON_ARRAY, "an array of token ids", &t, &res);
    if (!root) return res;
    if (t->n > SRV_DETOK_MAX_IDS) {
        size_t n = t->n;
        json_free(root);
        return send_error(s, c, 400, "invalid_request_error", "too_many_tokens", "tokens",
                          "'tokens' has %zu ids; /detokenize takes at most %d per request", n, SRV_DETOK_MAX_IDS);
    }
    /* the model's ids (vocab_size; CodeGen pads it past the tokenizer: those decode to nothing), or
     * the tokenizer's before the model is known */
    long long lim = s->ready ? s->vocab : tp_tokenizer_vocab_size(s->tok);
    int32_t *ids = tp_malloc((t->n ? t->n : 1) * sizeof(int32_t));
    for (size_t i = 0; i < t->n; i++) {
        const json_value *v = &t->items[i];
        if (v->type != JSON_NUMBER || !v->is_integer || v->integer < 0 || v->integer >= lim) {
            char what[64];
            if (v->type != JSON_NUMBER) snprintf(what, sizeof what, "a %s", json_type_name(v->type));
            else if (v->is_integer) snprintf(what, sizeof what, "%lld", (long long)v->integer);
            else snprintf(what, sizeof what, "%.17g", v->number);
            free(ids);
            json_free(root);
            return send_error(s, c, 400, "invalid_request_error", NULL, "tokens",
                              "token %zu is %s, not a token id in [0, %lld) (the %s)", i, what, lim,
                              s->ready ? "model's vocab_size" : "tokenizer's size");
        }
        ids[i] = (int32_t)v->integer;
    }
    char *text = NULL, err[256];
    size_t len = 0;
    int bad = tp_tokenizer_decode_model(s->tok, (int32_t)lim, ids, t->n, 1, &text, &len, err, sizeof err);
    free(ids);
    json_free(root);
    if (bad) return send_error(s, c, 400, "invalid_request_error", NULL, "tokens", "%s", err);
    /* decoded: the text is known, its JSON and libmicrohttpd's copy of it are held before made */
    size_t body = 14 + jb_json_size(text, len), more = len + 2 * body;
    pthread_mutex_lock(&s->mu);
    int over = s->detok_held + more > SRV_DETOK_BUDGET;
    if (!over) s->detok_held += more, rc->detok += more;
    size_t held = s->detok_held;
    pthread_mutex_unlock(&s->mu);
    if (over) {
        free(text);
        return send_error(s, c, 503, "server_error", "server_busy", "tokens",
                          "these ids decode to %zu bytes of JSON; with the /detokenize requests in flight (%zu "
                          "MiB) that passes their memory budget of %zu MiB; retry", body, held >> 20,
                          SRV_DETOK_BUDGET >> 20);
    }
    jbuf b = {0};
    jb_reserve(&b, body);
    jb_str(&b, "{\"prompt\": ");
    jb_json(&b, text, len);
    jb_str(&b, "}");
    free(text);
    return send_json(s, c, 200, &b);
}

static enum MHD_Result models(tp_server *s, struct MHD_Connection *c, req_ctx *rc, int close) {
    jbuf b = {0};
    jb_str(&b, "{\"object\": \"list\", \"data\": [{\"id\": ");
    jb_json(&b, s->o.name, strlen(s->o.name));
    jb_printf(&b, ", \"object\": \"model\", \"created\": %ld, \"owned_by\": \"tpgen\", \"root\": ", (long)time(NULL));
    jb_json(&b, s->o.name, strlen(s->o.name));
    if (s->ready) jb_printf(&b, ", \"max_model_len\": %d}]}", s->n_positions);
    else jb_str(&b, ", \"max_model_len\": null}]}");
    return send_body(s, c, rc, 200, "application/json", &b, 1, close);
}

/* GET /copilot_internal/v2/token: the Copilot editor plugin asks for a session token before it
 * completes, and sends it back as 'Authorization: Bearer TOKEN'. The shape FauxPilot answers:
 * {"token": str, "expires_at": unix seconds, "refresh_in": seconds}. The route is behind the API
 * key like every other (checked before this runs); with a key the token is that key, so the
 * plugin's completions pass the same check; without one it is "1", as FauxPilot's. Expiry: an
 * hour from now, refreshed every 15 min (FauxPilot: 2600000000 and 900), so a restarted server's
 * new key reaches the plugin within 15 minutes. */
static enum MHD_Result copilot_token(tp_server *s, struct MHD_Connection *c, req_ctx *rc, int close) {
    int which = api_key_of(s, c); /* the caller's own key (checked before this runs) */
    const char *key = which >= 0 ? s->o.api_keys[which] : "1";
    jbuf b = {0};
    jb_str(&b, "{\"token\": ");
    jb_json(&b, key, strlen(key));
    jb_printf(&b, ", \"expires_at\": %lld, \"refresh_in\": 900}", (long long)time(NULL) + 3600);
    return send_body(s, c, rc, 200, "application/json", &b, 1, close);
}

static int is_engine_route(const char *url) {
    const char *pre = "/v1/engines/", *suf = "/completions";
    size_t np = strlen(pre), ns = strlen(suf), n = strlen(url);
    if (n <= np + ns || strncmp(url, pre, np) || strcmp(url + n - ns, suf)) return 0;
    return memchr(url + np, '/', n - np - ns) == NULL;
}

static route_id route_of(const char *url, int *want_post) {
    *want_post = 1;
    if (strcmp(url, "/health") == 0) return *want_post = 0, R_HEALTH;
    if (strcmp(url, "/metrics") == 0) return *want_post = 0, R_METRICS;
    if (strcmp(url, "/v1/models") == 0) return *want_post = 0, R_MODELS;
    if (strcmp(url, "/copilot_internal/v2/token") == 0) return *want_post = 0, R_COPILOT_TOKEN;
    if (strcmp(url, "/v1/completions") == 0 || is_engine_route(url)) return R_COMPLETIONS;
    if (strcmp(url, "/tokenize") == 0) return R_TOKENIZE;
    if (strcmp(url, "/detokenize") == 0) return R_DETOKENIZE;
    return R_NONE;
}

/* ---- request framing (RFC 9112 section 6), on the headers ----
 * libmicrohttpd 0.9.75 takes a header whose name is followed by a space ("Content-Length : 5") as
 * an unknown header, so the body was read as the next request (smuggled); it takes the first of
 * two Content-Length headers; and with a Transfer-Encoding other than chunked it waits for a
 * body that has no length. Every request is checked here, before its body is read, and refused
 * with the connection closed: a server that cannot tell where a request ends must not read on. */
typedef struct {
    int n_cl, n_te, n_host, bad_name;
    char name[64];           /* the first bad header name, for the message */
    const char *cl, *te;     /* the values */
} framing;

static int is_tchar(unsigned char ch) { /* RFC 9110 section 5.6.2 */
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static enum MHD_Result framing_header(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                      const char *value, size_t value_size) {
    (void)kind;
    (void)value_size;
    framing *f = cls;
    int bad = key_size == 0;
    for (size_t i = 0; i < key_size; i++) bad |= !is_tchar((unsigned char)key[i]);
    if (bad && !f->bad_name++) snprintf(f->name, sizeof f->name, "%.*s", (int)(key_size < 60 ? key_size : 60), key);
    if (!bad && strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) f->n_cl++, f->cl = value;
    if (!bad && strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) f->n_te++, f->te = value;
    if (!bad && strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0) f->n_host++;
    return MHD_YES;
}

/* 0 when the framing is sound, else the status to refuse with (400, or 501 for a transfer coding
 * tpgen does not implement) and why in msg. *has_body: a body follows the headers. */
static int framing_error(struct MHD_Connection *c, const char *version, int *has_body, long long *cl, char *msg,
                         size_t msg_size) {
    framing f = {0};
    MHD_get_connection_values_n(c, MHD_HEADER_KIND, framing_header, &f);
    *has_body = 0;
    *cl = -1;
    if (f.bad_name) {
        /* the name as sent; a control character in it is shown escaped by the JSON writer */
        snprintf(msg, msg_size, "malformed header name \"%s\" (a token, no space before the colon: RFC 9112 5.1)",
                 f.name);
        return 400;
    }
    /* libmicrohttpd's own check (MHD_OPTION_STRICT_FOR_CLIENT) sends its 400 head twice in 0.9.75 */
    if (f.n_host > 1 || (f.n_host == 0 && strcmp(version, MHD_HTTP_VERSION_1_1) == 0)) {
        snprintf(msg, msg_size, "%s Host header; an HTTP/1.1 request has exactly one (RFC 9112 3.2)",
                 f.n_host ? "more than one" : "no");
        return 400;
    }
    if (f.n_cl > 1) {
        snprintf(msg, msg_size, "%d Content-Length headers; a request has at most one (RFC 9112 6.3)", f.n_cl);
        return 400;
    }
    if (f.n_te && f.n_cl) {
        snprintf(msg, msg_size, "both Transfer-Encoding and Content-Length; a request has one or the other (RFC 9112 6.1)");
        return 400;
    }
    if (f.n_te) {
        const char *v = f.te;
        while (*v == ' ' || *v == '\t') v++;
        size_t n = strlen(v);
        while (n && (v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
        if (f.n_te > 1 || n != 7 || strncasecmp(v, "chunked", 7)) {
            /* a coding other than chunked (gzip, ...): not implemented; chunked not last: no length */
            const char *last = f.te + strlen(f.te);
            while (last > f.te && (last[-1] == ' ' || last[-1] == '\t')) last--;
            int chunked_last = f.n_te == 1 && last - f.te >= 7 && strncasecmp(last - 7, "chunked", 7) == 0;
            snprintf(msg, msg_size, "Transfer-Encoding \"%.64s\"%s: tpgen takes only \"chunked\" (RFC 9112 6.1)",
                     f.n_te > 1 ? "(several headers)" : f.te, chunked_last ? " has a coding it does not implement" : "");
            return chunked_last ? 501 : 400;
        }
        *has_body = 1;
    }
    if (f.n_cl) { /* libmicrohttpd has refused a value that is not a number (400) or too large (413) */
        size_t nd = strspn(f.cl, "0123456789"); /* 1*DIGIT, nothing else (RFC 9110 8.6) */
        long long x = nd ? strtoll(f.cl, NULL, 10) : -1;
        if (!nd || f.cl[nd] || x < 0) {
            snprintf(msg, msg_size, "Content-Length \"%.32s\" is not a length", f.cl);
            return 400;
        }
        *cl = x;
        *has_body = x > 0;
    }
    return 0;
}

/* The request line and headers are in, no byte of the body is read: everything that can be
 * decided now is (framing, route, method, API key, size), so a request that will be refused
 * never has its body buffered. Returns MHD_YES to read the body (the route answers at its end). */
static enum MHD_Result on_headers(tp_server *s, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, req_ctx *rc) {
    char msg[256];
    int has_body;
    long long cl;
    int bad = framing_error(c, version, &has_body, &cl, msg, sizeof msg);
    if (bad) return refuse(s, c, rc, bad, 1, bad == 501 ? "not_implemented" : "bad_framing", "%s", msg);
    int want_post, get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
    route_id what = route_of(url, &want_post);
    rc->answered = 1; /* unless the body is read below */
    rc->hold = !has_body;
    if (what == R_NONE && strcmp(url, "/v1/chat/completions") == 0) /* docs/SERVING.md, "Routes": why not */
        return refuse(s, c, rc, 404, has_body, "not_found",
                      "no route %s %s: tpgen serves the completions API only (POST /v1/completions with a "
                      "\"prompt\"); the CodeGen models it runs are not chat models and have no chat template",
                      method, url);
    if (what == R_NONE)
        return refuse(s, c, rc, 404, has_body, "not_found", "no route %s %s (see docs/SERVING.md)", method, url);
    if (want_post ? !post : !get)
        return refuse(s, c, rc, 405, has_body, "method_not_allowed", "%s %s: use %s", method, url,
                                  want_post ? "POST" : "GET");
    if (what == R_HEALTH) {
        pthread_mutex_lock(&s->mu);
        int ready = s->ready, draining = s->draining || srv_stop_signal; /* the signal counts at once */
        pthread_mutex_unlock(&s->mu);
        jbuf b = {0};
        jb_printf(&b, "{\"status\": \"%s\"}", draining ? "draining" : ready ? "ok" : "loading");
        return send_body(s, c, rc, ready && !draining ? 200 : 503, "application/json", &b, 0, has_body);
    }
    if (what == R_METRICS) {
        jbuf b = {0};
        pthread_mutex_lock(&s->mu);
        s->met.detok_held = (long)s->detok_held;
        srv_metrics_render(&s->met, &b);
        pthread_mutex_unlock(&s->mu);
        return send_body(s, c, rc, 200, "text/plain; version=0.0.4", &b, 0, has_body);
    }
    if (api_key_of(s, c) == -2)
        return refuse(s, c, rc, 401, has_body, "invalid_api_key",
                                  "missing or wrong API key: send the header 'Authorization: Bearer KEY'");
    if (cl > s->o.max_body_bytes)
        return refuse(s, c, rc, 413, 1, "request_too_large",
                                  "the request body is over the limit of %ld bytes (--max-body-bytes)",
                                  s->o.max_body_bytes);
    if (what == R_MODELS) return models(s, c, rc, has_body);
    if (what == R_COPILOT_TOKEN) return copilot_token(s, c, rc, has_body);
    rc->body_limit = (size_t)s->o.max_body_bytes;
    if (what == R_DETOKENIZE) {
        if (cl > (long long)SRV_DETOK_MAX_BODY)
            return refuse(s, c, rc, 413, 1, "request_too_large",
                          "the request body is over the limit of %zu bytes of /detokenize (%d token ids at most)",
                          SRV_DETOK_MAX_BODY, SRV_DETOK_MAX_IDS);
        if (rc->body_limit > SRV_DETOK_MAX_BODY) rc->body_limit = SRV_DETOK_MAX_BODY;
        size_t n = cl >= 0 ? (size_t)cl : rc->body_limit, need = n + srv_json_budget(n);
        pthread_mutex_lock(&s->mu);
        int over = s->detok_held + need > SRV_DETOK_BUDGET;
        if (!over) s->detok_held += need, rc->detok = need;
        size_t held = s->detok_held;
        pthread_mutex_unlock(&s->mu);
        if (over)
            return refuse(s, c, rc, 503, has_body, "server_busy",
                          "the /detokenize requests in flight hold %zu MiB of their memory budget of %zu MiB; "
                          "this one needs %zu MiB to parse; retry", held >> 20, SRV_DETOK_BUDGET >> 20, need >> 20);
    }
    rc->answered = 0;
    rc->what = what;
    if (cl > 0) jb_reserve(&rc->body, (size_t)cl); /* the body's exact size, not a doubling */
    return MHD_YES;
}

/* The whole body is in. */
static enum MHD_Result on_body(tp_server *s, struct MHD_Connection *c, req_ctx *rc) {
    rc->answered = 1;
    if (rc->too_big) /* chunked: its size was known only now */
        return send_error(s, c, 413, "invalid_request_error", "request_too_large", NULL,
                          "the request body is over the limit of %zu bytes (%s)", rc->body_limit,
                          rc->what == R_DETOKENIZE ? "of /detokenize" : "--max-body-bytes");
    if (rc->what == R_TOKENIZE) return tokenize(s, c, rc);
    if (rc->what == R_DETOKENIZE) return detokenize(s, c, rc);
    return completions(s, c, rc);
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    tp_server *s = cls;
    req_ctx *rc = *con_cls;
    if (!rc) {
        rc = tp_calloc(1, sizeof *rc);
        *con_cls = rc;
        pthread_mutex_lock(&s->mu);
        s->open_requests++;
        pthread_mutex_unlock(&s->mu);
        srv_conn_head_done(s, c);
        return on_headers(s, c, url, method, version, rc);
    }
    if (rc->held) { /* answered on the headers, no body: queued now, the connection kept */
        srv_conn_body_done(s, c);
        struct MHD_Response *r = rc->held;
        rc->held = NULL;
        enum MHD_Result ok = MHD_queue_response(c, rc->held_status, r);
        MHD_destroy_response(r);
        return ok;
    }
    if (rc->answered) { /* refused on its headers: what libmicrohttpd still reads is dropped */
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!rc->too_big) {
            if (rc->body.n + *upload_size > rc->body_limit) {
                rc->too_big = 1;
                jb_free(&rc->body);
            } else jb_put(&rc->body, upload, *upload_size);
        }
        srv_conn_body_bytes(s, c, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    srv_conn_body_done(s, c);
    return on_body(s, c, rc);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode code) {
    (void)code;
    tp_server *s = cls;
    srv_conn_head_next(s, c);
    req_ctx *rc = *con_cls;
    if (!rc) return;
    if (rc->held) MHD_destroy_response(rc->held);
    size_t detok = rc->detok;
    jb_free(&rc->body);
    free(rc);
    *con_cls = NULL;
    pthread_mutex_lock(&s->mu);
    s->detok_held -= detok;
    s->open_requests--;
    pthread_cond_signal(&s->engine_cv);
    pthread_mutex_unlock(&s->mu);
}

tp_server *tp_server_start(const tp_serve_opts *o, tp_tokenizer *tok, char *err, size_t err_size) {
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    char port[16];
    snprintf(port, sizeof port, "%d", o->port);
    int rc = getaddrinfo(o->host, port, &hints, &ai);
    if (rc) {
        snprintf(err, err_size, "--host %s: %s", o->host, gai_strerror(rc));
        return NULL;
    }
    tp_server *s = tp_calloc(1, sizeof *s);
    s->o = *o;
    s->tok = tok;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->tok_mu, NULL);
    pthread_cond_init(&s->engine_cv, NULL);
    srv_conns_start(s);
    /* a client (peer address) may hold only part of the connections, so clients that never finish
     * a request cannot take every slot from the others (issue 34) */
    int per_client = o->max_connections_per_client ? o->max_connections_per_client : (o->max_connections + 1) / 2;
    if (per_client > o->max_connections) per_client = o->max_connections;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    s->d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, handler, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_NOTIFY_CONNECTION,
                            srv_conns_notify, s, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)o->max_connections, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->conn_timeout,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)per_client, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->d) {
        snprintf(err, err_size, "cannot listen on %s port %d (in use, or not an address of this machine?)", o->host,
                 o->port);
        srv_conns_stop(s);
        free(s);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : o->port;
    return s;
}

int tp_server_port(const tp_server *s) { return s->port; }

void tp_server_free(tp_server *s) {
    if (!s) return;
    MHD_stop_daemon(s->d);
    srv_conns_stop(s);
    while (s->clients) {
        srv_client *c = s->clients;
        s->clients = c->next;
        free(c);
    }
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->tok_mu);
    pthread_cond_destroy(&s->engine_cv);
    free(s);
}
