/* The online scheduler (continuous batching), rank 0. Both `tpgen generate` (all requests known
 * at start) and `tpgen serve` (requests arriving while others decode) run on it: one code path.
 *
 * Admission order (one policy, one queue): waiting sequences, new and preempted alike, are
 * admitted by (params.priority: lower first, vLLM's meaning; then the client, r->client, with the
 * fewest sequences running; then the front end's request, r->group, with the fewest running; then
 * arrival). With one client and every priority 0 (`tpgen generate`, the server's fcfs policy
 * with one client) that is plain arrival order. They are admitted between steps, with KV blocks
 * for the tokens they feed now (the prompt), sharing its longest cached prefix of full blocks
 * among requests of equal r->cache_salt (automatic prefix caching, prefix_cache.h; off with
 * m->no_prefix_cache); a request that does not fit may be passed by one after it in that order
 * that does, at most max_seqs times. Blocks for what a sequence generates are taken as it grows
 * (KV on demand); when none is left, the least urgent running sequence (highest priority
 * value; the most recently admitted among equals) is preempted: its blocks go back (full ones
 * stay cached), it waits again at its place in the admission order (its arrival kept) and
 * resumes by feeding its tokens again, with output identical to an uninterrupted run.
 * Each step packs one decode token of every running sequence, then prefill chunks of newly
 * admitted ones, up to the step's token budget. A sequence that finishes, stops, times out or is
 * cancelled gives its blocks back at once (its full blocks stay cached, the last first), for the
 * next waiting request. docs/ARCHITECTURE.md, "Prefix cache and KV on demand".
 *
 * Events, not callbacks (vLLM's update_from_output): what happens to requests (a token, a scored
 * prompt, the end with its tp_finish) is appended to the scheduler's events by every call that
 * makes it happen (tp_sched_submit, tp_sched_end, tp_sched_update); the front end takes them with
 * tp_sched_events after each call and acts on them itself: detokenizes, matches stop strings
 * (ending the request with tp_sched_end), publishes, prints.
 *
 * A request that scores its prompt (r->score_prompt: echo + logprobs, `tpgen score`) does it in
 * its prefill: each prompt token's logits row, with the next prompt token as its target, gives
 * that position's log-probability and top alternatives, gathered on rank 0 as the sampling rows'
 * candidates are. Such a chunk takes a row per token, so it is cut to the rows the step has left
 * after the decode rows: scoring runs in chunks between other sequences' tokens, never as one
 * blocking pass. Its KV need (tp_request_kv_tokens) counts the scored tokens too.
 *
 * A decoding sequence with speculation on (r->speculate_k, speculate.h) feeds its last token and
 * up to k drafts, with a logits row each, and keeps the tokens the target accepts: n_cached
 * advances by the accepted drafts + 1. Drafts go only into blocks it can get without preempting.
 *
 * Not thread-safe: one thread (the one that makes the MPI calls) owns a tp_sched.
 */
#ifndef TPGEN_SCHEDULER_H
#define TPGEN_SCHEDULER_H

#include "model/model.h"
#include "prefix_cache.h"
#include "request.h"
#include "model/step.h"

typedef struct tp_sched tp_sched;

/* tp_request_kv_tokens / tp_request_kv_blocks (request.h) for the model's n_positions and KV
 * block size (after tp_model_alloc): the most a request holds at once (a request needing more
 * than the whole cache is refused). */
int tp_request_tokens(const tp_model *m, const tp_request *r);
int tp_request_blocks(const tp_model *m, const tp_request *r);

tp_sched *tp_sched_new(tp_model *m);
void tp_sched_free(tp_sched *s); /* the requests stay the caller's (any still in s lose their seq) */

/* What happened to a request, in the order it happened. */
typedef enum {
    TP_EV_TOKEN,    /* r generated token i: r->ids[i] (= id), r->logprobs[i] (= logprob), r->top_* */
    TP_EV_SCORED,   /* r's prompt scores are complete (score_prompt), before any token of r */
    TP_EV_FINISHED, /* r ended (r->state is TP_REQ_FINISHED): finish says why; its last event */
} tp_event_kind;

typedef struct {
    tp_event_kind kind;
    tp_request *r;
    int i;            /* TP_EV_TOKEN: the token's index in r->ids */
    int32_t id;       /* TP_EV_TOKEN */
    float logprob;    /* TP_EV_TOKEN */
    tp_finish finish; /* TP_EV_FINISHED */
} tp_sched_event;

