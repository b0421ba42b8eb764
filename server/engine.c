/* The engine thread of the server (rank 0's main thread): takes jobs from the inbox, submits
 * their sequences to the scheduler, runs steps while anything is in flight, cancels what the
 * clients abandoned, publishes tokens, text and prompt scores to the HTTP threads (hooks), and
 * drains on SIGTERM/SIGINT. An echo + logprobs job's prompts are scored by the scheduler in its
 * choices' prefill (scheduler.h), chunked between the other sequences' tokens. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "util/log.h"

_Atomic int srv_stop_signal;

void srv_deadline_in(struct timespec *ts, long ms) {
    if (clock_gettime(CLOCK_REALTIME, ts)) tp_die("clock_gettime: %s", strerror(errno));
    ts->tv_nsec += ms * 1000000L;
    while (ts->tv_nsec >= 1000000000L) { ts->tv_sec++; ts->tv_nsec -= 1000000000L; }
}

void srv_job_enqueue(tp_server *s, srv_job *j) {
    j->refs = 2; /* the HTTP thread and the engine */
    srv_client_hold(s, j->client, j->n_choices); /* released as each sequence ends (on_done, end_job) */
    if (s->inbox_tail) s->inbox_tail->next = j;
    else s->inbox = j;
    s->inbox_tail = j;
    s->n_jobs++;
    pthread_cond_signal(&s->engine_cv);
}

/* under mu */
void srv_job_release(tp_server *s, srv_job *j) {
    (void)s;
    if (--j->refs == 0) srv_job_free(j);
}

int srv_client_held(tp_server *s, const char *addr) {
    for (srv_client *c = s->clients; c; c = c->next)
        if (strcmp(c->addr, addr) == 0) return c->held;
    return 0;
}

void srv_client_hold(tp_server *s, const char *addr, int n) {
    srv_client **pp = &s->clients;
    while (*pp && strcmp((*pp)->addr, addr)) pp = &(*pp)->next;
    if (!*pp) {
        if (n <= 0) return;
        *pp = tp_calloc(1, sizeof **pp);
        snprintf((*pp)->addr, sizeof (*pp)->addr, "%s", addr);
    }
    srv_client *c = *pp;
    c->held += n;
    if (c->held <= 0) { /* holds nothing: forgotten */
        *pp = c->next;
        free(c);
    }
}

/* The job a choice belongs to: choices are allocated in one array per job, and each request
 * knows its index in it. */
static srv_job *job_of(srv_choice *c, srv_job *active) {
    for (srv_job *j = active; j; j = j->next)
        if (c >= j->ch && c < j->ch + j->n_choices) return j;
    return NULL;
}

typedef struct {
    tp_server *s;
    srv_job *active; /* the engine's list of jobs in flight */
} engine;

