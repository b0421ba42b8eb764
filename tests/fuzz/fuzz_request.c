/* Fuzz target: whole requests, in one process. A completions body goes the way an HTTP thread
 * sends it: srv_parse_completion (launcher/server/openai.c), the server's inbox, the server's own engine
 * loop (tp_server_run, launcher/server/step_loop.c: scoring, the scheduler, the sampler, the events that
 * publish tokens and text), then the response renderer, on the real tiny model
 * (models/codegen-tiny-py, with its tokenizer), loaded once. One rank (TP 1): MPI is a
 * singleton, and tp_server_run runs on a thread of its own, the only one that makes MPI calls
 * while it runs (MPI_THREAD_SERIALIZED); no HTTP listener is started.
 *
 * The first byte picks the server's options: bit 0 prompt-lookup speculation (ngram:4:2, as
 * `--speculate`) for every request; bit 1 a second request, the body's first prompt + 1..8 more
 * ids (bits 4-6: how many - 1), is sent once the first has a token out (or ended): it shares the
 * first's cached prefix blocks, in use or left by a cancel; bit 2 the request is
 * cancelled as soon as the engine admits it, before its first token (the prefill runs in chunks
 * of --max-batch-tokens 16, so mostly mid-prefill, as srv_conns_sweep does for a client that
 * left). The rest is the body. The KV pool is small (FUZZ_KV_TOKENS): requests run side by side
 * get preempted. A greedy request runs again alone without speculation and with the prefix cache
 * off (--no-prefix-cache): every choice that ran to its end must give the same ids and end.
 *
 * A refused body must get OpenAI's error object (as fuzz_server_request checks). An accepted
 * one runs when its work is small (each input stays fast: at most FUZZ_MAX_GEN tokens generated
 * and FUZZ_MAX_PROMPT prompt tokens over all its choices; bigger ones are validated only), and
 * then must: finish every choice ("stop" or "length", never "error": a request the server
 * accepts must be one the engine can serve), generate at most max_tokens ids, each in the
 * vocabulary, stop early only on EOS (not before min_tokens, unless ignore_eos) or a stop
 * string, give finite log-probabilities <= 0, render to valid JSON whose choices and usage
 * agree with what the engine made (the stream: every event valid JSON, each choice's text pieces
 * adding up to the text of the whole response, and [DONE] last), and give every KV block back
 * (at idle free + cached == total). */
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/step.h"
#include "launcher/job.h"
#include "launcher/server/internal.h"
#include "util/json.h"
#include "util/log.h"
#include "tests/fuzz/fuzz_common.h"

#define FUZZ_MAX_GEN 32     /* sum of max_tokens over the choices of a request that runs */
#define FUZZ_MAX_PROMPT 128 /* sum of prompt tokens over its choices (and prompts scored for echo) */
#define FUZZ_WAIT_S 60.0    /* a request not done by then is a hang */
/* the KV pool: 11 blocks of 16, room for any one sequence that runs (<= 128 + 32 tokens: 10
 * blocks), not for two such */
#define FUZZ_KV_TOKENS "176"
enum { FUZZ_SPECULATE = 1, FUZZ_SHARE = 2, FUZZ_CANCEL = 4 };

static tp_comm *g_mpi;
static tp_job g_job;
static tp_tokenizer *g_tok;
static tp_server g_srv;
static pthread_t g_engine;

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "fuzz_request: %s:%d: %s: ", __FILE__, __LINE__, #cond);       \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

static void *engine_main(void *arg) {
    (void)arg;
    tp_server_run(&g_srv, &g_job.m);
    return NULL;
}

/* At exit (libFuzzer's and the replay driver's): drain the engine loop, stop the step loop,
 * free the model, MPI_Finalize. */
static long g_mid_prefill; /* choices cancelled before their first token (waiting, or mid-prefill) */

