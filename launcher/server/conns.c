/* The TCP connections, for the one limit libmicrohttpd 0.9.75 does not keep: how long a request's
 * headers may take in all. Its connection timeout (--conn-timeout) bounds the silence between
 * two bytes, so a client trickling a header byte every few seconds held its connection (and a
 * --max-connections slot) forever; twelve of them kept fresh clients out. Here each connection
 * has a deadline while it is between requests or in its headers: --conn-timeout seconds from
 * its start or from its last answer. A watchdog thread shuts down the socket of a connection
 * past its deadline; libmicrohttpd then sees the end of the stream and closes it.
 *
 * The same registry tells the engine which clients left (srv_conns_sweep). libmicrohttpd notices
 * a closed connection only when it reads or writes it, and it does neither while a completion
 * waits for the engine: a client that closed before the first byte of its answer held its
 * sequences until then. The HTTP threads polled each 100 ms, longer than a whole prefill on fast
 * hardware. Now a completion's job is attached to its connection while it is in flight, and the
 * engine thread looks at every such connection once per step: a peer that closed its end (a read
 * would see EOF, or the socket has an error) has its job cancelled before the next step. A
 * keep-alive client that already sent its next request is not gone: the peek sees its bytes. A
 * client that shuts down only its sending side after a request (a half-close) counts as gone,
 * as it did before. */
#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "util/log.h"

struct srv_conn {
    srv_conn *prev, *next;
    int fd;
    int in_head;     /* between requests or in a request's headers: the deadline applies */
    double deadline; /* tp_now_seconds() */
    int in_body;     /* reading a request's body: the minimum rate applies */
    double body_t0;  /* when its headers were in */
    double body_got; /* body bytes so far */
    int cut;         /* shut down by the watchdog */
    srv_job *job;    /* the completion in flight on it (srv_conn_watch), else NULL */
};

static srv_conn *conn_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

void srv_conns_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                      enum MHD_ConnectionNotificationCode toe) {
    tp_server *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        srv_conn *k = tp_calloc(1, sizeof *k);
        k->fd = ci ? ci->connect_fd : -1;
        k->in_head = 1;
        k->deadline = tp_now_seconds() + s->o.conn_timeout;
        pthread_mutex_lock(&s->conn_mu);
        k->next = s->conns;
        if (s->conns) s->conns->prev = k;
        s->conns = k;
        pthread_mutex_unlock(&s->conn_mu);
        *socket_context = k;
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        /* before libmicrohttpd closes the socket: the watchdog never touches a reused fd */
        srv_conn *k = *socket_context;
        pthread_mutex_lock(&s->conn_mu);
        if (k->prev) k->prev->next = k->next;
        else s->conns = k->next;
        if (k->next) k->next->prev = k->prev;
        pthread_mutex_unlock(&s->conn_mu);
        free(k);
        *socket_context = NULL;
    }
}

void srv_conn_head_done(tp_server *s, struct MHD_Connection *c) {
    srv_conn *k = conn_of(c);
    if (!k) return;
    pthread_mutex_lock(&s->conn_mu);
    k->in_head = 0;
    k->in_body = 1;
    k->body_t0 = tp_now_seconds();
    k->body_got = 0;
    pthread_mutex_unlock(&s->conn_mu);
}

void srv_conn_body_bytes(tp_server *s, struct MHD_Connection *c, size_t n) {
    srv_conn *k = conn_of(c);
    if (!k) return;
    pthread_mutex_lock(&s->conn_mu);
    k->body_got += (double)n;
    pthread_mutex_unlock(&s->conn_mu);
}

void srv_conn_body_done(tp_server *s, struct MHD_Connection *c) {
    srv_conn *k = conn_of(c);
    if (!k) return;
    pthread_mutex_lock(&s->conn_mu);
    k->in_body = 0;
    pthread_mutex_unlock(&s->conn_mu);
}

