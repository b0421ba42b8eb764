/* The server's shared state. Threads: libmicrohttpd runs one thread per connection (HTTP
 * threads: parse, validate, tokenize, enqueue, then wait and write); rank 0's main thread is the
 * engine thread (the only one that touches the model and makes MPI calls). They meet in
 * tp_server.mu: the inbox of new jobs, each job's published tokens/text and its condition
 * variable, the metrics. */
#ifndef TPGEN_SERVER_INTERNAL_H
#define TPGEN_SERVER_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include <microhttpd.h>

#include "sched/request_params.h"
#include "sched/scheduler.h"
#include "jbuf.h"
#include "metrics.h"
#include "serve.h"
#include "tokenizer/tokenizer.h"
#include "util/log.h"

#define SRV_MAX_N TP_REQ_MAX_N                /* choices per prompt: the table's `n` */
#define SRV_MAX_PROMPTS 64                    /* prompts per request */
#define SRV_MAX_LOGPROBS TP_REQ_API_LOGPROBS  /* the table's `logprobs` on the server */
/* A request body's JSON: at most 32 levels deep (a request needs 3), and a tree of at most 32
 * bytes per byte of body + 1 MiB (json_parse_limited), so one request's parse costs a bounded
 * multiple of its body. A value is 88 bytes of tree: a body over ~90 KB of 1-digit ids ("1,": 44
 * bytes of tree per byte) is refused; ids of 2 digits and more (29 per byte and less) never are. */
#define SRV_JSON_DEPTH 32
static inline size_t srv_json_budget(size_t body_bytes) { return 32 * body_bytes + ((size_t)1 << 20); }

/* POST /detokenize turns a few bytes of body into up to ~128 bytes of text per id (a token of
 * spaces), and more as JSON: one 8 MiB body of such ids made a 171 MiB response and +359 MiB on
 * rank 0, four at once +1.4 GiB (issue 34). So a request takes at most SRV_DETOK_MAX_IDS ids
 * (32 x the longest context of a CodeGen model) in a body of at most SRV_DETOK_MAX_BODY bytes
 * (413 on the headers), and every /detokenize in flight holds its memory against one budget of
 * SRV_DETOK_BUDGET bytes (503 + Retry-After beyond it): on its headers, the body and its parse
 * (srv_json_budget), then, decoded, its text, its JSON and libmicrohttpd's copy of it. At most
 * 1 + 33 + 3 x 8 MiB = 58 MiB per request (128-byte tokens), 256 MiB in all. */
#define SRV_DETOK_MAX_IDS 65536
#define SRV_DETOK_MAX_BODY ((size_t)1 << 20)
#define SRV_DETOK_BUDGET ((size_t)256 << 20)

typedef struct srv_job srv_job;

/* One generated sequence: the scheduler's request (r.user points back here) and what the engine
 * thread made of its events. */
typedef struct {
    tp_request r;          /* engine thread's while in flight; results readable up to n_pub */
    srv_job *job;          /* the job it is a choice of (set by the engine) */
    int prompt;            /* index into job->prompts */
    int stopped;           /* engine thread: a stop string matched, later tokens are not taken */
    tp_text_stream *ts;    /* its text (NULL without a tokenizer): detokenizer + the job's stop strings */
    /* published under mu */
    jbuf text;             /* final text (a stop string and what follows never in it) */
    size_t *tok_off;       /* [max_tokens] decoded bytes before each generated token */
    size_t dlen;           /* decoded bytes so far */
    int n_pub;             /* tokens the HTTP thread may read (at the end: the tokens of the answer) */
    int done;
    tp_finish finish;
} srv_choice;

typedef struct {
    int32_t *ids;
    int n;
    char *text;            /* the prompt as text (for echo): as given, or decoded */
    size_t text_len;
    size_t *tok_off;       /* [n] bytes of text before each prompt token */
    int fim;               /* a fill-in-the-middle prompt: echoed with its control tokens (docs/SERVING.md) */
    /* echo with logprobs: scored in the prefill of the prompt's first choice, moved here by the
     * engine thread (its TP_EV_SCORED event, under mu); NULL when cancelled before */
    float *lps;            /* [n], lps[0] = NaN */
    int32_t *top_ids;      /* [n, k] */
    float *top_lps;
} srv_prompt;