static void shutdown_engine(void) {
    /* what the inputs reached (the replay test's log): cancels mid-prefill, preemptions, prefix hits */
    fprintf(stderr, "fuzz_request: %ld choices cancelled before their first token, %ld preemptions, %ld prompt tokens from the prefix cache\n",
            g_mid_prefill, g_srv.met.preemptions, g_srv.met.prefix_hit_tokens);
    srv_stop_signal = 1;
    pthread_mutex_lock(&g_srv.mu);
    pthread_cond_signal(&g_srv.engine_cv);
    pthread_mutex_unlock(&g_srv.mu);
    pthread_join(g_engine, NULL);
    tp_step_stop(&g_job.m);
    tp_job_close(&g_job);
    tp_tokenizer_free(g_tok);
    tp_comm_finalize(g_mpi);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS ||
        provided < MPI_THREAD_SERIALIZED) {
        fprintf(stderr, "fuzz_request: MPI_Init_thread(SERIALIZED) failed (provided %d)\n", provided);
        abort();
    }
    g_mpi = tp_comm_mpi_init(argc, argv); /* MPI is up: rank discovery and the exit hooks */
    if (g_mpi->size != 1) {
        fprintf(stderr, "fuzz_request: runs as one rank, not %d\n", g_mpi->size);
        abort();
    }
    /* the model as `tpgen serve` loads it, with a small KV pool and prefill in chunks */
    char *flags[] = {"--model", TPGEN_FUZZ_MODEL_DIR, "--backend", "cpu", "--threads", "1", "--max-batch", "8",
                     "--max-batch-tokens", "16", "--kv-cache-tokens", FUZZ_KV_TOKENS};
    tp_args a;
    tp_args_parse(&a, "serve", (int)(sizeof flags / sizeof *flags), flags);
    g_tok = fuzz_tokenizer("fuzz_request", TPGEN_FUZZ_MODEL_DIR);
    tp_job_open(&g_job, g_mpi, &a);
    tp_job_alloc(&g_job, &a, a.kv_cache_tokens);

    tp_server *s = &g_srv; /* what tp_server_start sets, without the listener */
    s->o.name = "codegen-tiny-py";
    s->o.host = "fuzz";
    s->o.drain_timeout = FUZZ_WAIT_S;
    s->o.max_seqs_per_client = 1024; /* checked by the HTTP thread only */
    s->tok = g_tok;
    pthread_mutex_init(&s->tok_mu, NULL);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->engine_cv, NULL);
    if (pthread_create(&g_engine, NULL, engine_main, NULL)) {
        fprintf(stderr, "fuzz_request: pthread_create failed\n");
        abort();
    }
    pthread_mutex_lock(&s->mu); /* tp_server_run sets the limits from the model, then ready */
    while (!s->ready) {
        pthread_mutex_unlock(&s->mu);
        nanosleep(&(struct timespec){0, 1000000}, NULL);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    atexit(shutdown_engine);
    return 0;
}

static int null_or_string(const json_value *v) { return v && (v->type == JSON_NULL || v->type == JSON_STRING); }

static void check_error(int status, const jbuf *err) {
    CHECK(status == 400 || status == 404, "status %d", status);
    char perr[256];
    json_value *root = json_parse(err->s, err->n, perr, sizeof perr);
    CHECK(root && root->type == JSON_OBJECT, "error body not JSON: %s", perr);
    const json_value *e = json_get(root, "error");
    CHECK(e && e->type == JSON_OBJECT, "no error object");
    const json_value *m = json_get(e, "message"), *t = json_get(e, "type");
    CHECK(m && m->type == JSON_STRING && m->str_len > 0, "no message");
    CHECK(t && t->type == JSON_STRING && strcmp(t->str, "invalid_request_error") == 0, "type");
    CHECK(null_or_string(json_get(e, "param")) && null_or_string(json_get(e, "code")), "param/code");
    json_free(root);
}

/* Small enough to run (the rest of the accepted requests are validated only). */
static int small(const srv_job *j) {
    long gen = 0, prompt = 0;
    for (int i = 0; i < j->n_choices; i++) {
        gen += j->ch[i].r.params.max_new_tokens;
        prompt += j->ch[i].r.n_prompt;
    }
    if (!j->scored) /* echo + logprobs: every prompt position is scored too */
        for (int p = 0; p < j->n_prompts; p++) prompt += j->prompts[p].n;
    return gen <= FUZZ_MAX_GEN && prompt <= FUZZ_MAX_PROMPT;
}

