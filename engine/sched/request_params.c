/* The table of request fields (request_params.h), its lookups, the defaults and the checks
 * every front end shares. Reading values into it: request_read.c. */
#include "request_params.h"

#include <float.h>
#include <limits.h>
#include <string.h>

#include "sampler.h"

#define F(field) offsetof(tp_request_fields, field)
#define R(lo, hi) {lo, hi, 0}
#define SRV TP_FRONT_SERVER
#define GEN TP_FRONT_GENERATE
#define SCORE TP_FRONT_SCORE
#define ANY64 {-9223372036854775808.0, 9223372036854775807.0, 0} /* INT64: read exactly, written as such */

/* In the server's order of checks: a request with two bad fields is refused for the first here. */
const tp_field tp_fields[] = {
    {.key = "model", .type = TP_FIELD_STRING, .fronts = SRV, .off = F(model),
     .help = "must be the served name if given (else 404 `model_not_found`)"},
    {.key = "suffix", .flag = "--suffix", .arg = "TEXT", .type = TP_FIELD_STRING, .fronts = SRV | GEN,
     .flags = TP_FIELD_NO_NUL, .off = F(suffix),
     .help = "fill in the middle: the text after the cursor, on a model with a FIM format (docs/SERVING.md, "
             "\"Fill-in-the-middle\"; on the CLI `--prompt` is the prefix and `--fim FILE` may give the format); the "
             "server refuses it on a model without one (400), or ignores it under `--ignore-suffix`"},
    {.key = "logit_bias", .type = TP_FIELD_REFUSED, .fronts = SRV, .off = F(params), /* nothing is stored */
     .help = "400 unless empty: not supported"},
    {.key = "max_tokens", .flag = "--max-new-tokens", .arg = "N", .type = TP_FIELD_INT, .fronts = SRV | GEN,
     .srv = R(0, 1 << 24), .cli = R(0, 1 << 24), .def = 16, .cli_def = 64, .off = F(params.max_new_tokens),
     .id = TP_REQ_PARAM_MAX_NEW_TOKENS,
     .help = "tokens to generate at most: the server refuses a prompt + `max_tokens` over `n_positions`, the CLI "
             "generates fewer",
     .why = "the server's default is OpenAI's"},
    {.key = "temperature", .flag = "--temperature", .arg = "T", .type = TP_FIELD_FLOAT, .fronts = SRV | GEN,
     .srv = R(0, 100), .cli = R(0, 100), .def = 1, .cli_def = 0, .off = F(params.sampling.temperature),
     .id = TP_REQ_PARAM_TEMPERATURE, .help = "0: greedy (argmax, the lowest id on ties)",
     .why = "the server's default is OpenAI's; the CLI is greedy unless told"},
    {.key = "top_p", .flag = "--top-p", .arg = "P", .type = TP_FIELD_FLOAT, .fronts = SRV | GEN,
     .srv = {0, 1, 1}, .cli = {0, 1, 1}, .def = 1, .cli_def = 1, .off = F(params.sampling.top_p),
     .id = TP_REQ_PARAM_TOP_P,
     .help = "nucleus sampling: the smallest set of most likely tokens whose mass reaches P (1: off)"},
    {.key = "top_k", .flag = "--top-k", .arg = "K", .type = TP_FIELD_INT, .fronts = SRV | GEN,
     .flags = TP_FIELD_NEG_OFF, .srv = R(-1, 1 << 24), .cli = R(-1, 1 << 24), .off = F(params.sampling.top_k),
     .id = TP_REQ_PARAM_TOP_K, .help = "the K most likely tokens (0 or -1: off; vLLM's)"},
    /* [TP_REP_PENALTY_MIN, TP_REP_PENALTY_MAX] (sampler.h says why): 1e-50 became 0 as a float and
     * every positive logit of a repeated id logit / 0 = inf, a 500 blamed on the model */
    {.key = "repetition_penalty", .flag = "--repetition-penalty", .arg = "R", .type = TP_FIELD_FLOAT,
     .fronts = SRV | GEN, .srv = R(TP_REP_PENALTY_MIN, TP_REP_PENALTY_MAX),
     .cli = R(TP_REP_PENALTY_MIN, TP_REP_PENALTY_MAX), .def = 1, .cli_def = 1,
     .off = F(params.sampling.repetition_penalty), .id = TP_REQ_PARAM_REPETITION_PENALTY,
     .help = "HF's: logits of ids already in the sequence divided by R if positive, multiplied if negative (1: off; "
             "vLLM's)"},
    {.key = "presence_penalty", .flag = "--presence-penalty", .arg = "P", .type = TP_FIELD_FLOAT, .fronts = SRV | GEN,
     .srv = R(-2, 2), .cli = R(-2, 2), .off = F(params.presence_penalty), .id = TP_REQ_PARAM_PRESENCE_PENALTY,
     .help = "OpenAI's: the logit of each token already generated is lowered by P (0: off)"},
    {.key = "frequency_penalty", .flag = "--frequency-penalty", .arg = "F", .type = TP_FIELD_FLOAT,
     .fronts = SRV | GEN, .srv = R(-2, 2), .cli = R(-2, 2), .off = F(params.frequency_penalty),
     .id = TP_REQ_PARAM_FREQUENCY_PENALTY,
     .help = "OpenAI's: and by F times the number of times it was generated (0: off)"},
    {.key = "min_tokens", .flag = "--min-tokens", .arg = "N", .type = TP_FIELD_INT, .fronts = SRV | GEN,
     .srv = R(0, 1 << 24), .cli = R(0, 1 << 24), .off = F(params.min_tokens), .id = TP_REQ_PARAM_MIN_TOKENS,
     .help = "EOS is masked until N tokens are out (at most the tokens to generate; vLLM's)"},
    {.key = "ignore_eos", .flag = "--ignore-eos", .type = TP_FIELD_BOOL, .fronts = SRV | GEN,
     .off = F(params.ignore_eos), .help = "EOS (`eos_token_id` of config.json) does not end the sequence (vLLM's)"},
    {.key = "n", .type = TP_FIELD_INT, .fronts = SRV, .srv = R(1, TP_REQ_MAX_N), .def = 1, .off = F(n),
     .help = "sequences per prompt; choice `i` of prompt `p` has index `p * n + i`"},
    {.key = "best_of", .type = TP_FIELD_INT, .fronts = SRV, .srv = R(1, TP_REQ_MAX_N), .srv_def_doc = "n",
     .off = F(best_of), .help = "only equal to `n` (tpgen returns every sequence it makes and ranks none)"},
    {.key = "logprobs", .flag = "--logprobs", .arg = "K", .type = TP_FIELD_INT, .fronts = SRV | GEN | SCORE,
     .srv = R(0, TP_REQ_API_LOGPROBS), .cli = R(0, TP_MAX_CANDIDATES), .srv_def_doc = "null",
     .off = F(params.sampling.logprobs), .id = TP_REQ_PARAM_LOGPROBS,
     .help = "the K most likely alternatives at each step, with the chosen token's log-probability (the server's "
             "`tokens`, `token_logprobs`, `top_logprobs` as `{token: logprob}`, `text_offset`)",
     .why = "the server keeps OpenAI's limit of 5, which its clients are written for (and K objects per token in "
            "every response); the CLI has the engine's own, TP_MAX_CANDIDATES, which `tpgen score` needs for "
            "reference log-probabilities. The server's null is no logprobs at all, the CLI's 0 the chosen tokens'"},
    {.key = "priority", .type = TP_FIELD_INT, .fronts = SRV, .srv = R(INT_MIN, INT_MAX), .off = F(params.priority),
     .help = "vLLM's: a lower value is served first; other than 0 only under `--scheduling-policy priority`"},
    {.key = "timeout", .type = TP_FIELD_NUMBER, .fronts = SRV, .srv = {0, 1e9, 1}, .srv_def_doc = "`--request-timeout`",
     .off = F(params.timeout_s), .id = TP_REQ_PARAM_TIMEOUT,
     .help = "the request's time budget in seconds from its arrival, queueing and generation together, at most "
             "the server's `--request-timeout` when one is set; `finish_reason` `timeout` when it runs out"},
    {.key = "stream", .type = TP_FIELD_BOOL, .fronts = SRV, .off = F(stream), .help = "Server-Sent Events (below)"},
    {.key = "echo", .type = TP_FIELD_BOOL, .fronts = SRV, .off = F(echo),
     .help = "the prompt is prepended to the text; with `logprobs`, the prompt's tokens too (the first one's "
             "logprob is null)"},
    {.key = "return_token_ids", .type = TP_FIELD_BOOL, .fronts = SRV, .off = F(return_token_ids),
     .help = "each choice gets `prompt_token_ids` and `token_ids`; in a stream, each chunk its new `token_ids` "
             "(vLLM's)"},
    {.key = "stream_options.include_usage", .type = TP_FIELD_BOOL, .fronts = SRV, .off = F(include_usage),
     .help = "a last chunk with `usage` and no choices; `stream_options` only with `stream`"},
    {.key = "seed", .flag = "--seed", .arg = "S", .type = TP_FIELD_INT64, .fronts = SRV | GEN, .srv = ANY64,
     .cli = ANY64, .srv_def_doc = "random", .off = F(params.seed),
     .help = "the same seed gives the same sampled text from either front end at any TP size (choice `k` of a "
             "request draws from stream `k`, like the k-th prompt of `--prompts-file`)",
     .why = "a request without one is seeded from the clock; the CLI's runs repeat"},
    {.key = "user", .type = TP_FIELD_STRING, .fronts = SRV, .off = F(user), .help = "ignored"},
    {.key = "cache_salt", .type = TP_FIELD_STRING, .fronts = SRV, .flags = TP_FIELD_NON_EMPTY, .off = F(cache_salt),
     .help = "prefix-cache hits only among requests with the same salt, within the API key's scope (\"The prefix "
             "cache as a side channel\"; vLLM's)"},
    {.key = "stop", .flag = "--stop", .arg = "STR", .type = TP_FIELD_STRINGS, .fronts = SRV | GEN,
     .flags = TP_FIELD_NO_NUL | TP_FIELD_NON_EMPTY, .off = F(stop),
     .help = "a string or an array of up to 16 (the flag repeated); the text ends before the first one found, "
             "`finish_reason` is `stop` (the CLI's `ids` include the token that completed it); needs a tokenizer"},
    {.key = "prompt", .type = TP_FIELD_PROMPT, .fronts = SRV, .srv_def_doc = "required", .off = F(params),
     .help = "a string, an array of strings, an array of token ids, or an array of arrays of ids (up to 64 "
             "prompts). Ids are read as 64-bit integers and must be in `[0, vocab_size)`; tpgen adds no BOS token"},
};
const int tp_n_fields = (int)(sizeof tp_fields / sizeof *tp_fields);
_Static_assert(sizeof tp_fields / sizeof *tp_fields <= 64, "tp_request_fields.given has a bit per field");

