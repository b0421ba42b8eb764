/* Generation and scoring jobs, driven by rank 0 over tp_step_run.
 *
 * Requests run on the online scheduler (scheduler.h); tp_generate is the batch job over it. A
 * sequence stops ("length") at max_new_tokens or when it holds n_positions tokens; a prompt that
 * already does gets no tokens. A request whose logits are not finite (inf or NaN) fails alone
 * ("error", r->error names the step and position); no token is drawn from them.
 */
#ifndef TPGEN_GENERATE_H
#define TPGEN_GENERATE_H

#include <stdint.h>

#include "kv_cache.h"
#include "model.h"
#include "sampler.h"

typedef struct tp_request tp_request;
struct tp_request {
    int index;            /* position in the input */
    int32_t *prompt;      /* [n_prompt] */
    int n_prompt;
    int max_new_tokens;
    tp_sampling sampling;
    uint64_t seed;
    int ignore_eos;
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

    /* results */
    int32_t *ids;         /* [n_ids] generated */
    float *logprobs;      /* [n_ids] */
    int32_t *top_ids;     /* [n_ids, sampling.logprobs] */
    float *top_lps;       /* [n_ids, sampling.logprobs] */
    int n_ids;
    const char *finish_reason; /* "length" | "stop" | "cancelled" | "error" */
    char error[192];           /* why, when finish_reason is "error" (e.g. non-finite logits at step S) */
    long spec_drafted, spec_accepted; /* draft tokens fed, and those the target accepted (<= drafted) */
    /* prompt scores (score_prompt), allocated by tp_sched_submit; valid below n_scored, complete
     * when n_scored == n_prompt (on_scored is called then, before the first token) */
    float *prompt_lps;       /* [n_prompt], [0] = NaN */
    int32_t *prompt_top_ids; /* [n_prompt, sampling.logprobs], -1 past the row's candidates */
    float *prompt_top_lps;   /* [n_prompt, sampling.logprobs] */
    int n_scored;
    int score_bad;           /* first position whose logits were not finite (inf or NaN), 0: none */

    /* scheduler state */
    int state;            /* 0 waiting, 1 running, 2 done */
    int n_cached;         /* tokens already in the KV cache */
    int32_t *blocks;      /* [n_blocks] its block table */
    int n_blocks;
    int slot;             /* row of the step's block table */
    tp_rng rng;
    int32_t *history;     /* prompt + generated, for the repetition penalty and the drafts */
    int32_t *drafts;      /* [speculate_k] this step's drafts */
    int n_drafts;         /* fed in this step (0: a plain decode or prefill row) */
    tp_request *next;     /* waiting queue */
};

typedef struct {
    /* Called on rank 0 after each new token of r; returns 1 to stop r now ("stop", e.g. a
     * stop string matched). May be NULL. */
    int (*on_token)(void *ctx, tp_request *r);
    /* Called on rank 0 once r is finished (or cancelled), in completion order. */
    void (*on_done)(void *ctx, tp_request *r);
    void *ctx;
    /* Called on rank 0 once r's prompt is scored (score_prompt; also when it has one token and
     * nothing to score), before any token of r. May be NULL. */
    void (*on_scored)(void *ctx, tp_request *r);
} tp_generate_hooks;

/* Rank 0: runs all requests to completion on the scheduler (the caller stops the workers with
 * tp_step_stop; other ranks are in tp_step_worker_loop). Every request must fit the KV cache
 * (tp_request_blocks <= its blocks). Returns the number of steps run. */
long tp_generate(tp_model *m, tp_request *reqs, int n, const tp_generate_hooks *hooks);

/* Tokens of KV cache a request fills, and the blocks of block_size it reserves: the one count
 * that admission (the scheduler) and refusal up front (the server's 400, `tpgen generate`) share.
 * Generating: prompt + max_new_tokens - 1 (the last generated token is never fed back), at most
 * n_positions - 1; none when max_new_tokens is 0 or the prompt already fills n_positions. A
 * scored prompt feeds at least its first n_prompt - 1 tokens (each predicts the next). -1: a
 * scored prompt longer than n_positions (it could never run). request.c: no model needed. */
int tp_request_kv_tokens(const tp_request *r, int n_positions);
int tp_request_kv_blocks(const tp_request *r, int n_positions, int block_size);
/* The same for the model's n_positions and KV block size (after tp_model_alloc). */
int tp_request_tokens(const tp_model *m, const tp_request *r);
int tp_request_blocks(const tp_model *m, const tp_request *r);

/* Rank 0: scores ids[0..n) (a score_prompt request run on the scheduler, alone):
 * logprobs[i] = log p(ids[i] | ids[:i]) for i >= 1 (logprobs[0] = NaN) and the k best
 * alternatives of each position into top_ids/top_lps [n, k]. Returns 0, or the first position
 * whose logits were not finite (inf or NaN: no log-probability there). */
int tp_score(tp_model *m, const int32_t *ids, int n, int k, float *logprobs, int32_t *top_ids, float *top_lps);

void tp_request_free(tp_request *r);

#endif
