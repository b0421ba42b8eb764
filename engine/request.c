/* The request on its own: the server's request parser (server/openai.c) sizes the requests it
 * takes (tp_request_kv_blocks) and frees those it refuses, and its fuzz target
 * (tests/fuzz/fuzz_server_request.c) links this file alone, without the model, the scheduler or
 * MPI. */
#include <stdlib.h>
#include <string.h>

#include "generate.h"

int tp_request_kv_tokens(const tp_request *r, int n_positions) {
    long gen = 0; /* every token but the last generated one goes through the model */
    if (r->max_new_tokens > 0 && r->n_prompt < n_positions) {
        gen = (long)r->n_prompt + r->max_new_tokens - 1;
        if (gen > n_positions - 1) gen = n_positions - 1; /* the sequence stops at n_positions */
    }
    if (!r->score_prompt) return (int)gen;
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
    free(r->blocks);
    free(r->history);
    free(r->drafts);
    free(r->prompt_lps);
    free(r->prompt_top_ids);
    free(r->prompt_top_lps);
    memset(r, 0, sizeof *r);
}
