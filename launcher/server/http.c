/* The HTTP transport, on libmicrohttpd with one thread per connection: framing (framing.c),
 * the route a request names (the table of routes.c), the API key, body limits, reading the body,
 * keep-alive. An answer is made in reply.c; what a route answers is its handler's (route.h); every
 * check a row asks for is made here on the headers, before any body byte is read, so a request
 * that will be refused never has its body buffered. */
#include <errno.h>
#include <stdarg.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "internal.h"
#include "route.h"
#include "util/log.h"

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

/* A refusal on the headers. close: the connection ends after it (its framing cannot be trusted,
 * or a body was announced: it is not read, and none of its bytes may be taken for the next
 * request). */
static enum MHD_Result refuse(tp_server *s, struct MHD_Connection *c, srv_req *rq, int status, int close,
                              const char *code, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
static enum MHD_Result refuse(tp_server *s, struct MHD_Connection *c, srv_req *rq, int status, int close,
                              const char *code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    rq->close = close;
    enum MHD_Result r = srv_send_error_v(s, c, rq, status, "invalid_request_error", code, NULL, fmt, ap);
    va_end(ap);
    return r;
}

/* What a 413 says: the route's own limit, or --max-body-bytes. */
static void over_limit(tp_server *s, const srv_req *rq, char *msg, size_t size) {
    if (rq->body_limit < (size_t)s->o.max_body_bytes)
        snprintf(msg, size, "the request body is over the limit of %zu bytes of %s", rq->body_limit, rq->route->path);
    else
        snprintf(msg, size, "the request body is over the limit of %ld bytes (--max-body-bytes)", s->o.max_body_bytes);
}

/* A chunked body ran past its limit (a Content-Length over it is refused on the headers): 413
 * now, and the connection closed, where the rest used to be read and dropped for as long as the
 * client sent, a /detokenize holding its share of the budget meanwhile (issue 41). libmicrohttpd
 * 0.9.75 queues no response while it reads a body (MHD_queue_response refuses outside the
 * header and whole-request states), so the answer is written on the socket (srv_conn_answer_now)
 * and MHD_NO makes libmicrohttpd close the connection. */
static enum MHD_Result too_large_now(tp_server *s, struct MHD_Connection *c, srv_req *rq) {
    rq->answered = 1;
    jb_free(&rq->body);
    pthread_mutex_lock(&s->mu);
    s->detok_held -= rq->detok; /* released now, not when the client stops sending */
    rq->detok = 0;
    srv_metrics_status(&s->met, 413);
    pthread_mutex_unlock(&s->mu);
    char msg[256];
    over_limit(s, rq, msg, sizeof msg);
    jbuf b = {0};
    srv_error_json(&b, msg, "invalid_request_error", NULL, "request_too_large");
    srv_conn_answer_now(s, c, 413, "application/json", b.s, b.n);
    jb_free(&b);
    return MHD_NO;
}

/* The route of (method, url), or NULL; *path_known: some route has that path (allow: its methods). */
static const srv_route *route_of(const char *method, const char *url, int *path_known, char *allow, size_t size) {
    *path_known = 0;
    allow[0] = 0;
    for (int i = 0; i < srv_n_routes; i++) {
        const srv_route *rt = &srv_routes[i];
        if (!srv_path_match(rt->path, url)) continue;
        size_t n = strlen(allow);
        snprintf(allow + n, size - n, "%s%s", *path_known ? ", " : "", rt->method);
        *path_known = 1;
        if (strcmp(rt->method, method) == 0) return rt;
    }
    return NULL;
}

/* The request line and headers are in, no byte of the body is read: everything its route's row
 * asks for is decided now (framing, route, method, API key, size, admission), so a request that
 * will be refused never has its body buffered. Returns MHD_YES to read the body (the route answers
 * at its end). */
static enum MHD_Result on_headers(tp_server *s, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, srv_req *rq) {
    char msg[256], allow[64];
    int has_body, path_known;
    long long cl;
    rq->answered = 1; /* unless the body is read below */
    int bad = srv_framing_error(c, version, &has_body, &cl, msg, sizeof msg);
    if (bad) return refuse(s, c, rq, bad, 1, bad == 501 ? "not_implemented" : "bad_framing", "%s", msg);
    rq->hold = !has_body;
    rq->length = cl;
    const srv_route *rt = route_of(method, url, &path_known, allow, sizeof allow);
    if (!path_known) {
        const char *hint = srv_route_hint(url);
        if (hint) return refuse(s, c, rq, 404, has_body, "not_found", "no route %s %s: %s", method, url, hint);
        return refuse(s, c, rq, 404, has_body, "not_found", "no route %s %s (see docs/SERVING.md)", method, url);
    }
    if (!rt) return refuse(s, c, rq, 405, has_body, "method_not_allowed", "%s %s: use %s", method, url, allow);
    rq->route = rt;
    rq->close = has_body; /* a body is read only by a body route that admits it, below */
    if (!rt->auth && rt->body_limit == SRV_NO_BODY) return rt->handler(s, c, rq); /* open: before the rest */
    if (rt->auth && srv_api_key_of(s, c) == -2)
        return refuse(s, c, rq, 401, has_body, "invalid_api_key",
                      "missing or wrong API key: send the header 'Authorization: Bearer KEY'");
    rq->body_limit = (size_t)s->o.max_body_bytes;
    if (cl > s->o.max_body_bytes) {
        over_limit(s, rq, msg, sizeof msg);
        return refuse(s, c, rq, 413, 1, "request_too_large", "%s", msg);
    }
    if (rt->body_limit == SRV_NO_BODY) return rt->handler(s, c, rq);
    if (rt->body_limit < rq->body_limit) rq->body_limit = rt->body_limit;
    if (cl > (long long)rq->body_limit) {
        over_limit(s, rq, msg, sizeof msg);
        return refuse(s, c, rq, 413, 1, "request_too_large", "%s", msg);
    }
    if (rt->admit) {
        enum MHD_Result r = rt->admit(s, c, rq);
        if (rq->replied || r == MHD_NO) return r;
    }
    rq->answered = 0;
    rq->close = 0;
    if (cl > 0) jb_reserve(&rq->body, (size_t)cl); /* the body's exact size, not a doubling */
    return MHD_YES;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    tp_server *s = cls;
    srv_req *rq = *con_cls;
    if (!rq) {
        rq = tp_calloc(1, sizeof *rq);
        *con_cls = rq;
        pthread_mutex_lock(&s->mu);
        s->open_requests++;
        pthread_mutex_unlock(&s->mu);
        srv_conn_head_done(s, c);
        return on_headers(s, c, url, method, version, rq);
    }
    if (rq->held) { /* answered on the headers, no body: queued now, the connection kept */
        srv_conn_body_done(s, c);
        struct MHD_Response *r = rq->held;
        rq->held = NULL;
        enum MHD_Result ok = MHD_queue_response(c, rq->held_status, r);
        MHD_destroy_response(r);
        return ok;
    }
    if (rq->answered) { /* refused on its headers: what libmicrohttpd still reads is dropped */
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size) {
        if (rq->body.n + *upload_size > rq->body_limit) return too_large_now(s, c, rq); /* chunked */
        jb_put(&rq->body, upload, *upload_size);
        srv_conn_body_bytes(s, c, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    /* the whole body is in */
    srv_conn_body_done(s, c);
    rq->answered = 1;
    rq->hold = 0;
    return rq->route->handler(s, c, rq);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode code) {
    (void)code;
    tp_server *s = cls;
    srv_conn_head_next(s, c);
    srv_req *rq = *con_cls;
    if (!rq) return;
    if (rq->held) MHD_destroy_response(rq->held);
    size_t detok = rq->detok;
    jb_free(&rq->body);
    free(rq);
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
    char canon[8][64] = {{0}}; /* the --trusted-proxy addresses, written as client.c writes a peer's */
    for (int i = 0; i < o->n_trusted_proxies; i++)
        if (srv_canonical_address(o->trusted_proxies[i], canon[i], sizeof canon[i])) {
            snprintf(err, err_size, "--trusted-proxy expects a numeric IPv4 or IPv6 address (the balancer's, as "
                     "this server sees it), got \"%s\"", o->trusted_proxies[i]);
            freeaddrinfo(ai);
            return NULL;
        }
    tp_server *s = tp_calloc(1, sizeof *s);
    s->o = *o;
    memcpy(s->trusted, canon, sizeof canon);
    for (int i = 0; i < o->n_trusted_proxies; i++) s->o.trusted_proxies[i] = s->trusted[i];
    s->tok = tok;
    pthread_mutex_init(&s->mu, NULL);
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
    pthread_cond_destroy(&s->engine_cv);
    free(s);
}
