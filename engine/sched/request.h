/* The request: one type for every front end (`tpgen generate`, `tpgen score`, the server).
 *
 * Life cycle (docs/ARCHITECTURE.md, "The request life cycle"):
 *   tp_request_params_default -> the front end sets its fields -> tp_request_params_validate
 *   (the front end words the error with its own field or flag name) -> tp_request_init (the
 *   prompt and the params) -> tp_sched_submit: TP_REQ_WAITING -> admitted: TP_REQ_RUNNING ->
 *   TP_REQ_FINISHED (finish says why) -> the results read -> tp_request_free. What happens
 *   to it on the way (tokens, scores, the end) the front end learns from the scheduler's events
 *   (scheduler.h), after each call, and acts on them itself (detokenize, publish, print).
 * A request with nothing to do, or cancelled while waiting, goes from WAITING (or from nothing)
 * straight to FINISHED. A preempted request goes from RUNNING back to WAITING (at its place in
 * the queue's order) and resumes by recomputing its tokens. The scheduler (scheduler.h) owns
 * the state; the front end reads it.
 */
#ifndef TPGEN_REQUEST_H
#define TPGEN_REQUEST_H

#include <stdint.h>

#include "sampler.h"

#define TP_MAX_STOP_IDS 4

/* What a request asks for: every field named, tp_request_params_default for the rest. */
typedef struct {
    int max_new_tokens;   /* tokens to generate at most (0: none; the prompt is only scored) */
    tp_sampling sampling; /* temperature, top-k, top-p, repetition penalty, logprobs (sampler.h) */
    uint64_t seed;        /* the generator's seed; its stream is the request's index */
    int ignore_eos;       /* 1: EOS does not stop the sequence */
    /* OpenAI's additive penalties on the generated tokens' logits (0: off) and vLLM's
     * min_tokens (EOS masked until that many tokens are out). Any of them makes the step fetch
     * full logits, and the reported log-probabilities are then those of the adjusted logits. */
    float presence_penalty, frequency_penalty;
    int min_tokens;
    /* prompt-lookup speculation (speculate.h): up to speculate_k drafts per step from the last
     * speculate_n-gram (0: off) */
    int speculate_k, speculate_n;
    /* prompt scoring (echo + logprobs, `tpgen score`): the prefill also gives every prompt
     * position i >= 1 log p(prompt[i] | prompt[:i]) and its sampling.logprobs best alternatives,
     * from the same steps (one logits row per prompt token, with its target). With
     * max_new_tokens 0 the request only scores: its first n_prompt - 1 tokens are fed. */
    int score_prompt;
    /* Deadlines and priority (docs/SERVING.md, "Deadlines and priority"). priority: vLLM's
     * meaning, a lower value is served first (the scheduler's admission order, scheduler.h, puts it
     * before fairness and arrival; the least urgent running sequence is preempted first). timeout_s:
     * the request's time budget in seconds from its arrival, queueing and generation together (0:
     * none); the front end enforces it between steps (tp_sched_end, TP_FINISH_TIMEOUT), the
     * scheduler keeps no clock. */
    int priority;
    double timeout_s;
    /* tokens that end the sequence as "stop" whatever ignore_eos says, like EOS (fill-in-the-middle's
     * <eom>, engine/tokenizer/fim.h); front ends leave their text out of the completion */
    int n_stop_ids;
    int32_t stop_ids[TP_MAX_STOP_IDS];
} tp_request_params;

/* Every processing step off: temperature 1, top-k 0, top-p 1, repetition penalty 1, no
 * penalties, no logprobs, no speculation, no scoring; max_new_tokens 16 (OpenAI's default). */
tp_request_params tp_request_params_default(void);

/* The field of tp_request_params a check refused, for the front end to name (the server its
 * JSON field, the CLI its flag). */
typedef enum {
    TP_REQ_PARAM_OK = 0,
    TP_REQ_PARAM_MAX_NEW_TOKENS,    /* < 0 */
    TP_REQ_PARAM_MIN_TOKENS,        /* < 0, or more than max_new_tokens */
    TP_REQ_PARAM_TEMPERATURE,       /* not in [0, 100] */
    TP_REQ_PARAM_TOP_K,             /* < 0 */
    TP_REQ_PARAM_TOP_P,             /* not in (0, 1] */
    TP_REQ_PARAM_REPETITION_PENALTY, /* not in [TP_REP_PENALTY_MIN, TP_REP_PENALTY_MAX] */
    TP_REQ_PARAM_PRESENCE_PENALTY,  /* not in [-2, 2] */
    TP_REQ_PARAM_FREQUENCY_PENALTY, /* not in [-2, 2] */
    TP_REQ_PARAM_LOGPROBS,          /* not in [0, TP_MAX_CANDIDATES] */
    TP_REQ_PARAM_TIMEOUT,           /* not finite, or < 0 */
} tp_request_param;

/* The rules every front end shares, each field's range and min_tokens <= max_new_tokens (the
 * front ends' parsers may be stricter). Returns the first field that breaks one, or
 * TP_REQ_PARAM_OK. */