/* The events since the last call, in order; *ev stays valid until the next tp_sched_events
 * (calls made while handling them, such as tp_sched_end for a stop string, add to the next
 * batch). Returns how many. */
int tp_sched_events(tp_sched *s, const tp_sched_event **ev);

/* Queues r: allocates its result arrays and its sequence, seeds its generator (stream r->index).
 * A request with nothing to generate and no prompt to score finishes at once (TP_FINISH_LENGTH;
 * a one-token prompt is scored then too, TP_EV_SCORED first). Returns -1, r untouched, when r
 * needs more KV blocks than the whole cache holds (tp_request_blocks: it could never run). */
int tp_sched_submit(tp_sched *s, tp_request *r);
/* Ends r now, waiting or running, with reason (TP_FINISH_CANCELLED, TP_FINISH_TIMEOUT, or
 * TP_FINISH_STOP for a front end's stop string): what it generated stays, its KV blocks are back
 * (free, or cached when full) when this returns, a TP_EV_FINISHED event is added. No-op for a
 * finished request. Call between steps only. */
void tp_sched_end(tp_sched *s, tp_request *r, tp_finish reason);
void tp_sched_cancel(tp_sched *s, tp_request *r); /* tp_sched_end(s, r, TP_FINISH_CANCELLED) */
/* Admits what fits, runs one step on every rank, samples, finishes what is done (events). A
 * request whose logits cannot be sampled (not finite) ends alone with TP_FINISH_ERROR (r->error
 * says why); the others go on. Returns 0, and runs nothing, when no request is waiting or
 * running. */
int tp_sched_step(tp_sched *s);

/* tp_sched_step in its two halves, around tp_step_run, so that a test can drive the scheduler
 * with a fabricated step output, without MPI or a model (tests/sched_unit):
 *   plan: admits what fits and packs the step: which sequences, which tokens (ids, positions,
 *     rows of the block table), the block tables, the logits rows and their form. Returns 0, and
 *     plans nothing, when no request is waiting or running. The plan points into s's scratch: it
 *     is valid until the next tp_sched_plan.
 *   update: from the step's output (out->rows / out->full for plan->host.n_rows rows, in the
 *     plan's logits form): records prompt scores, samples (verifies drafts), adds the events,
 *     finishes what is done and gives its KV blocks back. */
typedef struct {
    tp_step_host host;        /* the step, as tp_step_run takes it */
    tp_logits_request logits; /* the form of its logits rows */
} tp_step_plan;
int tp_sched_plan(tp_sched *s, tp_step_plan *plan);
void tp_sched_update(tp_sched *s, const tp_step_plan *plan, const tp_step_output *out);

int tp_sched_running(const tp_sched *s);
int tp_sched_waiting(const tp_sched *s);
int tp_sched_kv_free(const tp_sched *s);      /* free KV blocks (unregistered, unused) */
int tp_sched_kv_cached(const tp_sched *s);    /* cached: unused, kept for prefix hits, evictable */
int tp_sched_kv_available(const tp_sched *s); /* free + cached: what admission and growth can take */
int tp_sched_kv_total(const tp_sched *s);     /* at idle free + cached == total */
long tp_sched_steps(const tp_sched *s);
long tp_sched_preemptions(const tp_sched *s);
/* prompt tokens of first admissions looked up in the prefix cache, and those found there
 * (requests scoring their prompt, and every request with the cache off, are not looked up) */
long tp_sched_prefix_query_tokens(const tp_sched *s);
long tp_sched_prefix_hit_tokens(const tp_sched *s);
/* The block manager itself, for tests (tests/sched_unit narrows its hash to force collisions). */
tp_prefix_cache *tp_sched_prefix_cache(tp_sched *s);
/* The waiting requests in admission order as of now (at most max), for tests and metrics; returns
 * how many are waiting. */
int tp_sched_queue(tp_sched *s, tp_request **out, int max);
/* A submitted request's bookkeeping, read-only, for tests (all zero / NULL when r has no seq). */
typedef struct {
    int n_cached;           /* tokens in the KV cache */
    const int32_t *blocks;  /* [n_blocks] its block table */
    int n_blocks;
    int slot;               /* row of the step's block table, when running */
    const int32_t *history; /* [n_prompt + n_ids] prompt + generated */
    long arrival;           /* submit order */
    long admitted_at;       /* admission order (the latest admission, resumes included) */
    int n_passed;           /* waiting: times a request after it was admitted first */
} tp_seq_view;
tp_seq_view tp_sched_seq_view(const tp_request *r);

#endif
