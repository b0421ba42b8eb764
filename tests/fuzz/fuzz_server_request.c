/* Fuzz target: the server's request validation, srv_parse_completion (launcher/server/openai.c), the
 * function every completions route (/v1/completions, /v1/engines/NAME/completions) hands its
 * body to on an HTTP thread before anything reaches the engine. It needs no model and no MPI:
 * only the server's limits (vocab_size, n_positions, KV blocks) and the tokenizer, which this
 * harness sets in a tp_server of its own.
 *
 * The first byte picks the server: bit 0 with the CodeGen tokenizer of tests/data (else ids
 * only); bit 1 a small model (vocab 1001, n_positions 128: the tokenizer's ids can exceed it;
 * 6 KV blocks of 16, fewer than 128 positions need, so the KV check fires), else a large one
 * (vocab 51200, n_positions 2048, 256 blocks). The rest is the body.
 *
 * Either the request is refused, with a status 400/404 and a body that is OpenAI's error object
 * (valid JSON, a non-empty message, type invalid_request_error, param and code strings or
 * null), or it is accepted and keeps every documented limit
 * (docs/SERVING.md): 1..64 prompts, each non-empty with every id in [0, vocab_size) and prompt +
 * max_tokens <= n_positions; n in 1..16 and n_prompts x n choices, choice i drawing from prompt
 * i / n with stream i; max_tokens in [0, 2^24] and min_tokens <= max_tokens; logprobs -1..5
 * (top logprobs per token <= 5); temperature in [0, 100], top_p in (0, 1], repetition_penalty in [0.01, 100],
 * each float as the sampler applies it 0 or normal (not 1e-300 narrowed to 0),
 * penalties in [-2, 2], top_k >= 0; at most 16 stop strings, each non-empty without NUL, and
 * stops only with a tokenizer; the KV blocks a choice needs within the server's; the prompt text
 * (echo) with one offset per token, non-decreasing and within it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/server/internal.h"
#include "util/json.h"
#include "tests/fuzz/fuzz_common.h"

static tp_tokenizer *g_tok;
static tp_server g_srv[4];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    g_tok = fuzz_tokenizer("fuzz_server_request", TPGEN_FUZZ_TOKENIZER_DATA "/codegen");
    for (int i = 0; i < 4; i++) {
        tp_server *s = &g_srv[i];
        s->o.name = "codegen-test";
        s->tok = i & 1 ? g_tok : NULL;
        pthread_mutex_init(&s->tok_mu, NULL);
        pthread_mutex_init(&s->mu, NULL);
        s->ready = 1;
        s->kv_block_size = 16;
        if (i & 2) s->vocab = 1001, s->n_positions = 128, s->met.kv_total = 6;
        else s->vocab = 51200, s->n_positions = 2048, s->met.kv_total = 256;
        s->eos = 0;
    }
    return 0;
}

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "fuzz_server_request: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                 \
        }                                                                            \
    } while (0)

static int null_or_string(const json_value *v) { return v && (v->type == JSON_NULL || v->type == JSON_STRING); }

static void check_error(int status, const jbuf *err) {
    CHECK(status == 400 || status == 404);
    char perr[256];
    json_value *root = json_parse(err->s, err->n, perr, sizeof perr);
    CHECK(root && root->type == JSON_OBJECT);
    const json_value *e = json_get(root, "error");
    CHECK(e && e->type == JSON_OBJECT);
    const json_value *m = json_get(e, "message"), *t = json_get(e, "type");
    CHECK(m && m->type == JSON_STRING && m->str_len > 0);
    CHECK(t && t->type == JSON_STRING && strcmp(t->str, "invalid_request_error") == 0);
    CHECK(null_or_string(json_get(e, "param")) && null_or_string(json_get(e, "code")));
    json_free(root);
}

static void check_job(const tp_server *s, const srv_job *j) {
    CHECK(j->refs == 1 && j->n >= 1 && j->n <= SRV_MAX_N);
    CHECK(j->n_prompts >= 1 && j->n_prompts <= SRV_MAX_PROMPTS);
    CHECK(j->n_choices == j->n_prompts * j->n);
    CHECK(j->logprobs >= -1 && j->logprobs <= SRV_MAX_LOGPROBS);
    CHECK(j->scored == !(j->echo && j->logprobs >= 0));
    CHECK(j->n_stops >= 0 && j->n_stops <= 16 && (j->n_stops == 0 || s->tok));
    for (int i = 0; i < j->n_stops; i++) CHECK(j->stops[i] && j->stops[i][0]);
    CHECK(!j->include_usage || j->stream);
    for (int p = 0; p < j->n_prompts; p++) {
        const srv_prompt *q = &j->prompts[p];
        CHECK(q->n >= 1 && q->ids && q->tok_off);
        for (int k = 0; k < q->n; k++) CHECK(q->ids[k] >= 0 && q->ids[k] < s->vocab);
        CHECK(q->text || !s->tok);
        for (int k = 0; k < q->n; k++) {
            CHECK(q->tok_off[k] <= (q->text ? q->text_len : 0));
            if (k) CHECK(q->tok_off[k] >= q->tok_off[k - 1]);
        }
    }
    for (int i = 0; i < j->n_choices; i++) {
        const srv_choice *c = &j->ch[i];
        const tp_request *r = &c->r;
        const srv_prompt *q = &j->prompts[i / j->n];
        CHECK(c->prompt == i / j->n && r->index == i);
        CHECK(r->n_prompt == q->n && memcmp(r->prompt, q->ids, q->n * sizeof(int32_t)) == 0);
        CHECK(r->params.max_new_tokens >= 0 && r->params.max_new_tokens <= 1 << 24);
        CHECK((long)r->n_prompt + r->params.max_new_tokens <= s->n_positions);
        CHECK(r->params.min_tokens >= 0 && r->params.min_tokens <= r->params.max_new_tokens);
        long blocks = ((long)r->n_prompt + r->params.max_new_tokens - 1 + s->kv_block_size - 1) / s->kv_block_size;
        CHECK(blocks <= s->met.kv_total);
        const tp_sampling *sp = &r->params.sampling;
        CHECK(sp->temperature >= 0 && sp->temperature <= 100);
        CHECK(sp->top_p > 0 && sp->top_p <= 1);
        CHECK(sp->top_k >= 0 && sp->top_k <= 1 << 24);
        CHECK(sp->repetition_penalty >= (float)TP_REP_PENALTY_MIN && sp->repetition_penalty <= TP_REP_PENALTY_MAX);
        /* as the sampler applies them: 0 or a normal float (top_p 1e-300 narrowed to 0 hung TP 1) */
        CHECK(tp_sampling_value_ok(sp->temperature) && tp_sampling_value_ok(sp->top_p));
        CHECK(tp_sampling_value_ok(r->params.presence_penalty) && tp_sampling_value_ok(r->params.frequency_penalty));
        CHECK(sp->logprobs >= 0 && sp->logprobs <= SRV_MAX_LOGPROBS);
        CHECK(r->params.presence_penalty >= -2 && r->params.presence_penalty <= 2);
        CHECK(r->params.frequency_penalty >= -2 && r->params.frequency_penalty <= 2);
        CHECK(r->params.seed == j->ch[0].r.params.seed);
        CHECK(c->tok_off && (!s->tok || c->ts));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    tp_server *s = &g_srv[data[0] & 3];
    const char *body = (const char *)data + 1;
    int status = -1;
    jbuf err = {0};
    srv_job *j = srv_parse_completion(s, body, size - 1, &status, &err);
    if (j) {
        CHECK(err.n == 0);
        check_job(s, j);
        srv_job_free(j);
    } else {
        check_error(status, &err);
    }
    jb_free(&err);
    return 0;
}