typedef struct srv_conn srv_conn; /* conns.c */

/* A client (peer address) and the sequences its requests hold, queued or running (under mu). */
typedef struct srv_client srv_client;
struct srv_client {
    char addr[64];
    int held;
    srv_client *next;
};

struct srv_job {
    char id[48];
    long created;
    double t_arrival, t_first;
    int n_prompts, n_choices, n; /* n choices per prompt */
    srv_prompt *prompts;
    srv_choice *ch;
    int stream, include_usage, echo, logprobs; /* logprobs: -1 none, else 0..5 */
    int return_token_ids; /* vLLM's extension: prompt_token_ids and token_ids in each choice */
    char client[64];      /* the peer's address: the unit of --max-seqs-per-client and of fair admission */
    int api_key;          /* the --api-key it came with (index), -1: none configured */
    int has_salt;         /* a cache_salt field was given */
    uint8_t salt_digest[32]; /* its SHA-256 (srv_sha256); zero without one */
    char *stops[TP_MAX_STOP];
    int n_stops;
    /* under mu */
    pthread_cond_t cv;
    int n_done;
    _Atomic int cancel;   /* the client went away: set by the HTTP thread (under mu) or by the
                           * engine thread's srv_conns_sweep (under conn_mu only, hence atomic) */
    int scored;           /* prompts scored (echo + logprobs), or not needed */
    int refs;             /* HTTP thread + engine thread */
    int status;           /* HTTP status it ended with (metrics) */
    srv_job *next;        /* inbox / the engine's active list */
};

struct tp_server {
    tp_serve_opts o;
    tp_tokenizer *tok;    /* NULL: ids only */
    struct MHD_Daemon *d;
    int port;
    pthread_mutex_t mu;
    pthread_cond_t engine_cv; /* new job or cancel */
    int ready, draining;
    char trusted[8][64];  /* o.trusted_proxies point here: canonical (srv_canonical_address) */
    int vocab, n_positions, kv_block_size, eos;
    srv_job *inbox, *inbox_tail;
    int n_jobs;           /* enqueued and not finished (for --max-queue) */
    int open_requests;    /* HTTP requests not yet fully answered (drain waits for them) */
    srv_metrics met;
    srv_client *clients;  /* under mu: sequences held (queued or running) per peer address */
    size_t detok_held;    /* under mu: bytes the /detokenize requests in flight hold (SRV_DETOK_BUDGET) */
    /* conns.c: the open connections and the watchdog of their header deadlines */
    pthread_mutex_t conn_mu;
    pthread_cond_t conns_cv;
    srv_conn *conns;
    pthread_t conns_thread;
    int conns_running, conns_stop;
};

/* Set by the SIGTERM/SIGINT handler (on whichever thread the signal lands), read by the HTTP
 * threads and the engine thread: an atomic, since volatile sig_atomic_t is only safe within one
 * thread (TSan reports the cross-thread read). A lock-free atomic int is async-signal-safe. */
extern _Atomic int srv_stop_signal;
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "srv_stop_signal must be lock-free to be set in a signal handler");

/* openai.c: the completions request (HTTP thread). Returns a job (refs 1) or NULL with the
 * status and OpenAI error written into err (a full error JSON body). */
srv_job *srv_parse_completion(tp_server *s, const char *body, size_t n, int *status, jbuf *err);
void srv_job_free(srv_job *j);
void srv_error_json(jbuf *b, const char *message, const char *type, const char *param, const char *code);
/* Response renderers (HTTP thread, under mu). */
void srv_render_completion(tp_server *s, srv_job *j, jbuf *b);
const char *srv_job_error(const srv_job *j); /* a choice failed in the engine: why, else NULL */
/* Appends SSE events for what is new since the last call; returns 1 when every choice's last
 * chunk is out. Per choice progress of this stream: sent_tok, sent_text, flags (1: finished,
 * 2: echo sent). */
