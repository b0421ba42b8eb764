/* The table of request knobs (request_params.h) and its checks. */
#include "request_params.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler.h"

#define F(field) offsetof(tp_request_params, field)

/* key, flag, type, lo, hi, lo_open, neg_off, default, CLI default, field, id, help */
const tp_param tp_params[] = {
    {"max_tokens", "--max-new-tokens", TP_PARAM_INT, 0, 1 << 24, 0, 0, 16, 64, F(max_new_tokens),
     TP_REQ_PARAM_MAX_NEW_TOKENS, "tokens to generate at most (fewer if the sequence reaches n_positions)"},
    {"temperature", "--temperature", TP_PARAM_FLOAT, 0, 100, 0, 0, 1, 0, F(sampling.temperature),
     TP_REQ_PARAM_TEMPERATURE, "0: greedy"},
    {"top_p", "--top-p", TP_PARAM_FLOAT, 0, 1, 1, 0, 1, 1, F(sampling.top_p), TP_REQ_PARAM_TOP_P,
     "nucleus sampling (1: off)"},
    {"top_k", "--top-k", TP_PARAM_INT, -1, 1 << 24, 0, 1, 0, 0, F(sampling.top_k), TP_REQ_PARAM_TOP_K,
     "0 or -1: off"},
    /* [TP_REP_PENALTY_MIN, TP_REP_PENALTY_MAX] (sampler.h says why): 1e-50 became 0 as a float and
     * every positive logit of a repeated id logit / 0 = inf, a 500 blamed on the model */
    {"repetition_penalty", "--repetition-penalty", TP_PARAM_FLOAT, TP_REP_PENALTY_MIN, TP_REP_PENALTY_MAX, 0, 0, 1, 1,
     F(sampling.repetition_penalty), TP_REQ_PARAM_REPETITION_PENALTY, "HF's repetition penalty (1: off)"},
    {"presence_penalty", "--presence-penalty", TP_PARAM_FLOAT, -2, 2, 0, 0, 0, 0, F(presence_penalty),
     TP_REQ_PARAM_PRESENCE_PENALTY, "OpenAI's, on the generated tokens (0: off)"},
    {"frequency_penalty", "--frequency-penalty", TP_PARAM_FLOAT, -2, 2, 0, 0, 0, 0, F(frequency_penalty),
     TP_REQ_PARAM_FREQUENCY_PENALTY, "OpenAI's, on the generated tokens (0: off)"},
    {"min_tokens", "--min-tokens", TP_PARAM_INT, 0, 1 << 24, 0, 0, 0, 0, F(min_tokens), TP_REQ_PARAM_MIN_TOKENS,
     "EOS held back until this many tokens are out (vLLM's)"},
    {"ignore_eos", "--ignore-eos", TP_PARAM_BOOL, 0, 1, 0, 0, 0, 0, F(ignore_eos), TP_REQ_PARAM_OK,
     "EOS does not end the sequence"},
};
const int tp_n_params = (int)(sizeof tp_params / sizeof *tp_params);

const tp_param *tp_param_by_key(const char *key, size_t len) {
    for (int i = 0; i < tp_n_params; i++)
        if (strlen(tp_params[i].key) == len && memcmp(tp_params[i].key, key, len) == 0) return &tp_params[i];
    return NULL;
}

const tp_param *tp_param_by_flag(const char *flag) {
    for (int i = 0; i < tp_n_params; i++)
        if (strcmp(tp_params[i].flag, flag) == 0) return &tp_params[i];
    return NULL;
}

static const char *kind(const tp_param *p) { return p->type == TP_PARAM_INT ? "an integer" : "a number"; }

/* x as the shortest text that reads back as x, without an exponent where one is not needed:
 * 16777216, 100, 0.01, 1e-50, nan */
static const char *num(double x, char *buf, size_t size) {
    int plain = fabs(x) >= 1e-4 && fabs(x) < 1e15;
    for (int d = 1; d <= 17; d++) {
        snprintf(buf, size, "%.*g", d, x);
        if (x != x || (strtod(buf, NULL) == x && !(plain && strchr(buf, 'e')))) break;
    }
    return buf;
}

void tp_param_not_a_number(const tp_param *p, const char *name, const char *what, char *err, size_t err_size) {
    char lo[32], hi[32];
    snprintf(err, err_size, "%s expects %s in %c%s, %s], got %s", name, kind(p), p->lo_open ? '(' : '[',
             num(p->lo, lo, sizeof lo), num(p->hi, hi, sizeof hi), what);
}

int tp_param_check(const tp_param *p, double x, const char *name, char *err, size_t err_size) {
    int in = (p->lo_open ? x > p->lo : x >= p->lo) && x <= p->hi; /* false for NaN */
    if (!in || (p->type == TP_PARAM_INT && x != floor(x))) {
        char got[32];
        tp_param_not_a_number(p, name, num(x, got, sizeof got), err, err_size);
        return -1;
    }
    /* a float the sampler keeps: top_p 1e-300 is > 0 as a double but 0 as a float, a nucleus of nothing */
    if (p->type == TP_PARAM_FLOAT && !tp_sampling_value_ok(x)) {
        char got[32];
        num(x, got, sizeof got);
        snprintf(err, err_size, "%s expects %sa number of magnitude at least %g (it is applied as a 32-bit float, "
                 "where %s is %g), got %s", name, p->lo_open && p->lo == 0 ? "" : "0 or ", FLT_MIN, got,
                 (double)(float)x, got);
        return -1;
    }
    return 0;
}

void tp_param_set(const tp_param *p, tp_request_params *r, double x) {
    char *at = (char *)r + p->off;
    if (p->neg_off && x < 0) x = 0;
    if (p->type == TP_PARAM_FLOAT) *(float *)at = (float)x;
    else *(int *)at = (int)x;
}

double tp_param_get(const tp_param *p, const tp_request_params *r) {
    const char *at = (const char *)r + p->off;
    return p->type == TP_PARAM_FLOAT ? (double)*(const float *)at : (double)*(const int *)at;
}

tp_request_params tp_request_params_cli_default(void) {
    tp_request_params r = tp_request_params_default();
    for (int i = 0; i < tp_n_params; i++) tp_param_set(&tp_params[i], &r, tp_params[i].cli_def);
    return r;
}

tp_request_params tp_request_params_default(void) {
    return (tp_request_params){
        .max_new_tokens = 16,
        .sampling = {.temperature = 1, .top_k = 0, .top_p = 1, .repetition_penalty = 1, .logprobs = 0},
    };
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
