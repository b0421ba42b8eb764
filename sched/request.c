/* The request on its own: the front ends build (tp_request_init) and check
 * (tp_request_params_validate) their requests here, the server's request parser
 * (server/openai.c) sizes the requests it takes (tp_request_kv_blocks) and frees those it
 * refuses, and its fuzz target (tests/fuzz/fuzz_server_request.c) links this file alone, without
 * the model, the scheduler or MPI. */
#include "request.h"
#include "request_params.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

tp_request_params tp_request_params_default(void) {
    return (tp_request_params){
        .max_new_tokens = 16,
        .sampling = {.temperature = 1, .top_k = 0, .top_p = 1, .repetition_penalty = 1, .logprobs = 0},
    };
}

int tp_request_stop_id(const tp_request_params *p, int32_t id) {
    for (int i = 0; i < p->n_stop_ids && i < TP_MAX_STOP_IDS; i++)
        if (p->stop_ids[i] == id) return 1;
    return 0;
}

static int in(double x, double lo, double hi) { return x >= lo && x <= hi; } /* false for NaN */

/* Each table field in its range (request_params.c; a float's bounds as floats: 0.01 narrowed is
 * just below 0.01), then the rules across fields and those of the fields outside the table. */
tp_request_param tp_request_params_validate(const tp_request_params *p) {
    for (int i = 0; i < tp_n_params; i++) {
        const tp_param *t = &tp_params[i];
        if (t->type == TP_PARAM_BOOL) continue;
        double x = tp_param_get(t, p);
        double lo = t->type == TP_PARAM_FLOAT ? (double)(float)t->lo : t->lo;
        double hi = t->type == TP_PARAM_FLOAT ? (double)(float)t->hi : t->hi;
        if (t->neg_off) lo = 0; /* stored as 0 */
        if (!(t->lo_open ? x > lo : x >= lo) || !(x <= hi)) return t->id; /* NaN too */
    }
    if (p->min_tokens > p->max_new_tokens) return TP_REQ_PARAM_MIN_TOKENS;
    if (!in(p->sampling.logprobs, 0, TP_MAX_CANDIDATES)) return TP_REQ_PARAM_LOGPROBS;
    if (!in(p->timeout_s, 0, DBL_MAX)) return TP_REQ_PARAM_TIMEOUT; /* NaN and inf too */
    return TP_REQ_PARAM_OK;
}

const char *tp_req_state_name(tp_req_state s) {
    switch (s) {
    case TP_REQ_WAITING: return "waiting";
    case TP_REQ_RUNNING: return "running";
    case TP_REQ_FINISHED: return "finished";
    }
    return "?";
}

void tp_request_init(tp_request *r, int index, int32_t *prompt, int n_prompt, const tp_request_params *p) {
    memset(r, 0, sizeof *r);
    r->index = index;
    r->prompt = prompt;
    r->n_prompt = n_prompt;
    r->params = *p;
    r->state = TP_REQ_WAITING;
}

int tp_request_kv_tokens(const tp_request *r, int n_positions) {
    const tp_request_params *p = &r->params;
    long gen = 0; /* every token but the last generated one goes through the model */
    if (p->max_new_tokens > 0 && r->n_prompt < n_positions) {
        gen = (long)r->n_prompt + p->max_new_tokens - 1;
        if (gen > n_positions - 1) gen = n_positions - 1; /* the sequence stops at n_positions */
    }
    if (!p->score_prompt) return (int)gen;
    if (r->n_prompt > n_positions) return -1;
    return r->n_prompt - 1 > gen ? r->n_prompt - 1 : (int)gen; /* all but the last prompt token */
}

int tp_request_kv_blocks(const tp_request *r, int n_positions, int block_size) {
    int t = tp_request_kv_tokens(r, n_positions);
    return t < 0 ? -1 : (t + block_size - 1) / block_size;
}

void tp_request_free(tp_request *r) {
    free(r->prompt);
    free(r->ids);
    free(r->logprobs);
    free(r->top_ids);
    free(r->top_lps);
    free(r->prompt_lps);
    free(r->prompt_top_ids);
    free(r->prompt_top_lps);
    memset(r, 0, sizeof *r);
}
