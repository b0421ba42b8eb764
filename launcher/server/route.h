/* The contract between the HTTP transport (http.c: connections, framing, limits, bodies,
 * keep-alive, the answer's bytes) and the routes (routes.c: the table; each handler in its own
 * file or in routes.c). A route is one row of srv_routes and one handler; the transport decides
 * everything a row says before any body byte is read (docs/EXTENDING.md, "A new HTTP route"). */
#ifndef TPGEN_SERVER_ROUTE_H
#define TPGEN_SERVER_ROUTE_H

#include <stdarg.h>
#include <stddef.h>

#include <microhttpd.h>

#include "internal.h"
#include "jbuf.h"

typedef struct srv_route srv_route;

/* One request, from its headers to its answer (one per request; a keep-alive connection makes a
 * new one for each). The transport owns it; a handler reads body and may add to detok. */
typedef struct {
    const srv_route *route;
    jbuf body;            /* the whole body when the handler runs (empty for a route without one) */
    long long length;     /* its Content-Length, -1 when chunked or absent */
    size_t body_limit;    /* bytes of body it may have: --max-body-bytes, or less (the row's) */
    size_t detok;         /* bytes held against SRV_DETOK_BUDGET (under s->mu), released when it ends */
    int close;            /* the answer closes the connection (a body was announced and is not read) */
    int replied;          /* an answer is queued or held (srv_send) */
    /* transport only */
    int answered;         /* answered, or refused on the headers: later body bytes are dropped */
    /* An answer decided on the headers of a request without a body waits here for the access
     * handler's next call. libmicrohttpd 0.9.75 takes a response queued on the first call (the
     * headers only) as an early one and closes the connection after it, whatever the method: 50
     * pipelined GET /health got one answer (issue 34). Queued on the second call (the end of an
     * empty body) it keeps the connection alive. */
    int hold;
    struct MHD_Response *held;
    unsigned held_status;
} srv_req;

/* Answers the request, or (admit) decides on the headers whether its body may be read: an admit
 * that refuses answers with srv_send_error; one that admits sends nothing. MHD_NO drops the
 * connection without an answer. */
typedef enum MHD_Result (*srv_handler)(tp_server *s, struct MHD_Connection *c, srv_req *rq);

#define SRV_NO_BODY 0              /* answered on its headers; a body, if any, is never read */
#define SRV_BODY_MAX ((size_t)-1)  /* takes a body of up to --max-body-bytes */

struct srv_route {
    const char *method;   /* "GET" or "POST" */
    const char *path;     /* exact; a segment "{name}" matches any one non-empty segment */
    srv_handler handler;
    size_t body_limit;    /* SRV_NO_BODY, SRV_BODY_MAX, or bytes (at most --max-body-bytes too) */
    int auth;             /* 1: behind --api-key (401 on the headers); 0: open, and answered before
                           * any other check (health probes and metrics scrapes always work) */
    srv_handler admit;    /* optional, body routes: on the headers, after the limits (e.g. a budget) */
};

/* routes.c */
extern const srv_route srv_routes[];
extern const int srv_n_routes;
int srv_path_match(const char *pattern, const char *path); /* 1: path is one the pattern names */
const char *srv_route_hint(const char *path); /* why an unknown path is not served, or NULL */

/* The handlers (completions.c, tokens.c). */
enum MHD_Result srv_route_completions(tp_server *s, struct MHD_Connection *c, srv_req *rq);
enum MHD_Result srv_route_tokenize(tp_server *s, struct MHD_Connection *c, srv_req *rq);
enum MHD_Result srv_route_detokenize(tp_server *s, struct MHD_Connection *c, srv_req *rq);
enum MHD_Result srv_detok_admit(tp_server *s, struct MHD_Connection *c, srv_req *rq); /* its budget */

/* reply.c: answers. srv_send queues b (freed) with status, or holds it (rq->hold); count: the
 * status counts in /metrics. srv_send_error: an OpenAI error object. */
enum MHD_Result srv_send(tp_server *s, struct MHD_Connection *c, srv_req *rq, int status, const char *type, jbuf *b,
                         int count);
enum MHD_Result srv_send_error(tp_server *s, struct MHD_Connection *c, srv_req *rq, int status, const char *type,
                               const char *code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 8, 9)));
enum MHD_Result srv_send_error_v(tp_server *s, struct MHD_Connection *c, srv_req *rq, int status, const char *type,
                                 const char *code, const char *param, const char *fmt, va_list ap);
/* The --api-key the request's bearer key is: its index; -1 when none is configured (every
 * request passes), -2 when the key is missing or matches none. */
int srv_api_key_of(tp_server *s, struct MHD_Connection *c);
/* client.c: the client's numeric address ("127.0.0.1", "::1"): who holds what
 * (--max-seqs-per-client). The peer's, or from a --trusted-proxy the last X-Forwarded-For entry. */
void srv_client_address(tp_server *s, struct MHD_Connection *c, char *out, size_t size);
/* text, a numeric IPv4 or IPv6 address, in the form srv_client_address writes (an IPv4-mapped
 * IPv6 address as IPv4); -1 when it is not one. */
int srv_canonical_address(const char *text, char *out, size_t size);
/* on 0: libmicrohttpd's --conn-timeout clock paused while the server makes the client wait. */
void srv_client_timer(tp_server *s, struct MHD_Connection *c, int on);

#endif
