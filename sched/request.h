/* The request: one type for every front end (`tpgen generate`, `tpgen score`, the server).
 *
 * Life cycle (docs/ARCHITECTURE.md, "The request life cycle"):
 *   tp_request_params_default -> the front end sets its fields -> tp_request_params_validate
 *   (the front end words the error with its own field or flag name) -> tp_request_init (the
 *   prompt and the params) -> tp_sched_submit: TP_REQ_WAITING -> admitted: TP_REQ_RUNNING ->
 *   TP_REQ_FINISHED (finish_reason says why) -> the results read -> tp_request_free.
 * A request with nothing to do, or cancelled while waiting, goes from WAITING (or from nothing)
 * straight to FINISHED. A preempted request goes from RUNNING back to WAITING (at the queue's
 * front) and resumes by recomputing its tokens. The scheduler (scheduler.h) owns the state; the front end reads it.
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
     * meaning, a lower value is served first; the scheduler's waiting queue is ordered by
     * (priority, arrival), so with every priority 0 (fcfs) it is plain arrival order. timeout_s:
     * the request's time budget in seconds from its arrival, queueing and generation together (0:
     * none); the front end enforces it between steps (tp_sched_end with "timeout"), the
     * scheduler keeps no clock. */
    int priority;
    double timeout_s;
    /* tokens that end the sequence as "stop" whatever ignore_eos says, like EOS (fill-in-the-middle's
     * <eom>, tokenizer/fim.h); front ends leave their text out of the completion */
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
    TP_REQ_FINISHED,    /* done, stopped, cancelled, timed out or failed (finish_reason); blocks given back */
} tp_req_state;

const char *tp_req_state_name(tp_req_state s); /* "waiting" | "running" | "finished" */

typedef struct tp_request tp_request;
struct tp_request {
    int index;            /* position in the input: the generator's stream */
    int32_t *prompt;      /* [n_prompt], owned (tp_request_free) */
    int n_prompt;
    tp_request_params params;

    /* results */
    int32_t *ids;         /* [n_ids] generated */
    float *logprobs;      /* [n_ids] */
    int32_t *top_ids;     /* [n_ids, sampling.logprobs] */
    float *top_lps;       /* [n_ids, sampling.logprobs] */
    int n_ids;
    const char *finish_reason; /* "length" | "stop" | "cancelled" | "timeout" | "error" */
    char error[192];           /* why, when finish_reason is "error" (e.g. non-finite logits at step S) */
    long spec_drafted, spec_accepted; /* draft tokens fed, and those the target accepted (<= drafted) */
    /* prompt scores (score_prompt), allocated by tp_sched_submit; valid below n_scored, complete
     * when n_scored == n_prompt (on_scored is called then, before the first token) */
    float *prompt_lps;       /* [n_prompt], [0] = NaN */
    int32_t *prompt_top_ids; /* [n_prompt, sampling.logprobs], -1 past the row's candidates */
    float *prompt_top_lps;   /* [n_prompt, sampling.logprobs] */
    int n_scored;
    int score_bad;           /* first position whose logits were not finite (inf or NaN), 0: none */
    /* prefix cache and preemption (scheduler.h): prompt tokens served from the prefix cache at
     * its first admission (usage's cached_tokens), and how often it was preempted */
    int n_prompt_cached;
    int n_preempted;

    /* scheduler state */
    tp_req_state state;
    int n_cached;         /* tokens already in the KV cache */
    int32_t *blocks;      /* [n_blocks] its block table */
    int n_blocks;
    int slot;             /* row of the step's block table */
    tp_rng rng;
    int32_t *history;     /* prompt + generated, for the repetition penalty and the drafts */
    int32_t *drafts;      /* [speculate_k] this step's drafts */
    int n_drafts;         /* fed in this step (0: a plain decode or prefill row) */
    long arrival;         /* submit order (tp_sched_submit): the queue's tie-break among equal priorities */
    int n_reg;            /* leading blocks offered to the prefix cache (registered or not) */
    long admitted_at;     /* admission order (the latest admission, resumes included) */
    int n_passed;         /* waiting: times a request behind it was admitted first */
    tp_request *next;     /* waiting queue */
};

/* r = a new request: index, the prompt (ownership moves to r) and a copy of the params.
 * Everything else is zero until tp_sched_submit. */
void tp_request_init(tp_request *r, int index, int32_t *prompt, int n_prompt, const tp_request_params *p);

/* What the front end hears of a request, on rank 0. */
typedef struct {
    /* Called after each new token of r; returns 1 to stop r now ("stop", e.g. a stop string
     * matched). May be NULL. */
    int (*on_token)(void *ctx, tp_request *r);
    /* Called once r is finished (or cancelled), in completion order. */
    void (*on_done)(void *ctx, tp_request *r);
    void *ctx;
    /* Called once r's prompt is scored (score_prompt; also when it has one token and nothing to
     * score), before any token of r. May be NULL. */
    void (*on_scored)(void *ctx, tp_request *r);
} tp_request_hooks;

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
