/* The online scheduler (continuous batching), rank 0. Both `tpgen generate` (all requests known
 * at start) and `tpgen serve` (requests arriving while others decode) run on it: one code path.
 *
 * Requests wait in a FIFO queue and are admitted in order, between steps, while the KV cache has
 * blocks for their whole length (tp_request_tokens), reserved up front so a running sequence is
 * never preempted. Each step packs one decode token of every running sequence, then prefill
 * chunks of newly admitted ones, up to the step's token budget. A sequence that finishes, stops
 * or is cancelled gives its blocks back at once, for the next waiting request.
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
 * advances by the accepted drafts + 1, never past the KV it reserved.
 *
 * Not thread-safe: one thread (the one that makes the MPI calls) owns a tp_sched.
 */
#ifndef TPGEN_SCHEDULER_H
#define TPGEN_SCHEDULER_H

#include "model.h"
#include "request.h"

typedef struct tp_sched tp_sched;

/* tp_request_kv_tokens / tp_request_kv_blocks (request.h) for the model's n_positions and KV
 * block size (after tp_model_alloc): what admission reserves. */
int tp_request_tokens(const tp_model *m, const tp_request *r);
int tp_request_blocks(const tp_model *m, const tp_request *r);

tp_sched *tp_sched_new(tp_model *m, const tp_request_hooks *hooks);
void tp_sched_free(tp_sched *s); /* the requests stay the caller's */

/* Queues r: allocates its result arrays and seeds its generator (stream r->index). A request with
 * nothing to generate and no prompt to score finishes at once ("length", on_done called; a
 * one-token prompt is scored then too, on_scored first). Returns -1, r untouched, when r needs
 * more KV blocks than the whole cache holds (tp_request_blocks: it could never run). */
int tp_sched_submit(tp_sched *s, tp_request *r);
/* Ends r now, waiting or running (finish_reason "cancelled"): its KV blocks are free when this
 * returns; on_done is called. No-op for a finished request. Call between steps only. */
void tp_sched_cancel(tp_sched *s, tp_request *r);
/* Admits what fits, runs one step on every rank, samples, finishes what is done. A request whose
 * logits cannot be sampled (not finite) ends alone with finish_reason "error" (r->error says
 * why); the others go on. Returns 0, and runs nothing, when no request is waiting or running. */
int tp_sched_step(tp_sched *s);

int tp_sched_running(const tp_sched *s);
int tp_sched_waiting(const tp_sched *s);
int tp_sched_kv_free(const tp_sched *s);  /* free KV blocks */
int tp_sched_kv_total(const tp_sched *s);
long tp_sched_steps(const tp_sched *s);

#endif
