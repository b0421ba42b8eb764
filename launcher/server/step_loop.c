/* The engine thread of the server (rank 0's main thread): takes jobs from the inbox, submits
 * their sequences to the scheduler (whose one admission order is also the fairness between
 * clients and the priority, scheduler.h), runs steps while anything is in flight, cancels what
 * the clients abandoned, turns the scheduler's events into tokens, text and prompt scores for
 * the HTTP threads (detokenized and matched against stop strings here, outside the scheduler),
 * and drains on SIGTERM/SIGINT. An echo + logprobs job's prompts are scored by the scheduler in
 * its choices' prefill, chunked between the other sequences' tokens. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "util/log.h"

_Atomic int srv_stop_signal;

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

/* A token of c (under mu): its text, published. Returns 1 when a stop string matched. */
static int take_token(tp_server *s, srv_choice *c, int i, int32_t id) {
    int stop = 0;
    c->tok_off[i] = c->dlen;
    if (c->ts && !tp_request_stop_id(&c->r.params, id)) { /* FIM's <eom>: not part of the text */
        char *out = NULL;
        size_t n = 0, decoded = 0;
        stop = tp_text_stream_push(c->ts, id, &out, &n, &decoded);
        c->dlen += decoded;
        if (n) jb_put(&c->text, out, n);
        free(out);
    }
    c->n_pub = i + 1;
    s->met.generation_tokens++;
    if (c->job->t_first == 0) c->job->t_first = tp_now_seconds();
    return stop;
}

/* c ended (under mu): the text held back released, the job's counts. */
static void take_end(tp_server *s, srv_choice *c, tp_finish finish) {
    srv_job *j = c->job;
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
    c->finish = c->stopped ? TP_FINISH_STOP : finish; /* a stop string on its last token says "stop" */
    s->met.spec_drafted += c->r.spec_drafted;
    s->met.spec_accepted += c->r.spec_accepted;
    c->done = 1;
    srv_client_hold(s, j->client, -1);
    /* its last sequence: the job no longer counts against --max-queue (its client may send the
     * next request as soon as it has this answer); nothing more will be scored (a prompt
     * cancelled before it was has no scores: the renderers leave them out) */
    if (++j->n_done == j->n_choices) {
        s->n_jobs--;
        j->scored = 1;
    }
}

/* A prompt's scores are in (its first choice scored it in its prefill): they move to the prompt;
 * once every prompt has them the job's echo may go out (streams wait for it). Under mu. */
static void take_scores(srv_choice *c) {
    srv_job *j = c->job;
    tp_request *r = &c->r;
    srv_prompt *p = &j->prompts[c->prompt];
    p->lps = r->prompt_lps;
    p->top_ids = r->prompt_top_ids;
    p->top_lps = r->prompt_top_lps;
    r->prompt_lps = NULL;
    r->prompt_top_ids = NULL;
    r->prompt_top_lps = NULL;
    int all = 1;
    for (int i = 0; i < j->n_prompts; i++) all &= j->prompts[i].lps != NULL;
    if (all) j->scored = 1;
}

/* The scheduler's events since the last call, published to the HTTP threads (one lock per
 * batch, a broadcast per job touched). A stop string ends its choice (tp_sched_end, outside mu),
 * whose end is the next batch's. */
static void take_events(tp_server *s, tp_sched *sc) {
    const tp_sched_event *ev;
    int n;
    while ((n = tp_sched_events(sc, &ev)) > 0) {
        pthread_mutex_lock(&s->mu);
        for (int i = 0; i < n; i++) {
            srv_choice *c = ev[i].r->user;
            switch (ev[i].kind) {
            case TP_EV_TOKEN:
                if (!c->stopped) c->stopped = take_token(s, c, ev[i].i, ev[i].id);
                break;
            case TP_EV_SCORED: take_scores(c); break;
            case TP_EV_FINISHED: take_end(s, c, ev[i].finish); break;
            }
            pthread_cond_broadcast(&c->job->cv);
        }
        pthread_mutex_unlock(&s->mu);
        for (int i = 0; i < n; i++) {
            tp_request *r = ev[i].r;
            srv_choice *c = r->user;
            if (ev[i].kind == TP_EV_TOKEN && c->stopped && r->state != TP_REQ_FINISHED) tp_sched_end(sc, r, TP_FINISH_STOP);
        }
    }
}

/* The scheduler's gauges to /metrics (under mu). Published when jobs are taken too, not only
 * after a step: a reader that sees a new job's first tokens never sees the gauges of before it
 * (running 0, every block free: a client test once read "idle" while the job it had just
 * cancelled was still in flight). */
