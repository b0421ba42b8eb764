/* The job's memory plan on one rank (kernels/mem_plan.h): weights, activations for the largest
 * step, the KV blocks and the backend's scratch for the longest context, made at start. The
 * launcher checks it before loading weights and again before allocating the rest, refuses what
 * does not fit (naming every buffer), prints it with --verbose, then allocates it. */
#ifndef TPGEN_MODEL_PLAN_H
#define TPGEN_MODEL_PLAN_H

#include "kernels/mem_plan.h"
#include "model.h"

typedef struct {
    int max_tokens, max_rows, max_seqs, block_size; /* the step limits (--max-batch-tokens, --max-batch) */
    int max_k;                /* top-k of logits_stats */
    long kv_tokens;           /* > 0: exactly this many KV tokens (--kv-cache-tokens) */
    double kv_mem;            /* else this fraction of what is left after every other buffer ... */
    long kv_tokens_needed;    /* ... and at most this many (0: no bound) */
    int sharing;              /* ranks sharing this device's memory (>= 1) */
    long kv_blocks;           /* > 0: the KV blocks taken (or an upper bound of them); 0: not known */
} tp_plan_args;

/* The step limits the backend's scratch is reserved for. The context a sequence can reach is the
 * block table's capacity: n_positions, and at most pa->kv_blocks blocks when known (n_positions
 * alone may be huge; it is only a limit). */
void tp_model_step_limits(const tp_model *m, const tp_plan_args *pa, tp_step_limits *lim);

/* Plans every buffer of this rank given `avail` bytes free now (weights count as held when
 * m->w.arena is set, else as still to allocate). Picks the KV blocks and adds them. Returns the
 * number of KV blocks, or 0 when the plan does not fit, with the reason and the table in err. */
long tp_model_plan(const tp_model *m, const tp_plan_args *pa, size_t avail, tp_mem_plan *p, char *err,
                   size_t err_size);

#endif