const tp_field *tp_field_by_key(const char *key, size_t len) {
    for (int i = 0; i < tp_n_fields; i++) {
        const char *k = tp_fields[i].key;
        if (k && strlen(k) == len && memcmp(k, key, len) == 0) return &tp_fields[i];
    }
    return NULL;
}

const tp_field *tp_field_by_flag(const char *flag, int front) {
    for (int i = 0; i < tp_n_fields; i++)
        if (tp_fields[i].flag && (tp_fields[i].fronts & front & ~TP_FRONT_SERVER) && strcmp(tp_fields[i].flag, flag) == 0)
            return &tp_fields[i];
    return NULL;
}

const tp_field *tp_field_of(size_t off) {
    for (int i = 0; i < tp_n_fields; i++)
        if (tp_fields[i].off == off && tp_fields[i].type != TP_FIELD_REFUSED && tp_fields[i].type != TP_FIELD_PROMPT)
            return &tp_fields[i];
    return NULL;
}

const tp_range *tp_field_range(const tp_field *f, int front) { return front == TP_FRONT_SERVER ? &f->srv : &f->cli; }

int tp_field_given(const tp_request_fields *r, const tp_field *f) { return (int)(r->given >> (f - tp_fields) & 1); }

static void *at(const tp_field *f, tp_request_fields *r) { return (char *)r + f->off; }

