/* tpgen serve: an OpenAI-compatible completions server on rank 0 (routes and fields:
 * docs/SERVING.md). HTTP threads (libmicrohttpd, one per connection) parse, validate, tokenize
 * and enqueue; rank 0's main thread runs the online scheduler (engine/sched/scheduler.h) and is the
 * only one that touches the model. */
#ifndef TPGEN_SERVER_SERVE_H
#define TPGEN_SERVER_SERVE_H

#include <stddef.h>

#include "tokenizer/fim.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

/* Which requests share prefix-cache hits (docs/SERVING.md, "Prefix cache and KV on demand"): a
 * request's cache_salt always separates it further. */
enum {
    TP_PREFIX_SCOPE_KEY = 0, /* requests of the same --api-key (all of them without keys) */
    TP_PREFIX_SCOPE_SHARED,  /* every request, whatever its key */
    TP_PREFIX_SCOPE_REQUEST, /* none: a request hits only its own blocks (its choices, its resumes) */
};

typedef struct {
    const char *host;     /* numeric address or name to bind */
    int port;             /* 0: a free port */
    const char *name;     /* served model name */
    const char *const *api_keys; /* [n_api_keys] accepted bearer keys (--api-key, repeatable); none: no auth */
    int n_api_keys;
    int max_queue;        /* requests in flight before 503 */
    long max_body_bytes;
    double drain_timeout; /* seconds */
    int conn_timeout;     /* seconds a client may stay silent (not reading, not sending); 0: none */
    int max_connections;  /* open at once; one more is closed as soon as accepted */
    int speculate_k, speculate_n; /* --speculate ngram:K:N for every request (0: off) */
    int max_seqs_per_client; /* sequences one peer address may hold, queued or running (429 beyond) */
    double request_timeout;  /* --request-timeout: seconds from arrival a request may take (0: none); also
                              * the largest per-request "timeout" */
    int priority_policy;     /* --scheduling-policy priority: 1 ("priority" orders the queue), 0 fcfs */
    const tp_fim *fim;    /* the model's fill-in-the-middle format (engine/tokenizer/fim.h); NULL: `suffix` is refused */
    int ignore_suffix;    /* --ignore-suffix: without a FIM format, `suffix` is ignored instead of refused */
    int prefix_scope;     /* --prefix-cache-scope: TP_PREFIX_SCOPE_* (who shares prefix-cache hits) */
    int max_connections_per_client; /* open at once from one peer address (0: half of max_connections) */
    const char *trusted_proxies[8]; /* --trusted-proxy ADDR (numeric): from these peers the client is the
                                     * last X-Forwarded-For entry (client.c) */
    int n_trusted_proxies;
} tp_serve_opts;

typedef struct tp_server tp_server;

/* SIGTERM, SIGINT and SIGUSR1 set a flag instead of killing (every rank: workers leave the
 * shutdown to rank 0, which drains and then stops them). SIGPIPE is ignored. */
void tp_serve_install_signals(void);

/* Rank 0: starts listening (health answers 503 until tp_server_run). tok may be NULL (ids only).
 * NULL with the reason in err when the address cannot be bound. */
tp_server *tp_server_start(const tp_serve_opts *o, tp_tokenizer *tok, char *err, size_t err_size);
int tp_server_port(const tp_server *s);
/* Rank 0: prints the ready line, serves until SIGTERM/SIGINT, drains (running requests finish
 * within the drain timeout, the rest are cancelled), and returns; the caller stops the workers. */
void tp_server_run(tp_server *s, tp_model *m);
void tp_server_free(tp_server *s); /* stops listening */

#endif
