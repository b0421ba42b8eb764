/* Generation and scoring jobs, driven by rank 0 over tp_step_run: the batch API over the online
 * scheduler (scheduler.h), which this header includes and which never includes it. A
 * sequence stops ("length") at max_new_tokens or when it holds n_positions tokens; a prompt that
 * already does gets no tokens. A request whose logits are not finite (inf or NaN) fails alone
 * ("error", r->error names the step and position); no token is drawn from them.
 */
#ifndef TPGEN_GENERATE_H
#define TPGEN_GENERATE_H

#include <stdint.h>

#include "model/model.h"
#include "request.h"
#include "scheduler.h"

/* Rank 0: a scheduler with every request submitted (each must fit the KV cache:
 * tp_request_blocks <= its blocks). The caller steps it (tp_sched_step), taking its events after
 * each call (tp_sched_events), then ends it with tp_generate_end. */
tp_sched *tp_generate_start(tp_model *m, tp_request *reqs, int n);
/* Checks that every KV block is back (free or cached), frees s; returns the steps it ran. */
long tp_generate_end(tp_sched *s);
/* Rank 0: runs all requests to completion on the scheduler, its events unread (the caller reads
 * the results in the requests; it stops the workers with tp_step_stop; other ranks are in
 * tp_step_worker_loop). Returns the number of steps run. */
long tp_generate(tp_model *m, tp_request *reqs, int n);

/* Rank 0: scores ids[0..n) (a score_prompt request run on the scheduler, alone):
 * logprobs[i] = log p(ids[i] | ids[:i]) for i >= 1 (logprobs[0] = NaN) and the k best
 * alternatives of each position into top_ids/top_lps [n, k]. Returns 0, or the first position
 * whose logits were not finite (inf or NaN: no log-probability there). */
int tp_score(tp_model *m, const int32_t *ids, int n, int k, float *logprobs, int32_t *top_ids, float *top_lps);

#endif