/* A choice's text is its ids decoded at once (special tokens skipped; ids past the tokenizer's
 * vocabulary, which the model's padded one allows, decode to nothing, as in HF), cut before the
 * first stop string in it: what the engine decoded and matched token by token must agree, however
 * the choice ended (EOS, length, or the stop string). */
static void check_text(const srv_job *j, int i) {
    const srv_choice *c = &j->ch[i];
    const int nv = tp_tokenizer_vocab_size(g_tok);
    int32_t *ids = malloc(((size_t)c->r.n_ids + 1) * sizeof(int32_t));
    CHECK(ids, "malloc");
    size_t n = 0;
    for (int k = 0; k < c->r.n_ids; k++)
        if (c->r.ids[k] < nv) ids[n++] = c->r.ids[k];
    char *text = NULL, err[256];
    size_t len = 0;
    CHECK(tp_tokenizer_decode(g_tok, ids, n, 1, &text, &len, err, sizeof err) == 0, "decode: %s", err);
    size_t want = len;
    for (int k = 0; k < j->n_stops; k++) {
        const char *at = memmem(text, len, j->stops[k], strlen(j->stops[k]));
        if (at && (size_t)(at - text) < want) want = (size_t)(at - text);
    }
    CHECK(c->text.n == want && (want == 0 || memcmp(c->text.s, text, want) == 0),
          "choice %d (finish %s, %d ids): its text is %zu bytes, its ids decode to %zu (%zu before a stop string)",
          i, srv_finish_name(c->finish), c->r.n_ids, c->text.n, len, want);
    free(text);
    free(ids);
}

/* The engine's result of each choice (read after the job is done: nothing writes it then). */
static void check_choices(const tp_server *s, const srv_job *j, int cancelled) {
    const tp_model *m = &g_job.m;
    for (int i = 0; i < j->n_choices; i++) {
        const srv_choice *c = &j->ch[i];
        const tp_request *r = &c->r;
        CHECK(c->done && c->finish != TP_FINISH_NONE, "choice %d not finished", i);
        CHECK(c->finish != TP_FINISH_ERROR, "choice %d: the engine failed on an accepted request: %s", i, r->error);
        /* "timeout" only for a request that asked for a budget (its "timeout" field),
         * "cancelled" only for one cancelled */
        CHECK(c->finish == TP_FINISH_STOP || c->finish == TP_FINISH_LENGTH ||
                  (c->finish == TP_FINISH_TIMEOUT && r->params.timeout_s > 0) ||
                  (c->finish == TP_FINISH_CANCELLED && cancelled),
              "choice %d finish %s", i, srv_finish_name(c->finish));
        /* every token published; fewer only when a stop string matched inside a speculative step's
         * accepted drafts (the engine takes none after it) */
        CHECK(c->n_pub == r->n_ids || (c->n_pub < r->n_ids && c->stopped && c->finish == TP_FINISH_STOP),
              "choice %d: %d published of %d", i, c->n_pub, r->n_ids);
        CHECK(r->n_ids >= 0 && r->n_ids <= r->params.max_new_tokens, "choice %d: %d ids, max_tokens %d", i, r->n_ids,
              r->params.max_new_tokens);
        for (int k = 0; k < r->n_ids; k++) CHECK(r->ids[k] >= 0 && r->ids[k] < s->vocab, "id %d", r->ids[k]);
        const int full = r->n_prompt + r->n_ids >= m->cfg.n_positions;
        if (c->finish == TP_FINISH_LENGTH) {
            CHECK(r->n_ids == r->params.max_new_tokens || full, "choice %d: length after %d of %d", i, r->n_ids, r->params.max_new_tokens);
        } else if (c->finish == TP_FINISH_STOP && !j->n_stops) { /* stopped by EOS, never masked: not before min_tokens */
            CHECK(r->n_ids >= 1 && !r->params.ignore_eos && r->ids[r->n_ids - 1] == s->eos, "choice %d: stop without EOS", i);
            CHECK(r->n_ids > r->params.min_tokens, "choice %d: EOS after %d tokens, min_tokens %d", i, r->n_ids - 1,
                  r->params.min_tokens);
        }
        check_text(j, i);
        if (j->logprobs >= 0)
            for (int k = 0; k < r->n_ids; k++)
                CHECK(isfinite(r->logprobs[k]) && r->logprobs[k] <= 1e-4f, "choice %d logprob[%d] %g", i, k,
                      r->logprobs[k]);
    }
    for (int p = 0; p < j->n_prompts && j->echo && j->logprobs >= 0; p++)
        for (int k = 1; k < j->prompts[p].n; k++)
            CHECK(isfinite(j->prompts[p].lps[k]) && j->prompts[p].lps[k] <= 1e-4f, "prompt %d logprob[%d] %g", p, k,
                  j->prompts[p].lps[k]);
}