int srv_render_stream(tp_server *s, srv_job *j, int *sent_tok, size_t *sent_text, int *flags, jbuf *b);
void srv_render_usage_chunk(tp_server *s, srv_job *j, jbuf *b);
/* A peer address as a 64-bit id (fair admission's client; not a boundary): FNV-1a, never 0. */
uint64_t srv_salt_of(const char *s, size_t n);
/* SHA-256 of [data, data + n) (libcrypto; scope.c) */
void srv_sha256(const void *data, size_t n, uint8_t out[32]);
/* The prefix-cache scope of a job's choices, by --prefix-cache-scope: its API key's (key: the
 * default; no keys, one scope), nobody's (shared: all zero) or its own (request: by serial, never
 * reused); its cache_salt always separates it further. Equal only for equal keys and salts. */
void srv_job_scope(const tp_server *s, const srv_job *j, uint64_t serial, tp_cache_scope *out);
/* finish_reason as the API writes it ("abort" for a cancelled request, as vLLM) */
const char *srv_finish_name(tp_finish f);

/* conns.c: a request's headers (and the wait for the next request) take at most --conn-timeout
 * seconds in all. srv_conns_notify is libmicrohttpd's MHD_OPTION_NOTIFY_CONNECTION callback. */
void srv_conns_start(tp_server *s);
void srv_conns_stop(tp_server *s); /* after MHD_stop_daemon */
void srv_conns_notify(void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode toe);
/* Its headers are in: the body phase starts. The body has --conn-timeout seconds free, and must
 * then have come at SRV_MIN_BODY_RATE bytes per second on average since, or the connection is cut
 * (a body trickled a byte a second held its slot for ever: issue 34). */
#define SRV_MIN_BODY_RATE 16384.0
void srv_conn_head_done(tp_server *s, struct MHD_Connection *c);
void srv_conn_body_bytes(tp_server *s, struct MHD_Connection *c, size_t n); /* n more body bytes */
void srv_conn_body_done(tp_server *s, struct MHD_Connection *c); /* the whole body is in */
void srv_conn_head_next(tp_server *s, struct MHD_Connection *c); /* answered: the next request's clock starts */
/* A completion in flight on c (under mu or not; lock order: mu, then conn_mu): srv_conns_sweep
 * sets j->cancel when the peer closed its end. srv_conn_unwatch(s, j) before the HTTP thread
 * releases j. srv_conns_sweep: the engine thread, once per step (one recv(MSG_PEEK) per
 * completion in flight). */
void srv_conn_watch(tp_server *s, struct MHD_Connection *c, srv_job *j);
void srv_conn_unwatch(tp_server *s, srv_job *j);
void srv_conns_sweep(tp_server *s);
/* An answer written on c's socket now and its sending side shut (libmicrohttpd queues none while
 * it reads a body); the access handler then returns MHD_NO, which closes the connection. */
void srv_conn_answer_now(tp_server *s, struct MHD_Connection *c, unsigned status, const char *type, const char *body,
                         size_t n);

/* framing.c: 0 when the request's framing is sound, else the status to refuse it with (400, or
 * 501 for a transfer coding tpgen does not implement) and why in msg. *has_body: a body follows
 * the headers; *cl: its Content-Length, -1 when none (chunked, or no body). */
int srv_framing_error(struct MHD_Connection *c, const char *version, int *has_body, long long *cl, char *msg,
                      size_t msg_size);

/* step_loop.c */
void srv_job_release(tp_server *s, srv_job *j); /* under mu */
/* under mu: j joins the engine's inbox (the HTTP thread and the engine hold it: refs 2), its
 * sequences count against its client's share and --max-queue, and the engine wakes */
void srv_job_enqueue(tp_server *s, srv_job *j);
/* *ts = now + ms on CLOCK_REALTIME, for pthread_cond_timedwait */
static inline void srv_deadline_in(struct timespec *ts, long ms) {
    if (clock_gettime(CLOCK_REALTIME, ts)) tp_die("clock_gettime: %s", strerror(errno));
    ts->tv_nsec += ms * 1000000L;
    while (ts->tv_nsec >= 1000000000L) { ts->tv_sec++; ts->tv_nsec -= 1000000000L; }
}
/* under mu: the sequences j->client holds (0 if none); srv_client_hold adds n (n < 0 releases). */
int srv_client_held(tp_server *s, const char *addr);
void srv_client_hold(tp_server *s, const char *addr, int n);

#endif
