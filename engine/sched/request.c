/* The request on its own: the front ends build their requests here (tp_request_init; the
 * parameters' defaults and checks are request_params.c's), the server's request parser
 * (launcher/server/openai.c) sizes the requests it takes (tp_request_kv_blocks) and frees those it
 * refuses, and its fuzz target (tests/fuzz/fuzz_server_request.c) links this file alone, without
 * the model, the scheduler or MPI. */
#include "request.h"

#include <stdlib.h>
#include <string.h>

int tp_request_stop_id(const tp_request_params *p, int32_t id) {
    for (int i = 0; i < p->n_stop_ids && i < TP_MAX_STOP_IDS; i++)
        if (p->stop_ids[i] == id) return 1;
    return 0;
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