static void publish_gauges(tp_server *s, tp_sched *sc) {
    s->met.running = tp_sched_running(sc);
    s->met.waiting = tp_sched_waiting(sc);
    s->met.kv_free = tp_sched_kv_free(sc);
    s->met.kv_cached = tp_sched_kv_cached(sc);
    s->met.prefix_query_tokens = tp_sched_prefix_query_tokens(sc);
    s->met.prefix_hit_tokens = tp_sched_prefix_hit_tokens(sc);
    s->met.preemptions = tp_sched_preemptions(sc);
}

/* Ends a job's unfinished sequences with reason (cancelled, timeout: what they generated stays,
 * their KV blocks go back at once). */
static void end_job(tp_sched *sc, srv_job *j, tp_finish reason) {
    for (int i = 0; i < j->n_choices; i++) tp_sched_end(sc, &j->ch[i].r, reason);
}

/* Past its time budget (params.timeout_s from arrival, the same for every choice of a job):
 * checked between steps, so a budget is kept to within one step. */
static int job_expired(const srv_job *j, double now) {
    double t = j->n_choices > 0 ? j->ch[0].r.params.timeout_s : 0;
    return t > 0 && now >= j->t_arrival + t && j->n_done < j->n_choices;
}

/* A new job's choices to the scheduler, all at once: its admission order takes each next
 * sequence by priority, then from the client (peer address) with the fewest running, then the
 * request with the fewest, then the oldest (scheduler.h), so a newcomer waits for the next free
 * slot, not for the backlog of those before it. The parser refused what could never fit the KV
 * cache (the same tp_request_kv_blocks). */
static void submit_job(tp_server *s, tp_sched *sc, srv_job *j, uint64_t serial) {
    uint64_t client = srv_salt_of(j->client, strlen(j->client));
    tp_cache_scope scope;
    srv_job_scope(s, j, serial, &scope); /* scope.c */
    for (int i = 0; i < j->n_choices; i++) {
        srv_choice *c = &j->ch[i];
        c->job = j;
        c->r.user = c;
        c->r.client = client;
        c->r.group = serial;
        c->r.cache_scope = scope;
        if (tp_sched_submit(sc, &c->r)) tp_die("internal: a validated request does not fit the KV cache");
    }
}

void tp_server_run(tp_server *s, tp_model *m) {
    srv_job *active = NULL; /* the jobs in flight */
    uint64_t serial = 0;    /* jobs taken: each one's r.group */
    tp_sched *sc = tp_sched_new(m);
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
        int busy = tp_sched_running(sc) || tp_sched_waiting(sc);
        int cancels = 0;
        for (srv_job *j = active; j; j = j->next) cancels |= j->cancel && j->n_done < j->n_choices;
        if (!busy && !s->inbox && !cancels) {
            if (s->draining && !active && s->open_requests == 0) {
                pthread_mutex_unlock(&s->mu);
                break;
            }
            if (s->draining && !active && tp_now_seconds() > deadline + 5) { /* responses stuck in clients */
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

        /* new jobs: to the active list and to the scheduler (an echo + logprobs prompt is scored
         * in its prefill) */
        while (fresh) {
            srv_job *j = fresh;
            fresh = j->next;
            j->next = active;
            active = j;
            submit_job(s, sc, j, ++serial);
        }
        pthread_mutex_lock(&s->mu);
        publish_gauges(s, sc); /* the new jobs wait: /metrics says so before their first step */
        pthread_mutex_unlock(&s->mu);
        take_events(s, sc); /* requests with nothing to do end at once */
        srv_conns_sweep(s); /* clients that left: their jobs' cancel is set (conns.c) */
        double t_check = tp_now_seconds();
        int drain_over = s->draining && t_check > deadline;
        for (srv_job *j = active; j; j = j->next) {
            pthread_mutex_lock(&s->mu);
            int cancel = j->cancel;
            pthread_mutex_unlock(&s->mu);
            if (cancel || drain_over) end_job(sc, j, TP_FINISH_CANCELLED);
            else if (job_expired(j, t_check)) end_job(sc, j, TP_FINISH_TIMEOUT);
        }
        take_events(s, sc);

        tp_sched_step(sc);
        take_events(s, sc);

        /* finished jobs leave the active list */
        pthread_mutex_lock(&s->mu);
        double now = tp_now_seconds();
        for (srv_job **pp = &active; *pp;) {
            srv_job *j = *pp;
            if (j->n_done == j->n_choices) {
                *pp = j->next;
                j->next = NULL;
                int gen = 0, cancelled = 0, timed_out = 0;
                for (int i = 0; i < j->n_choices; i++) {
                    gen += j->ch[i].n_pub;
                    cancelled |= j->ch[i].finish == TP_FINISH_CANCELLED;
                    timed_out |= j->ch[i].finish == TP_FINISH_TIMEOUT;
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
        publish_gauges(s, sc);
        pthread_mutex_unlock(&s->mu);
    }
    tp_sched_free(sc);
}