static long get_int(const json_value *o, const char *key) {
    const json_value *v = json_get(o, key);
    CHECK(v && v->type == JSON_NUMBER, "no number '%s'", key);
    return (long)v->number;
}

/* The text a choice's response carries: the prompt when echoed, then what it generated. */
static void expected_text(const srv_job *j, int i, jbuf *t) {
    const srv_prompt *p = &j->prompts[j->ch[i].prompt];
    if (j->echo) jb_put(t, p->text ? p->text : "", p->text_len);
    jb_put(t, j->ch[i].text.s ? j->ch[i].text.s : "", j->ch[i].text.n);
}

static void check_usage(const srv_job *j, const json_value *u) {
    long pt = 0, ct = 0;
    for (int p = 0; p < j->n_prompts; p++) pt += j->prompts[p].n;
    for (int i = 0; i < j->n_choices; i++) ct += j->ch[i].n_pub;
    CHECK(u && u->type == JSON_OBJECT, "no usage");
    CHECK(get_int(u, "prompt_tokens") == pt && get_int(u, "completion_tokens") == ct &&
          get_int(u, "total_tokens") == pt + ct, "usage disagrees with the engine");
}

static void check_completion(tp_server *s, srv_job *j) {
    jbuf b = {0};
    pthread_mutex_lock(&s->mu);
    srv_render_completion(s, j, &b);
    pthread_mutex_unlock(&s->mu);
    char perr[256];
    json_value *root = json_parse(b.s, b.n, perr, sizeof perr);
    CHECK(root && root->type == JSON_OBJECT, "response not JSON: %s", perr);
    const json_value *ch = json_get(root, "choices");
    CHECK(ch && ch->type == JSON_ARRAY && (int)ch->n == j->n_choices, "choices");
    for (int i = 0; i < j->n_choices; i++) {
        const json_value *c = &ch->items[i], *t = json_get(c, "text"), *f = json_get(c, "finish_reason");
        CHECK(get_int(c, "index") == i, "index");
        jbuf want = {0};
        expected_text(j, i, &want);
        CHECK(t && t->type == JSON_STRING && t->str_len == want.n && memcmp(t->str, want.s, want.n) == 0,
              "choice %d text is not the prompt (echo) and the generated text", i);
        jb_free(&want);
        CHECK(f && f->type == JSON_STRING && strcmp(f->str, srv_finish_name(j->ch[i].finish)) == 0, "finish_reason");
        const json_value *ids = json_get(c, "token_ids");
        if (j->return_token_ids) {
            CHECK(ids && ids->type == JSON_ARRAY && (int)ids->n == j->ch[i].n_pub, "token_ids");
            for (int k = 0; k < j->ch[i].n_pub; k++) CHECK(ids->items[k].integer == j->ch[i].r.ids[k], "token id");
        }
    }
    check_usage(j, json_get(root, "usage"));
    json_free(root);
    jb_free(&b);
}