void srv_conn_head_next(tp_server *s, struct MHD_Connection *c) {
    srv_conn *k = conn_of(c);
    if (!k) return;
    pthread_mutex_lock(&s->conn_mu);
    k->in_head = 1;
    k->in_body = 0;
    k->deadline = tp_now_seconds() + s->o.conn_timeout;
    pthread_mutex_unlock(&s->conn_mu);
}

/* A read of fd would see EOF (the peer closed its end) or an error. */
static int fd_gone(int fd) {
    char b;
    ssize_t r = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

void srv_conn_watch(tp_server *s, struct MHD_Connection *c, srv_job *j) {
    srv_conn *k = conn_of(c);
    if (!k) return;
    pthread_mutex_lock(&s->conn_mu);
    k->job = j;
    pthread_mutex_unlock(&s->conn_mu);
}

void srv_conn_unwatch(tp_server *s, srv_job *j) {
    pthread_mutex_lock(&s->conn_mu);
    for (srv_conn *k = s->conns; k; k = k->next)
        if (k->job == j) k->job = NULL;
    pthread_mutex_unlock(&s->conn_mu);
}

/* Only fds of connections still registered are read, under conn_mu: libmicrohttpd unregisters a
 * connection (NOTIFY_CLOSED) before it closes its socket, so a reused fd number is never peeked
 * at. A job here is alive: its HTTP thread unwatches it before releasing its reference. */
void srv_conns_sweep(tp_server *s) {
    pthread_mutex_lock(&s->conn_mu);
    for (srv_conn *k = s->conns; k; k = k->next)
        if (k->job && k->fd >= 0 && !k->job->cancel && fd_gone(k->fd)) k->job->cancel = 1;
    pthread_mutex_unlock(&s->conn_mu);
}

static void *watchdog(void *arg) {
    tp_server *s = arg;
    pthread_mutex_lock(&s->conn_mu);
    while (!s->conns_stop) {
        double now = tp_now_seconds();
        for (srv_conn *k = s->conns; k; k = k->next) {
            double late = now - k->body_t0 - s->o.conn_timeout; /* seconds past the body's free time */
            int slow_body = k->in_body && late > 0 && k->body_got < SRV_MIN_BODY_RATE * late;
            if ((k->in_head && now > k->deadline) || slow_body) {
                if (k->cut || k->fd < 0) continue;
                k->cut = 1;
                /* ENOTCONN: the peer is already gone; libmicrohttpd closes it anyway */
                if (shutdown(k->fd, SHUT_RDWR) && errno != ENOTCONN)
                    fprintf(stderr, "tpgen: warning: shutdown of a connection past its %s deadline: %s\n",
                            slow_body ? "body" : "header", strerror(errno));
            }
        }
        struct timespec ts;
        srv_deadline_in(&ts, 200); /* the deadline is kept to within 0.2 s */
        pthread_cond_timedwait(&s->conns_cv, &s->conn_mu, &ts);
    }
    pthread_mutex_unlock(&s->conn_mu);
    return NULL;
}

void srv_conns_start(tp_server *s) {
    pthread_mutex_init(&s->conn_mu, NULL);
    pthread_cond_init(&s->conns_cv, NULL);
    if (!s->o.conn_timeout) return;
    int rc = pthread_create(&s->conns_thread, NULL, watchdog, s);
    if (rc) tp_die("pthread_create (connection watchdog): %s", strerror(rc));
    s->conns_running = 1;
}

void srv_conns_stop(tp_server *s) {
    if (s->conns_running) {
        pthread_mutex_lock(&s->conn_mu);
        s->conns_stop = 1;
        pthread_cond_signal(&s->conns_cv);
        pthread_mutex_unlock(&s->conn_mu);
        int rc = pthread_join(s->conns_thread, NULL);
        if (rc) tp_die("pthread_join (connection watchdog): %s", strerror(rc));
    }
    pthread_mutex_destroy(&s->conn_mu);
    pthread_cond_destroy(&s->conns_cv);
}
