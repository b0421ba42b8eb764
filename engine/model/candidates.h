/* A logits candidate: what each rank reduces its vocab slice to and rank 0 merges (engine/model/step.c)
 * and samples from (engine/sched/sampler.c); and the log-sum-exp of a row, which both need. */
#ifndef TPGEN_CANDIDATES_H
#define TPGEN_CANDIDATES_H

#include <stdint.h>

#define TP_MAX_CANDIDATES 64

typedef struct {
    int32_t id;
    float logit;
} tp_cand;

/* "a" before "b": higher logit first, equal logits by lower id (argmax picks the lowest id). */
static inline int tp_cand_before(const tp_cand *a, const tp_cand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

/* log(sum_i exp(x[i])) over n raw logits, the max subtracted, the sum in double. */
float tp_logsumexp(const float *x, int n);

#endif
