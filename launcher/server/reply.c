/* An answer's bytes and status, for the transport (http.c) and the route handlers alike: a JSON
 * body or error object queued with libmicrohttpd (or held, route.h), the client's API key (its
 * address: client.c), and the --conn-timeout clock around the waits a completion makes. */
#include <stdarg.h>
#include <microhttpd.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "route.h"

/* --conn-timeout limits how long a client may stay silent, not how long the server makes it
 * wait: while a completion waits for the engine (its answer, or a stream's next tokens) the
 * connection's timer is paused. libmicrohttpd restarts the timer when a timeout is set on a
 * connection whose timeout is 0 (microhttpd.h, MHD_CONNECTION_OPTION_TIMEOUT). */
void srv_client_timer(tp_server *s, struct MHD_Connection *c, int on) {
    if (!s->o.conn_timeout) return;
    unsigned secs = on ? (unsigned)s->o.conn_timeout : 0u;
    if (MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, secs) != MHD_YES)
        fprintf(stderr, "tpgen: warning: libmicrohttpd refused to %s a connection's timeout\n",
                on ? "restart" : "pause");
}

/* rq->close: the connection ends after this response (its request's framing cannot be trusted,
 * or its body was never read). */
enum MHD_Result srv_send(tp_server *s, struct MHD_Connection *c, srv_req *rq, int status, const char *type, jbuf *b,
                         int count) {
    rq->replied = 1;
    struct MHD_Response *r = MHD_create_response_from_buffer(b->n, b->s ? b->s : "", MHD_RESPMEM_MUST_COPY);
    jb_free(b);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    pthread_mutex_lock(&s->mu);
    if (s->draining || rq->close) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    if (count) srv_metrics_status(&s->met, status);
    pthread_mutex_unlock(&s->mu);
    if (status == 503) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (status == 405) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, POST");
    if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (status == 429) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (rq->hold && !rq->close) { /* queued at the handler's next call */
        rq->held = r;
        rq->held_status = (unsigned)status;
        return MHD_YES;
    }
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}

enum MHD_Result srv_send_error_v(tp_server *s, struct MHD_Connection *c, srv_req *rq, int status, const char *type,
                                 const char *code, const char *param, const char *fmt, va_list ap) {
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    jbuf b = {0};
    srv_error_json(&b, msg, type, param, code);
    return srv_send(s, c, rq, status, "application/json", &b, 1);
}

enum MHD_Result srv_send_error(tp_server *s, struct MHD_Connection *c, srv_req *rq, int status, const char *type,
                               const char *code, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    enum MHD_Result r = srv_send_error_v(s, c, rq, status, type, code, param, fmt, ap);
    va_end(ap);
    return r;
}

int srv_api_key_of(tp_server *s, struct MHD_Connection *c) {
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
