/* tp_request_free on its own: the server's request parser (server/openai.c) frees requests it
 * refuses, and its fuzz target (tests/fuzz/fuzz_server_request.c) links this file alone, without
 * the model, the scheduler or MPI. */
#include <stdlib.h>
#include <string.h>

#include "generate.h"

void tp_request_free(tp_request *r) {
    free(r->prompt);
    free(r->ids);
    free(r->logprobs);
    free(r->top_ids);
    free(r->top_lps);
    free(r->blocks);
    free(r->history);
    free(r->drafts);
    memset(r, 0, sizeof *r);
}