static int on_token(void *ctx, tp_request *r) {
    engine *e = ctx;
    tp_server *s = e->s;
    srv_choice *c = (srv_choice *)r;
    srv_job *j = job_of(c, e->active);
    int stop = 0;
    pthread_mutex_lock(&s->mu);
    int i = r->n_ids - 1;
    c->tok_off[i] = c->dlen;
    if (c->ts && !tp_request_stop_id(&r->params, r->ids[i])) { /* FIM's <eom>: not part of the text */
        char *out = NULL;
        size_t n = 0, decoded = 0;
        stop = tp_text_stream_push(c->ts, r->ids[i], &out, &n, &decoded);
        c->dlen += decoded;
        if (n) jb_put(&c->text, out, n);
        free(out);
    }
    c->n_pub = r->n_ids;
    s->met.generation_tokens++;
    if (j) {
        if (j->t_first == 0) j->t_first = tp_now_seconds();
        pthread_cond_broadcast(&j->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return stop;
}

static void on_done(void *ctx, tp_request *r) {
    engine *e = ctx;
    tp_server *s = e->s;
    srv_choice *c = (srv_choice *)r;
    srv_job *j = job_of(c, e->active);
    pthread_mutex_lock(&s->mu);
    if (c->ts) {
        /* release what was held back (a partial UTF-8 character, text a stop string could still
         * begin): at EOS and at the length limit too, as the CLI does; after a stop string it is
         * a no-op (the text ends before the stop) */
        char *rest = NULL;
        size_t n = 0, decoded = 0;
        tp_text_stream_finish(c->ts, &rest, &n, &decoded);
        c->dlen += decoded;
        if (n) jb_put(&c->text, rest, n);
        free(rest);
    }
    c->n_pub = r->n_ids;
    c->finish = r->finish_reason;
    s->met.spec_drafted += r->spec_drafted;
    s->met.spec_accepted += r->spec_accepted;
    c->done = 1;
    if (j) {
        j->live--;
        srv_client_hold(s, j->client, -1);
        /* its last sequence: the job no longer counts against --max-queue (its client may
         * send the next request as soon as it has this answer); nothing more will be scored
         * (a prompt cancelled before it was has no scores: the renderers leave them out) */
        if (++j->n_done == j->n_choices) {
            s->n_jobs--;
            j->scored = 1;
        }
        pthread_cond_broadcast(&j->cv);
    }
    pthread_mutex_unlock(&s->mu);
}

/* A prompt's scores are in (its first choice scored it in its prefill): they move to the
 * prompt; once every prompt has them the job's echo may go out (streams wait for it). */
static void on_scored(void *ctx, tp_request *r) {
    engine *e = ctx;
    tp_server *s = e->s;
    srv_choice *c = (srv_choice *)r;
    srv_job *j = job_of(c, e->active);
    if (!j) return;
    pthread_mutex_lock(&s->mu);
    srv_prompt *p = &j->prompts[c->prompt];
    p->lps = r->prompt_lps;
    p->top_ids = r->prompt_top_ids;
    p->top_lps = r->prompt_top_lps;
    r->prompt_lps = NULL;
    r->prompt_top_ids = NULL;
    r->prompt_top_lps = NULL;
    int all = 1;
    for (int i = 0; i < j->n_prompts; i++) all &= j->prompts[i].lps != NULL;
    if (all) {
        j->scored = 1;
        pthread_cond_broadcast(&j->cv);
    }
    pthread_mutex_unlock(&s->mu);
}

/* Ends a job's submitted sequences with reason ("cancelled", "timeout": what they generated stays,
 * their KV blocks go back at once), and finishes by hand those never submitted (under no lock). */
static void end_job(tp_server *s, tp_sched *sc, srv_job *j, const char *reason) {
    for (int i = 0; i < j->next_sub; i++)
        if (j->ch[i].r.state != TP_REQ_FINISHED) tp_sched_end(sc, &j->ch[i].r, reason);
    if (j->next_sub == j->n_choices) return;
    pthread_mutex_lock(&s->mu);
    int left = j->n_choices - j->next_sub;
    for (int i = j->next_sub; i < j->n_choices; i++) {
        j->ch[i].r.state = TP_REQ_FINISHED; /* never to the scheduler */
        j->ch[i].done = 1;
        j->ch[i].finish = reason;
    }
    j->next_sub = j->n_choices;
    srv_client_hold(s, j->client, -left);
    j->n_done += left;
    if (j->n_done == j->n_choices) {
        s->n_jobs--;
        j->scored = 1; /* nothing more will be scored: an echo waiting for it goes out without */
    }
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Past its time budget (params.timeout_s from arrival, the same for every choice of a job):
 * checked between steps, so a budget is kept to within one step. */
static int job_expired(const srv_job *j, double now) {
    double t = j->n_choices > 0 ? j->ch[0].r.params.timeout_s : 0;
    return t > 0 && now >= j->t_arrival + t && j->n_done < j->n_choices;
}

/* Fair admission. The scheduler admits in arrival order and never preempts, so a client that
 * sent n=16 requests first held every slot and queued the rest ahead of everyone: four such
 * clients made eight single requests wait 68 s. The engine keeps the sequences the scheduler
 * cannot start now, and submits only what it can admit at the next step (a slot and the KV
 * blocks), taking each next sequence from the client (peer address) with the fewest running,
 * then the request with the fewest running, then the oldest: a newcomer waits for the next free
 * slot, not for the backlog of those before it. Under --scheduling-policy priority the request's
 * priority comes before all of that (lower first: an interactive completion outranks a batch
 * evaluation whoever sent it); under fcfs every priority is 0. Engine thread only. */
static int client_live(srv_job *active, const char *addr) {
    int n = 0;
    for (srv_job *j = active; j; j = j->next)
        if (strcmp(j->client, addr) == 0) n += j->live;
    return n;
}

static void admit_fair(tp_sched *sc, tp_model *m, srv_job *active) {
    if (tp_sched_waiting(sc)) return; /* what was submitted has not been admitted yet */
    int slots = m->a.max_seqs - tp_sched_running(sc), blocks = tp_sched_kv_available(sc);
    while (slots > 0) {
        srv_job *best = NULL;
        int best_c = 0;
        for (srv_job *j = active; j; j = j->next) {
            if (j->next_sub >= j->n_choices) continue;
            int c = client_live(active, j->client);
            int p = j->ch[0].r.params.priority, best_p = best ? best->ch[0].r.params.priority : 0;
            if (!best || p < best_p ||
                (p == best_p && (c < best_c || (c == best_c && (j->live < best->live ||
                                                                (j->live == best->live && j->t_arrival < best->t_arrival)))))) {
                best = j;
                best_c = c;
            }
        }
        if (!best) return;
        tp_request *r = &best->ch[best->next_sub].r;
        int need = tp_sched_admit_cost(sc, r); /* its prompt's blocks (KV on demand), less its prefix hits */
        if (need > blocks) return; /* the fairest waits for room; no one overtakes it */
        best->next_sub++;
        best->live++; /* before: a request with nothing to generate is done within submit */
        if (tp_sched_submit(sc, r)) tp_die("internal: a validated request does not fit the KV cache");
        slots--;
        blocks -= need;
    }
}

void tp_server_run(tp_server *s, tp_model *m) {
    engine e = {s, NULL};
    tp_request_hooks hooks = {on_token, on_done, &e, on_scored};
    tp_sched *sc = tp_sched_new(m, &hooks);
    pthread_mutex_lock(&s->mu);
    s->vocab = m->cfg.vocab_size;
    s->n_positions = m->cfg.n_positions;
    s->kv_block_size = m->kv.block_size;
    s->eos = m->cfg.eos_token_id;
    s->met.kv_total = s->met.kv_free = tp_sched_kv_total(sc);
    s->ready = 1;
    pthread_mutex_unlock(&s->mu);
    fprintf(stderr, "tpgen: serving %s on http://%s:%d\n", s->o.name, s->o.host, s->port);
    fflush(stderr);

    double deadline = 0;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        if (srv_stop_signal && !s->draining) {
            s->draining = 1;
            deadline = tp_now_seconds() + s->o.drain_timeout;
            fprintf(stderr, "tpgen: draining: %d requests in flight, %.0f s to finish them\n", s->n_jobs,
                    s->o.drain_timeout);
        }
        int backlog = 0; /* sequences the engine holds back for fair admission */
        for (srv_job *j = e.active; j; j = j->next) backlog += j->n_choices - j->next_sub;
        int busy = tp_sched_running(sc) || tp_sched_waiting(sc) || backlog;
        int cancels = 0;
        for (srv_job *j = e.active; j; j = j->next) cancels |= j->cancel && j->n_done < j->n_choices;
        if (!busy && !s->inbox && !cancels) {
            if (s->draining && !e.active && s->open_requests == 0) {
                pthread_mutex_unlock(&s->mu);
                break;
            }
            if (s->draining && !e.active && tp_now_seconds() > deadline + 5) { /* responses stuck in clients */
                pthread_mutex_unlock(&s->mu);
                break;
            }
            struct timespec ts;
            srv_deadline_in(&ts, 50);
            pthread_cond_timedwait(&s->engine_cv, &s->mu, &ts);
            pthread_mutex_unlock(&s->mu);
            continue;
        }
        srv_job *fresh = s->inbox;
        s->inbox = s->inbox_tail = NULL;
        for (srv_job *j = fresh; j; j = j->next)
            for (int i = 0; i < j->n_prompts; i++) s->met.prompt_tokens += (long)j->prompts[i].n * j->n;
        pthread_mutex_unlock(&s->mu);

        /* new jobs: to the active list (the hooks find them there), then to the scheduler;
         * the parser refused what could never fit the KV cache (the same tp_request_kv_blocks) */
        while (fresh) {
            srv_job *j = fresh;
            fresh = j->next;
            j->next = e.active;
            e.active = j; /* submitted by admit_fair; an echo + logprobs prompt is scored in its prefill */
        }
        srv_conns_sweep(s); /* clients that left: their jobs' cancel is set (conns.c) */
        double t_check = tp_now_seconds();
        int drain_over = s->draining && t_check > deadline;
        for (srv_job *j = e.active; j; j = j->next) {
            pthread_mutex_lock(&s->mu);
            int cancel = j->cancel;
            pthread_mutex_unlock(&s->mu);
            if (cancel || drain_over) end_job(s, sc, j, "cancelled");
            else if (job_expired(j, t_check)) end_job(s, sc, j, "timeout");
        }
        admit_fair(sc, m, e.active);

        tp_sched_step(sc);

        /* finished jobs leave the active list */
        pthread_mutex_lock(&s->mu);
        double now = tp_now_seconds();
        for (srv_job **pp = &e.active; *pp;) {
            srv_job *j = *pp;
            if (j->n_done == j->n_choices) {
                *pp = j->next;
                j->next = NULL;
                int gen = 0, cancelled = 0, timed_out = 0;
                for (int i = 0; i < j->n_choices; i++) {
                    gen += j->ch[i].r.n_ids;
                    cancelled |= strcmp(j->ch[i].finish, "cancelled") == 0;
                    timed_out |= strcmp(j->ch[i].finish, "timeout") == 0;
                }
                s->met.cancelled += cancelled;
                s->met.timed_out += timed_out;
                if (j->t_first > 0) {
                    srv_hist_add(&s->met.ttft, j->t_first - j->t_arrival);
                    if (gen > j->n_choices)
                        srv_hist_add(&s->met.tpot, (now - j->t_first) / ((double)gen / j->n_choices - 1));
                }
                srv_hist_add(&s->met.e2e, now - j->t_arrival);
                srv_job_release(s, j);
            } else pp = &j->next;
        }
        s->met.running = tp_sched_running(sc);
        s->met.waiting = tp_sched_waiting(sc);
        for (srv_job *j = e.active; j; j = j->next) s->met.waiting += j->n_choices - j->next_sub;
        s->met.kv_free = tp_sched_kv_free(sc);
        s->met.kv_cached = tp_sched_kv_cached(sc);
        s->met.prefix_query_tokens = tp_sched_prefix_query_tokens(sc);
        s->met.prefix_hit_tokens = tp_sched_prefix_hit_tokens(sc);
        s->met.preemptions = tp_sched_preemptions(sc);
        pthread_mutex_unlock(&s->mu);
    }
    tp_sched_free(sc);
}