tp_request_param tp_request_params_validate(const tp_request_params *p);

/* 1 when id is one of p's stop_ids. */
int tp_request_stop_id(const tp_request_params *p, int32_t id);

typedef enum {
    TP_REQ_WAITING = 0, /* queued (tp_sched_submit, or preempted), no KV blocks */
    TP_REQ_RUNNING,     /* admitted: holds its KV blocks and a slot of the step */
    TP_REQ_FINISHED,    /* done, stopped, cancelled, timed out or failed (finish); blocks given back */
} tp_req_state;

const char *tp_req_state_name(tp_req_state s); /* "waiting" | "running" | "finished" (messages) */

/* Why a request finished. Names exist only where JSON is written (the server's finish_reason,
 * `tpgen generate --json`). */
typedef enum {
    TP_FINISH_NONE = 0, /* not finished */
    TP_FINISH_LENGTH,   /* max_new_tokens or n_positions reached, or nothing to do */
    TP_FINISH_STOP,     /* EOS, a stop id, or the front end's stop string (tp_sched_end) */
    TP_FINISH_CANCELLED,
    TP_FINISH_TIMEOUT,
    TP_FINISH_ERROR,    /* non-finite logits: error says where */
} tp_finish;

typedef struct tp_seq tp_seq; /* the scheduler's bookkeeping of a submitted request (scheduler.c only) */

/* The public request: what a front end sets (the prompt, the params with priority and time
 * budget, who sent it) and the results the scheduler writes for it to read. The scheduler's own
 * state (KV blocks, cached tokens, generator, history, queue links) is in r->seq, which only
 * scheduler.c sees. */
typedef struct tp_request tp_request;
struct tp_request {
    /* set by the front end */
    int index;            /* position in the input: the generator's stream */
    int32_t *prompt;      /* [n_prompt], owned (tp_request_free) */
    int n_prompt;
    tp_request_params params;
    /* fair admission (scheduler.h): the client that sent it and the front end's request it is a
     * choice of; the scheduler admits from the client, then the request, with the fewest
     * sequences running. 0 for both: one client (tpgen generate). */
    uint64_t client, group;
    /* prefix-cache scope (prefix_cache.h): blocks are shared only between requests of equal salt
     * (0: every request alike). The server's is its API key's and cache_salt's (docs/SERVING.md,
     * "Prefix cache and KV on demand"). */
    uint64_t cache_salt;
    void *user;           /* the front end's own: the scheduler never reads it (events carry r) */

    /* results: written by the scheduler (rank 0's one thread), read by the front end */
    tp_req_state state;
    tp_finish finish;
    int32_t *ids;         /* [n_ids] generated */
    float *logprobs;      /* [n_ids] */
    int32_t *top_ids;     /* [n_ids, sampling.logprobs] */
    float *top_lps;       /* [n_ids, sampling.logprobs] */
    int n_ids;
    char error[192];      /* why, when finish is TP_FINISH_ERROR (e.g. non-finite logits at step S) */
    long spec_drafted, spec_accepted; /* draft tokens fed, and those the target accepted (<= drafted) */
    /* prompt scores (score_prompt), allocated by tp_sched_submit; valid below n_scored, complete
     * when n_scored == n_prompt (a TP_EV_SCORED event then, before the first token's) */
    float *prompt_lps;       /* [n_prompt], [0] = NaN */
    int32_t *prompt_top_ids; /* [n_prompt, sampling.logprobs], -1 past the row's candidates */
    float *prompt_top_lps;   /* [n_prompt, sampling.logprobs] */
    int n_scored;
    int score_bad;           /* first position whose logits were not finite (inf or NaN), 0: none */
    /* prefix cache and preemption: prompt tokens served from the prefix cache at its first
     * admission (usage's cached_tokens; a resume does not change it), and how often it was
     * preempted */
    int n_prompt_cached;
    int n_preempted;

    tp_seq *seq;          /* the scheduler's, from tp_sched_submit until finished; NULL otherwise */
};

/* r = a new request: index, the prompt (ownership moves to r) and a copy of the params.
 * Everything else is zero until tp_sched_submit. */
void tp_request_init(tp_request *r, int index, int32_t *prompt, int n_prompt, const tp_request_params *p);

/* Tokens of KV cache a request fills at most, and the blocks of block_size they take: the one
 * count that the scheduler (tp_sched_submit) and refusal up front (the server's 400, `tpgen
 * generate`) share; blocks are taken as the request grows (KV on demand), not reserved.
 * Generating: prompt + max_new_tokens - 1 (the last generated token is never fed back), at most
 * n_positions - 1; none when max_new_tokens is 0 or the prompt already fills n_positions. A
 * scored prompt feeds at least its first n_prompt - 1 tokens (each predicts the next). -1: a
 * scored prompt longer than n_positions (it could never run). No model needed. */
int tp_request_kv_tokens(const tp_request *r, int n_positions);
int tp_request_kv_blocks(const tp_request *r, int n_positions, int block_size);

void tp_request_free(tp_request *r);

#endif