void tp_field_set(const tp_field *f, tp_request_fields *r, double x) {
    if ((f->flags & TP_FIELD_NEG_OFF) && x < 0) x = 0;
    switch (f->type) {
    case TP_FIELD_FLOAT: *(float *)at(f, r) = (float)x; break;
    case TP_FIELD_NUMBER: *(double *)at(f, r) = x; break;
    case TP_FIELD_INT64: *(uint64_t *)at(f, r) = (uint64_t)(int64_t)x; break;
    case TP_FIELD_INT:
    case TP_FIELD_BOOL: *(int *)at(f, r) = (int)x; break;
    default: break; /* not a scalar */
    }
}

double tp_field_get(const tp_field *f, const tp_request_fields *r) {
    const char *p = (const char *)r + f->off;
    switch (f->type) {
    case TP_FIELD_FLOAT: return (double)*(const float *)p;
    case TP_FIELD_NUMBER: return *(const double *)p;
    case TP_FIELD_INT64: return (double)(int64_t) * (const uint64_t *)p;
    case TP_FIELD_INT:
    case TP_FIELD_BOOL: return (double)*(const int *)p;
    default: return 0;
    }
}

tp_request_fields tp_request_fields_default(int front) {
    tp_request_fields r;
    memset(&r, 0, sizeof r);
    for (int i = 0; i < tp_n_fields; i++) {
        const tp_field *f = &tp_fields[i];
        if (f->type <= TP_FIELD_BOOL) tp_field_set(f, &r, front == TP_FRONT_SERVER ? f->def : f->cli_def);
    }
    return r;
}

