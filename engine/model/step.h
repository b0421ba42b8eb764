/* One step of the job, as every rank runs it.
 *
 * Rank 0 (the scheduler) describes a step — token ids, positions, block tables, which rows it
 * needs logits for and in what form — and broadcasts it; every rank runs the forward pass on
 * it; each rank reduces its vocab slice of the logits to candidates (or sends the full slice)
 * and rank 0 gathers them. Other ranks sit in tp_step_worker_loop until rank 0 says stop.
 * Per step only the step description goes out and the candidates come back.
 */
#ifndef TPGEN_STEP_H
#define TPGEN_STEP_H

#include "model.h"
#include "candidates.h"

enum { TP_LOGITS_CANDIDATES = 0, TP_LOGITS_FULL = 1 };

/* Rank 0's view of one logits row after the gather. */
typedef struct {
    float lse;          /* log-sum-exp over the V raw logits */
    float target_logit; /* raw logit of the row's target id (NaN if none asked) */
    int n;              /* candidates, best first (tp_cand_before) */
    tp_cand c[TP_MAX_CANDIDATES];
} tp_row_result;

typedef struct {
    int mode;              /* TP_LOGITS_CANDIDATES or TP_LOGITS_FULL */
    int k;                 /* candidates per row (<= TP_MAX_CANDIDATES) */
    const int32_t *targets; /* [n_rows] ids whose logits are wanted too, or NULL */
} tp_logits_request;

typedef struct {
    tp_row_result *rows; /* [max_rows] (candidate mode; in full mode lse and target_logit
                          * only, and only when targets were asked) */
    float *full;         /* [max_rows, V] raw logits (full mode) */
} tp_step_output;

void tp_step_output_init(tp_step_output *o, const tp_model *m);
void tp_step_output_free(tp_step_output *o);

/* Rank 0: runs the step on every rank and gathers the logits rows into out. */
void tp_step_run(tp_model *m, const tp_step_host *s, const tp_logits_request *req, tp_step_output *out);
/* Rank 0: ends the workers' loops, after the last step (frees the step scratch). */
void tp_step_stop(tp_model *m);
/* Ranks != 0: follow rank 0's steps until it stops. */
void tp_step_worker_loop(tp_model *m);

#endif