/* The whole SSE stream of a finished job: every event valid JSON, pieces adding up. */
static void check_stream(tp_server *s, srv_job *j) {
    int *sent_tok = calloc(j->n_choices, sizeof(int)), *flags = calloc(j->n_choices, sizeof(int));
    size_t *sent_text = calloc(j->n_choices, sizeof(size_t));
    jbuf *text = calloc(j->n_choices, sizeof(jbuf));
    CHECK(sent_tok && flags && sent_text && text, "calloc");
    jbuf b = {0};
    pthread_mutex_lock(&s->mu);
    int all = 0;
    for (int round = 0; round < 4 && !all; round++) all = srv_render_stream(s, j, sent_tok, sent_text, flags, &b);
    CHECK(all, "the stream of a finished job does not end");
    if (j->include_usage) srv_render_usage_chunk(s, j, &b);
    pthread_mutex_unlock(&s->mu);
    int usage_seen = 0;
    for (size_t at = 0; at < b.n;) {
        CHECK(b.n - at > 6 && memcmp(b.s + at, "data: ", 6) == 0, "event without 'data: '");
        const char *end = memmem(b.s + at, b.n - at, "\n\n", 2);
        CHECK(end, "event without its blank line");
        const char *ev = b.s + at + 6;
        const size_t n = (size_t)(end - ev);
        char perr[256];
        json_value *e = json_parse(ev, n, perr, sizeof perr);
        CHECK(e && e->type == JSON_OBJECT, "event not JSON: %s: %.*s", perr, (int)(n < 200 ? n : 200), ev);
        const json_value *ch = json_get(e, "choices"), *u = json_get(e, "usage");
        CHECK(ch && ch->type == JSON_ARRAY, "event without choices");
        if (ch->n == 0) { /* the usage chunk */
            CHECK(j->include_usage && !usage_seen, "a chunk without choices");
            check_usage(j, u);
            usage_seen = 1;
        }
        for (size_t k = 0; k < ch->n; k++) {
            const long i = get_int(&ch->items[k], "index");
            const json_value *t = json_get(&ch->items[k], "text");
            CHECK(i >= 0 && i < j->n_choices && t && t->type == JSON_STRING, "chunk choice");
            jb_put(&text[i], t->str, t->str_len);
        }
        json_free(e);
        at = (size_t)(end - b.s) + 2;
    }
    CHECK(usage_seen == j->include_usage, "usage chunk");
    for (int i = 0; i < j->n_choices; i++) {
        jbuf want = {0};
        expected_text(j, i, &want);
        CHECK(text[i].n == want.n && (want.n == 0 || memcmp(text[i].s, want.s, want.n) == 0),
              "choice %d: the stream's text pieces (%zu bytes) are not the response's text (%zu bytes)", i, text[i].n,
              want.n);
        jb_free(&want);
        jb_free(&text[i]);
    }
    free(text); free(sent_tok); free(flags); free(sent_text);
    jb_free(&b);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* As the HTTP thread does (launcher/server/http.c: completions): enqueue, wake the engine, then wait. */
static void enqueue_job(tp_server *s, srv_job *j) {
    pthread_mutex_lock(&s->mu);
    snprintf(j->client, sizeof j->client, "fuzz");
    srv_job_enqueue(s, j);
    pthread_mutex_unlock(&s->mu);
}

static void wait_job(tp_server *s, srv_job *j) {
    const double t0 = now_s();
    pthread_mutex_lock(&s->mu);
    while (!(j->scored && j->n_done == j->n_choices)) {
        CHECK(now_s() - t0 < FUZZ_WAIT_S, "request not done after %.0f s (%d of %d choices)", FUZZ_WAIT_S, j->n_done,
              j->n_choices);
        struct timespec ts;
        srv_deadline_in(&ts, 50);
        pthread_cond_timedwait(&j->cv, &s->mu, &ts);
    }
    pthread_mutex_unlock(&s->mu);
}

/* Whether a token of j is out, or j ended. Under s->mu. */
static int started_or_done(const srv_job *j) {
    int pub = 0;
    for (int i = 0; i < j->n_choices; i++) pub += j->ch[i].n_pub;
    return pub || j->n_done == j->n_choices;
}

/* Until a token of j is out, or j ended. */
static void wait_started(tp_server *s, srv_job *j) {
    const double t0 = now_s();
    pthread_mutex_lock(&s->mu);
    while (!started_or_done(j)) {
        CHECK(now_s() - t0 < FUZZ_WAIT_S, "no token after %.0f s", FUZZ_WAIT_S);
        struct timespec ts;
        srv_deadline_in(&ts, 50);
        pthread_cond_timedwait(&j->cv, &s->mu, &ts);
    }
    pthread_mutex_unlock(&s->mu);
}

static void run_job(tp_server *s, srv_job *j) {
    enqueue_job(s, j);
    wait_job(s, j);
}

/* As the HTTP thread does when its client left (http.c): j->cancel, the engine woken. Set as
 * soon as the engine runs a sequence and before any of j's tokens is out, so mostly while j's
 * prompt is still going in, chunk by chunk (the engine ends it before its next step). */
static void cancel_early(tp_server *s, srv_job *j) {
    const double t0 = now_s();
    pthread_mutex_lock(&s->mu);
    while (s->met.running <= 0 && !started_or_done(j)) {
        CHECK(now_s() - t0 < FUZZ_WAIT_S, "request not admitted after %.0f s", FUZZ_WAIT_S);
        pthread_mutex_unlock(&s->mu);
        nanosleep(&(struct timespec){0, 20000}, NULL);
        pthread_mutex_lock(&s->mu);
    }
    j->cancel = 1;
    pthread_cond_signal(&s->engine_cv);
    pthread_mutex_unlock(&s->mu);
}

/* Once the engine has retired the job, every KV block is back (free, or cached for prefix hits:
 * free + cached == total), nothing runs and the client holds no sequence (--max-seqs-per-client's
 * count). */
static void check_idle(tp_server *s) {
    const double t0 = now_s();
    for (;;) {
        pthread_mutex_lock(&s->mu);
        const int idle = !s->inbox && s->n_jobs == 0 && s->met.running == 0 && s->met.waiting == 0 &&
                         s->met.kv_free + s->met.kv_cached == s->met.kv_total && !s->clients;
        const int kv_free = s->met.kv_free, kv_cached = s->met.kv_cached, kv_total = s->met.kv_total;
        const int n_jobs = s->n_jobs;
        const int held = s->clients ? s->clients->held : 0;
        pthread_mutex_unlock(&s->mu);
        if (idle) return;
        CHECK(now_s() - t0 < FUZZ_WAIT_S,
              "engine not idle after a request: %d free + %d cached of %d KV blocks, %d jobs, %d sequences still held",
              kv_free, kv_cached, kv_total, n_jobs, held);
        nanosleep(&(struct timespec){0, 200000}, NULL);
    }
}

/* Parses the body with speculation on or off; NULL when refused (checked) or too big to run. */
static srv_job *parse(tp_server *s, const char *body, size_t n, int speculate) {
    s->o.speculate_k = speculate ? 4 : 0; /* read by srv_parse_completion only */
    s->o.speculate_n = speculate ? 2 : 0;
    int status = -1;
    jbuf err = {0};
    srv_job *j = srv_parse_completion(s, body, n, &status, &err);
    if (!j) {
        check_error(status, &err);
        jb_free(&err);
        return NULL;
    }
    CHECK(err.n == 0, "an accepted request with an error body");
    j->t_arrival = tp_now_seconds(); /* as the HTTP thread stamps it: a "timeout" budget counts from here */
    if (!small(j)) {
        srv_job_free(j);
        return NULL;
    }
    snprintf(j->id, sizeof j->id, "cmpl-fuzz");
    return j;
}

static void release(tp_server *s, srv_job *j) {
    pthread_mutex_lock(&s->mu);
    srv_job_release(s, j);
    pthread_mutex_unlock(&s->mu);
}

static int greedy(const srv_job *j) {
    for (int i = 0; i < j->n_choices; i++)
        if (j->ch[i].r.params.sampling.temperature != 0) return 0;
    return 1;
}

/* The request sharing j's first prompt: its ids + the first `more` of them again, greedy. NULL
 * when that is too big to run. */
static srv_job *share_job(tp_server *s, const srv_job *j, int more, int speculate, jbuf *body) {
    const srv_prompt *p = &j->prompts[0];
    if (p->n < 1) return NULL;
    jb_str(body, "{\"prompt\": [");
    for (int k = 0; k < p->n + more; k++) jb_printf(body, "%s%d", k ? ", " : "", (int)p->ids[k % p->n]);
    jb_str(body, "], \"max_tokens\": 8, \"temperature\": 0}");
    return parse(s, body->s, body->n, speculate);
}

/* The same body run alone, without speculation and with the prefix cache off (--no-prefix-cache;
 * the scheduler reads the flag at each admission, set here while the engine is idle, under mu):
 * every greedy choice of j that ran to its end must give the same ids and end. Not with a time
 * budget, whose cut depends on the clock. */
static void check_reference(tp_server *s, const char *body, size_t n, const srv_job *j) {
    if (!greedy(j) || j->ch[0].r.params.timeout_s > 0) return;
    pthread_mutex_lock(&s->mu);
    g_job.m.no_prefix_cache = 1;
    pthread_mutex_unlock(&s->mu);
    srv_job *p = parse(s, body, n, 0);
    CHECK(p && p->n_choices == j->n_choices, "the same body again");
    run_job(s, p);
    check_idle(s);
    pthread_mutex_lock(&s->mu);
    g_job.m.no_prefix_cache = 0;
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < j->n_choices; i++) {
        const tp_request *a = &j->ch[i].r, *b = &p->ch[i].r;
        tp_finish fa = j->ch[i].finish, fb = p->ch[i].finish;
        if (fa != TP_FINISH_STOP && fa != TP_FINISH_LENGTH) continue;
        int na = j->ch[i].n_pub, nb = p->ch[i].n_pub, k = 0; /* the answers' tokens */
        while (k < na && k < nb && a->ids[k] == b->ids[k]) k++;
        CHECK(na == nb && k == na && fa == fb,
              "choice %d greedy (%d of %d prompt tokens cached, preempted %d times): %d ids (%s), alone with "
              "no speculation and no prefix cache %d (%s), first difference at %d",
              i, a->n_prompt_cached, a->n_prompt, a->n_preempted, na, srv_finish_name(fa), nb, srv_finish_name(fb), k);
    }
    release(s, p);
}