tp_request_params tp_request_params_default(void) { return tp_request_fields_default(TP_FRONT_SERVER).params; }

static int in(double x, double lo, double hi) { return x >= lo && x <= hi; } /* false for NaN */

/* Each of the engine's knobs in the wider of its two ranges (a float's bounds as floats: 0.01
 * narrowed is just below 0.01), then the rules across fields. The time budget is the one field
 * whose stored value is wider than what a client writes: 0 is none (--request-timeout's default). */
tp_request_param tp_request_params_validate(const tp_request_params *p) {
    tp_request_fields r;
    r.params = *p;
    for (int i = 0; i < tp_n_fields; i++) {
        const tp_field *t = &tp_fields[i];
        if (t->id == TP_REQ_PARAM_OK || t->id == TP_REQ_PARAM_TIMEOUT) continue;
        double x = tp_field_get(t, &r);
        const tp_range *g = &t->srv; /* the wider of the ranges of the front ends that take it */
        if (!(t->fronts & TP_FRONT_SERVER) || ((t->fronts & ~TP_FRONT_SERVER) && t->cli.hi > t->srv.hi)) g = &t->cli;
        double lo = t->type == TP_FIELD_FLOAT ? (double)(float)g->lo : g->lo;
        double hi = t->type == TP_FIELD_FLOAT ? (double)(float)g->hi : g->hi;
        if (t->flags & TP_FIELD_NEG_OFF) lo = 0; /* stored as 0 */
        if (!(g->lo_open ? x > lo : x >= lo) || !(x <= hi)) return t->id; /* NaN too */
    }
    if (p->min_tokens > p->max_new_tokens) return TP_REQ_PARAM_MIN_TOKENS;
    if (!in(p->timeout_s, 0, DBL_MAX)) return TP_REQ_PARAM_TIMEOUT; /* NaN and inf too */
    return TP_REQ_PARAM_OK;
}
