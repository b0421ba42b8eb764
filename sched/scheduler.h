/* The online scheduler (continuous batching), rank 0. Both `tpgen generate` (all requests known
 * at start) and `tpgen serve` (requests arriving while others decode) run on it: one code path.
 *
 * Requests wait in a queue ordered by (params.priority, arrival): lower priority values first (vLLM's
 * meaning), arrival order among equals, so plain FIFO when every priority is 0 (the server's fcfs
 * policy); a preempted request goes back to the queue's front. They are admitted in that order,
 * between steps, with KV blocks for the tokens they feed now (the prompt), sharing its longest
 * cached prefix of full blocks (automatic prefix caching, prefix_cache.h; off with
 * m->no_prefix_cache); a request that does not fit may be passed by one behind it that does, at
 * most max_seqs times. Blocks for what a sequence generates are taken as it grows (KV on demand);
 * when none is left, the most recently admitted running sequence is preempted: its blocks go back
 * (full ones stay cached), it is requeued first and resumes by feeding its tokens again, with
 * output identical to an uninterrupted run.
 * Each step packs one decode token of every running sequence, then prefill chunks of newly
 * admitted ones, up to the step's token budget. A sequence that finishes, stops, times out or is
 * cancelled gives its blocks back at once (its full blocks stay cached), for the next waiting
 * request. docs/ARCHITECTURE.md, "Prefix cache and KV on demand".
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

tp_sched *tp_sched_new(tp_model *m, const tp_request_hooks *hooks);
void tp_sched_free(tp_sched *s); /* the requests stay the caller's */

/* Queues r: allocates its result arrays and seeds its generator (stream r->index). A request with
 * nothing to generate and no prompt to score finishes at once ("length", on_done called; a
 * one-token prompt is scored then too, on_scored first). Returns -1, r untouched, when r needs
 * more KV blocks than the whole cache holds (tp_request_blocks: it could never run). */
int tp_sched_submit(tp_sched *s, tp_request *r);
/* Ends r now, waiting or running, with finish_reason reason (a string that outlives r: "cancelled",
 * "timeout"): what it generated stays, its KV blocks are back (free, or cached when full) when this returns, on_done is
 * called. No-op for a finished request. Call between steps only. */
void tp_sched_end(tp_sched *s, tp_request *r, const char *reason);
void tp_sched_cancel(tp_sched *s, tp_request *r); /* tp_sched_end(s, r, "cancelled") */
/* The waiting queue's order: 1 when a is served before b, by (params.priority, arrival), lower
 * first. tp_sched_victim_order is its reverse, the order in which running sequences should be
 * preempted when the KV pool runs dry: the highest priority value (least urgent) first, the latest
 * arrived among equals (docs/SERVING.md, "Deadlines and priority"). */
int tp_sched_queue_before(const tp_request *a, const tp_request *b);
int tp_sched_victim_order(const tp_request *a, const tp_request *b);
/* Admits what fits, runs one step on every rank, samples, finishes what is done. A request whose
 * logits cannot be sampled (not finite) ends alone with finish_reason "error" (r->error says
 * why); the others go on. Returns 0, and runs nothing, when no request is waiting or running. */
int tp_sched_step(tp_sched *s);

/* tp_sched_step in its two halves, around tp_step_run, so that a test can drive the scheduler
 * with a fabricated step output, without MPI or a model (tests/sched_unit):
 *   plan: admits what fits and packs the step: which sequences, which tokens (ids, positions,
 *     rows of the block table), the block tables, the logits rows and their form. Returns 0, and
 *     plans nothing, when no request is waiting or running. The plan points into s's scratch: it
 *     is valid until the next tp_sched_plan.
 *   update: from the step's output (out->rows / out->full for plan->host.n_rows rows, in the
 *     plan's logits form): records prompt scores, samples (verifies drafts), calls the hooks,
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
/* Blocks of tp_sched_kv_available that admitting r now would take (its uncached tokens' blocks
 * and its hits that sit cached): for a front end that holds requests back until they fit. */
int tp_sched_admit_cost(tp_sched *s, const tp_request *r);
/* The block manager itself, for tests (tests/sched_unit narrows its hash to force collisions). */
tp_prefix_cache *tp_sched_prefix_cache(tp_sched *s);


#endif