static void check_job(tp_server *s, srv_job *j, int cancelled) {
    check_choices(s, j, cancelled);
    int gone = 0; /* a cancelled job's client left: nothing is rendered for it */
    for (int i = 0; i < j->n_choices; i++)
        if (j->ch[i].finish == TP_FINISH_CANCELLED) {
            gone = 1;
            g_mid_prefill += j->ch[i].r.n_ids == 0;
        }
    if (gone) return;
    if (j->stream) check_stream(s, j);
    else check_completion(s, j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    tp_server *s = &g_srv;
    const int mode = data[0], speculate = mode & FUZZ_SPECULATE, cancel = (mode & FUZZ_CANCEL) != 0;
    const char *body = (const char *)data + 1;
    srv_job *j = parse(s, body, size - 1, speculate);
    if (!j) return 0;
    jbuf qbody = {0};
    srv_job *q = mode & FUZZ_SHARE ? share_job(s, j, 1 + (mode >> 4 & 7), speculate, &qbody) : NULL;
    enqueue_job(s, j);
    if (cancel) cancel_early(s, j);
    if (q) {
        wait_started(s, j);
        enqueue_job(s, q);
    }
    wait_job(s, j);
    if (q) wait_job(s, q);
    check_job(s, j, cancel);
    if (q) check_job(s, q, 0);
    check_idle(s);
    check_reference(s, body, size - 1, j);
    if (q) {
        check_reference(s, qbody.s, qbody.n, q);
        release(s, q);
    }
    jb_free(&qbody);
    release(s, j);
    return 0;
}
