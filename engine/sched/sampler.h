/* Sampling on rank 0. The sampler owns every logits processing step, in this one order
 * (docs/ARCHITECTURE.md, "The request life cycle"):
 *   1. presence and frequency penalties, over the generated tokens (tp_penalties_apply)
 *   2. min_tokens: EOS masked while fewer tokens are out (tp_penalties_apply)
 *   3. repetition penalty, over prompt + generated tokens (HF's)
 *   4. temperature   5. top-k   6. top-p   7. draw (greedy when temperature is 0)
 * Steps 1-2 are the request's (tp_penalties_active says when it has any: the step then fetches
 * full logits); 3-7 are HF generate's order. Reported log-probabilities are those of the logits
 * after steps 1-2 (the model's own when there are none), never after 3-7.
 *
 * Two inputs. Candidate mode: the merged top-k raw logits of all ranks plus the global
 * log-sum-exp (exact, and all that greedy or top-k sampling needs; TP x k numbers cross per
 * row). Full mode: all V raw logits of the row (repetition penalty, or top-p / temperature
 * without a top-k within the candidate limit). */
#ifndef TPGEN_SAMPLER_H
#define TPGEN_SAMPLER_H

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "model/candidates.h"

/* The repetition penalty's range, for every front end (server, CLI). It divides a positive logit
 * or multiplies a negative one by R; within [1/100, 100] a logit moves by a factor of 100 at most,
 * so any logit below FLT_MAX / 100 (3.4e36, far above a model's) stays finite and R itself and 1/R
 * are normal floats. Outside it the penalty is no longer a penalty one can apply: 1e-50 is 0 as a
 * float (logit / 0 = inf), and beyond 100 every repeated token is already ~0 (HF and vLLM take any
 * R > 0; common values are 1 to 1.5). */
#define TP_REP_PENALTY_MIN 0.01
#define TP_REP_PENALTY_MAX 100.0

typedef struct {
    float temperature;        /* 0: greedy */
    int top_k;                /* 0: off */
    float top_p;              /* 1: off */
    float repetition_penalty; /* 1: off */
    int logprobs;             /* top log-probabilities to report per token, 0..TP_MAX_CANDIDATES */
} tp_sampling;

typedef struct { uint64_t s[4]; } tp_rng; /* xoshiro256** */
void tp_rng_seed(tp_rng *r, uint64_t seed, uint64_t stream);
double tp_rng_uniform(tp_rng *r); /* [0, 1) */

typedef struct {
    int32_t id;       /* the chosen token */
    float logprob;    /* its log-probability under the model */
    int n_top;
    int32_t top_ids[TP_MAX_CANDIDATES];
    float top_lps[TP_MAX_CANDIDATES];
} tp_sample;

/* 1 when the double a front end parsed keeps its meaning as the float tp_sampling holds: 0 stays
 * 0, anything else must narrow to a normal float (|x| >= FLT_MIN, about 1.2e-38). top_p 1e-300
 * is > 0 as a double but 0 as a float; a denormal loses its digits. The server and the CLI refuse
 * such values (naming the field or flag) instead of sampling with something else. */
static inline int tp_sampling_value_ok(double x) { return x == 0 || fabsf((float)x) >= FLT_MIN; }

/* Steps 1-2 of the order above: OpenAI's additive penalties and vLLM's min_tokens. */
typedef struct {
    float presence_penalty, frequency_penalty; /* in [-2, 2], 0: off */
    int min_tokens;                            /* EOS masked while fewer tokens are out, 0: off */
    int32_t eos;                               /* the model's EOS id (outside [0, V): no mask) */
} tp_penalties;

/* 1 when steps 1-2 change a row's logits after n_generated tokens (the row needs full logits). */
int tp_penalties_active(const tp_penalties *p, int n_generated);
/* out[V] = logits[V] with l[j] -= c[j] * frequency + (c[j] > 0) * presence, c[j] the count of j
 * in generated[0..n), and EOS set to -1e30 while n < min_tokens (a large finite negative, not
 * -inf, so the log-sum-exp stays finite). counts: [V] of zeros, zeros again on return. */
void tp_penalties_apply(const tp_penalties *p, const int32_t *generated, int n, const float *logits, int V,
                        int32_t *counts, float *out);

/* Candidates a row needs in candidate mode, or 0 when it needs full logits. */
int tp_sampling_candidates(const tp_sampling *s);


/* The min(k, V) most likely ids of a row of V raw logits, best first (tp_cand_before), and their
 * log-probabilities (logit - lse) into ids/lps; returns how many. */
int tp_top_logprobs(const float *logits, int V, float lse, int k, int32_t *ids, float *lps);

/* Both samplers return 0, or -1 when the logits are not a distribution (a NaN or +inf logit,
 * a non-finite log-sum-exp, no candidate): then out is untouched and no id is chosen; the
 * caller reports the request as failed (never a silent id, never a crash or a hang).
 *
 * c: n candidates sorted by tp_cand_before; lse: log-sum-exp of all V raw logits (NaN when
 * any rank's slice held a NaN or +inf). */
int tp_sample_candidates(const tp_sampling *s, tp_rng *rng, const tp_cand *c, int n, float lse, tp_sample *out);
/* logits: the V raw logits of the row; history: the sequence so far (for the penalty);
 * work: tp_sample_full_work_bytes(V) of scratch, aligned for double. */
int tp_sample_full(const tp_sampling *s, tp_rng *rng, const float *logits, int V, const int32_t *history,
                   int n_hist, void *work, tp_sample *out);
size_t tp_sample_full_work_bytes(int V);

/* Speculative verification of a deterministic draft (Leviathan et al. 2023; Chen et al. 2023).
 * With p the processed distribution the samplers above draw from (penalty, temperature, top-k,
 * top-p), the draft x is accepted with probability p(x) (one uniform from rng); otherwise the
 * token is drawn from p with x taken out and renormalized (a second uniform). Either way it is
 * distributed as p, so a run of verified drafts samples as plain decoding does. Greedy
 * (temperature 0): out is the argmax and the draft is accepted iff it is that; nothing is drawn.
 * Returns 1 (accepted: out->id == draft), 0 (rejected: out->id is the replacement, never the
 * draft), or -1 as the samplers (no distribution). out's logprob and
 * top log-probabilities are those of the raw distribution, as the samplers report them. */
int tp_sample_verify_candidates(const tp_sampling *s, tp_rng *rng, const tp_cand *c, int n, float lse, int32_t draft,
                                tp_sample *out);
int tp_sample_verify_full(const tp_sampling *s, tp_rng *rng, const float *logits, int V, const int32_t *history,
                          int n_hist, void *work, int32_t draft, tp_sample *out);

#endif
