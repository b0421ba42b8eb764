/* The OpenAI completions API: the request (validated into a job) and the response bodies. */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "sched/request_params.h"
#include "util/json.h"
#include "util/log.h"

void srv_error_json(jbuf *b, const char *message, const char *type, const char *param, const char *code) {
    jb_str(b, "{\"error\": {\"message\": ");
    jb_json(b, message, strlen(message));
    jb_str(b, ", \"type\": ");
    jb_json(b, type, strlen(type));
    jb_str(b, ", \"param\": ");
    if (param) jb_json(b, param, strlen(param));
    else jb_str(b, "null");
    jb_str(b, ", \"code\": ");
    if (code) jb_json(b, code, strlen(code));
    else jb_str(b, "null");
    jb_str(b, "}}");
}

void srv_job_free(srv_job *j) {
    if (!j) return;
    for (int i = 0; i < j->n_choices; i++) {
        srv_choice *c = &j->ch[i];
        tp_request_free(&c->r);
        tp_text_stream_free(c->ts);
        jb_free(&c->text);
        free(c->tok_off);
    }
    for (int i = 0; i < j->n_prompts; i++) {
        srv_prompt *p = &j->prompts[i];
        free(p->ids); free(p->text); free(p->tok_off); free(p->lps); free(p->top_ids); free(p->top_lps);
    }
    for (int i = 0; i < j->n_stops; i++) free(j->stops[i]);
    free(j->ch);
    free(j->prompts);
    pthread_cond_destroy(&j->cv);
    free(j);
}

/* A 400 (or other) with the message; returns NULL so parse can `return bad(...)`. */
typedef struct {
    int *status;
    jbuf *err;
} errctx;

static srv_job *fail(errctx *e, int status, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static srv_job *fail(errctx *e, int status, const char *param, const char *code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    *e->status = status;
    srv_error_json(e->err, msg, status == 503 ? "server_error" : "invalid_request_error", param, code);
    return NULL;
}

static const char *type_of(const json_value *v) {
    if (v->type == JSON_NUMBER) return v->is_integer ? "integer" : "number";
    return json_type_name(v->type);
}

/* Optional typed fields: 0 absent or null (default kept), 1 set, -1 wrong type (error written). */
static int get_number(errctx *e, const json_value *root, const char *key, double lo, double hi, int lo_open,
                      double *out) {
    const json_value *v = json_get(root, key);
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type != JSON_NUMBER) {
        fail(e, 400, key, NULL, "'%s' must be a number, got %s", key, type_of(v));
        return -1;
    }
    if (!(lo_open ? v->number > lo : v->number >= lo) || !(v->number <= hi)) {
        fail(e, 400, key, NULL, "'%s' must be in %s%g, %g], got %g", key, lo_open ? "(" : "[", lo, hi, v->number);
        return -1;
    }
    *out = v->number;
    return 1;
}

static int get_int(errctx *e, const json_value *root, const char *key, long long lo, long long hi, long long *out) {
    const json_value *v = json_get(root, key);
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type != JSON_NUMBER || !v->is_integer) {
        fail(e, 400, key, NULL, "'%s' must be an integer, got %s", key, type_of(v));
        return -1;
    }
    if (v->integer < lo || v->integer > hi) {
        fail(e, 400, key, NULL, "'%s' must be in [%lld, %lld], got %lld", key, lo, hi, (long long)v->integer);
        return -1;
    }
    *out = v->integer;
    return 1;
}

static int get_bool(errctx *e, const json_value *root, const char *key, int *out) {
    const json_value *v = json_get(root, key);
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type != JSON_BOOL) {
        fail(e, 400, key, NULL, "'%s' must be a boolean, got %s", key, type_of(v));
        return -1;
    }
    *out = v->boolean;
    return 1;
}

uint64_t srv_salt_of(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h ? h : 1;
}

/* The fields of the knobs' table (engine/sched/request_params.h), each read by its key into rp: absent
 * or null keeps the default; a bad value is the table's message, the one `tpgen generate` gives
 * for its flag. Returns -1 with the 400 written. */
static int get_table_params(errctx *e, const json_value *root, tp_request_params *rp) {
    for (int i = 0; i < tp_n_params; i++) {
        const tp_param *p = &tp_params[i];
        const json_value *v = json_get(root, p->key);
        if (!v || v->type == JSON_NULL) continue;
        char name[48], msg[512];
        snprintf(name, sizeof name, "'%s'", p->key);
        if (p->type == TP_PARAM_BOOL) {
            int b;
            if (get_bool(e, root, p->key, &b) < 0) return -1;
            tp_param_set(p, rp, b);
            continue;
        }
        if (v->type != JSON_NUMBER) {
            fail(e, 400, p->key, NULL, "'%s' must be %s, got %s", p->key, p->type == TP_PARAM_INT ? "an integer" : "a number",
                 type_of(v));
            return -1;
        }
        double x = v->is_integer ? (double)v->integer : v->number;
        if (tp_param_check(p, x, name, msg, sizeof msg)) {
            fail(e, 400, p->key, NULL, "%s", msg);
            return -1;
        }
        tp_param_set(p, rp, x);
    }
    return 0;
}

/* The request rules every front end shares (tp_request_params_validate), worded with the JSON
 * field: the parsers above check each field's range, so only min_tokens > max_tokens reaches
 * here in practice. Returns 1 (and the 400) when one is broken. */
static int bad_params(errctx *e, const tp_request_params *p) {
    static const char *const field[] = {
        [TP_REQ_PARAM_MAX_NEW_TOKENS] = "max_tokens",     [TP_REQ_PARAM_MIN_TOKENS] = "min_tokens",
        [TP_REQ_PARAM_TEMPERATURE] = "temperature",       [TP_REQ_PARAM_TOP_K] = "top_k",
        [TP_REQ_PARAM_TOP_P] = "top_p",                   [TP_REQ_PARAM_REPETITION_PENALTY] = "repetition_penalty",
        [TP_REQ_PARAM_PRESENCE_PENALTY] = "presence_penalty", [TP_REQ_PARAM_FREQUENCY_PENALTY] = "frequency_penalty",
        [TP_REQ_PARAM_LOGPROBS] = "logprobs",                [TP_REQ_PARAM_TIMEOUT] = "timeout",
    };
    tp_request_param bad = tp_request_params_validate(p);
    if (bad == TP_REQ_PARAM_OK) return 0;
    if (bad == TP_REQ_PARAM_MIN_TOKENS)
        fail(e, 400, "min_tokens", NULL, "'min_tokens' %d exceeds 'max_tokens' %d", p->min_tokens, p->max_new_tokens);
    else
        fail(e, 400, field[bad], NULL, "'%s' is out of the range tpgen applies", field[bad]);
    return 1;
}

/* An array of token ids: 64-bit integers, each in [0, vocab). */
static int parse_ids(tp_server *s, errctx *e, const json_value *a, int which, srv_prompt *p) {
    if (a->n == 0) {
        fail(e, 400, "prompt", NULL, "prompt %d is an empty list of token ids", which);
        return -1;
    }
    p->ids = tp_malloc(a->n * sizeof(int32_t));
    for (size_t i = 0; i < a->n; i++) {
        const json_value *v = &a->items[i];
        if (v->type != JSON_NUMBER) {
            fail(e, 400, "prompt", NULL, "prompt %d: token %zu is a %s, not an integer id", which, i, type_of(v));
            return -1;
        }
        if (!v->is_integer && v->number == floor(v->number) && v->number >= 0 && v->number < s->vocab) {
            p->ids[i] = (int32_t)v->number; /* written with an exponent, like 1e2 */
            continue;
        }
        if (!v->is_integer) {
            if (v->number == floor(v->number))
                fail(e, 400, "prompt", NULL, "prompt %d: token id %.0f at position %zu is out of range [0, %d)", which,
                     v->number, i, s->vocab);
            else
                fail(e, 400, "prompt", NULL, "prompt %d: token %zu is %.17g, not an integer id", which, i, v->number);
            return -1;
        }
        if (v->integer < 0 || v->integer >= s->vocab) {
            fail(e, 400, "prompt", NULL, "prompt %d: token id %lld at position %zu is out of range [0, %d)", which,
                 (long long)v->integer, i, s->vocab);
            return -1;
        }
        p->ids[i] = (int32_t)v->integer;
    }
    p->n = (int)a->n;
    return 0;
}

/* The request's `suffix` on a FIM-capable model, encoded once for all its prompts. */
typedef struct {
    int32_t *ids; /* [n] the suffix as plain text (tp_tokenizer_encode_text) */
    size_t n;
} fim_suffix;

/* A prompt of n tokens and max_tokens more do not fit the context: the 400, -1. */
static int too_long(tp_server *s, errctx *e, long long n, long long max_tokens, int which) {
    if (n + max_tokens <= s->n_positions) return 0;
    fail(e, 400, "max_tokens", NULL, "This model's maximum context length is %d tokens, however you requested %lld "
         "tokens (%lld in prompt %d, %lld for the completion); reduce the prompt or max_tokens",
         s->n_positions, n + max_tokens, n, which, max_tokens);
    return -1;
}

/* ids the model cannot take: the 400 on param ("prompt %d" or "suffix" in the message), -1 */
static int out_of_vocab(tp_server *s, errctx *e, const int32_t *ids, size_t n, const char *param, int which) {
    char what[32];
    snprintf(what, sizeof what, which >= 0 ? "%s %d" : "%s", param, which);
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= s->vocab) {
            fail(e, 400, param, NULL, "%s encodes to token id %d, out of the model's vocab_size %d", what, ids[i],
                 s->vocab);
            return -1;
        }
    return 0;
}

/* Encodes the suffix once (not once per prompt: a 7 MiB suffix and 64 prompts cost 64 encodings
 * and 64 copies before), and refuses it at once when it cannot fit the context with the format's
 * tokens and max_tokens whatever the prefix: by its length in bytes before it is encoded, else
 * by its ids. 0, or -1 after fail. */
static int encode_suffix(tp_server *s, errctx *e, const json_value *suffix, long long max_tokens, fim_suffix *fs) {
    char err[256];
    /* at least this many tokens, whatever they are: refused before it is encoded */
    long long least = (long long)(suffix->str_len / tp_tokenizer_max_token_bytes(s->tok));
    if (least + tp_fim_tokens(s->o.fim) + max_tokens > s->n_positions) {
        fail(e, 400, "suffix", NULL, "This model's maximum context length is %d tokens, however the suffix alone "
             "is at least %lld tokens (%zu bytes, at most %zu bytes a token) before any prefix, with max_tokens "
             "%lld; shorten the suffix or max_tokens", s->n_positions, least, suffix->str_len,
             tp_tokenizer_max_token_bytes(s->tok), max_tokens);
        return -1;
    }
    pthread_mutex_lock(&s->tok_mu);
    int rc = tp_tokenizer_encode_text(s->tok, suffix->str, suffix->str_len, &fs->ids, &fs->n, err, sizeof err);
    pthread_mutex_unlock(&s->tok_mu);
    if (rc) {
        fail(e, 400, "suffix", NULL, "suffix: %s", err);
        return -1;
    }
    if (out_of_vocab(s, e, fs->ids, fs->n, "suffix", -1)) return -1;
    long long fixed = (long long)fs->n + tp_fim_tokens(s->o.fim);
    if (fixed + max_tokens > s->n_positions) {
        fail(e, 400, "suffix", NULL, "This model's maximum context length is %d tokens, however the suffix alone "
             "is %zu tokens (%lld with the fill-in-the-middle format's, before any prefix) and max_tokens %lld; "
             "shorten the suffix or max_tokens", s->n_positions, fs->n, fixed, max_tokens);
        return -1;
    }
    return 0;
}

/* fs: NULL, or the request's suffix on a FIM-capable model: the prompt is then the FIM prompt of
 * prefix v and the suffix (engine/tokenizer/fim.h). A prompt too long for the context is refused here,
 * before the next one is encoded. */
static int parse_text(tp_server *s, errctx *e, const json_value *v, const fim_suffix *fs, long long max_tokens,
                      int which, srv_prompt *p) {
    if (!s->tok) {
        fail(e, 400, "prompt", NULL, "prompt %d is text, but the model directory has no tokenizer "
                                     "(vocab.json + merges.txt, or tokenizer.json); send token ids", which);
        return -1;
    }
    if (v->str_len == 0 && !fs) {
        fail(e, 400, "prompt", NULL, "prompt %d is empty (tpgen adds no BOS token)", which);
        return -1;
    }
    char err[256];
    int32_t *ids = NULL;
    size_t n = 0;
    pthread_mutex_lock(&s->tok_mu);
    int rc = fs ? tp_fim_assemble(s->o.fim, s->tok, v->str, v->str_len, fs->ids, fs->n, &ids, &n, err, sizeof err)
                : tp_tokenizer_encode(s->tok, v->str, v->str_len, &ids, &n, err, sizeof err);
    pthread_mutex_unlock(&s->tok_mu);
    if (rc) {
        fail(e, 400, "prompt", NULL, "prompt %d: %s", which, err);
        return -1;
    }
    if (out_of_vocab(s, e, ids, n, "prompt", which) || too_long(s, e, (long long)n, max_tokens, which)) {
        free(ids);
        return -1;
    }
    p->ids = ids;
    p->n = (int)n;
    if (fs) return 0; /* echo: the FIM prompt's text, from its ids (prompt_offsets) */
    p->text = tp_malloc(v->str_len + 1);
    memcpy(p->text, v->str, v->str_len + 1);
    p->text_len = v->str_len;
    return 0;
}

/* Text of a prompt for echo, and the offset of each of its tokens in it. */
static void prompt_offsets(tp_server *s, srv_prompt *p) {
    p->tok_off = tp_calloc(p->n, sizeof(size_t));
    if (!s->tok) return;
    tp_detok_stream *d = tp_detok_stream_new(s->tok, 1);
    char *out = NULL;
    size_t len = 0;
    for (int i = 0; i < p->n; i++) {
        p->tok_off[i] = len;
        tp_detok_stream_push(d, p->ids[i], &out, &len);
    }
    tp_detok_stream_flush(d, &out, &len);
    tp_detok_stream_free(d);
    if (!p->text) {
        p->text = out ? out : tp_strdup("");
        p->text_len = out ? len : 0;
    } else free(out);
}

/* The request's prompts into j->prompts (j->n_prompts of them): a string, an array of strings,
 * token ids or arrays of token ids; with suffix, FIM prompts of text. 0, or -1 after fail. */
static int parse_prompts(tp_server *s, errctx *e, const json_value *p, const json_value *suffix, long long max_tokens,
                         srv_job *j) {
    if (p->type != JSON_STRING && p->type != JSON_ARRAY) {
        fail(e, 400, "prompt", NULL, "'prompt' must be a string, an array of strings, an array of token ids or an "
             "array of arrays of token ids, got %s", type_of(p));
        return -1;
    }
    if (p->type == JSON_ARRAY && p->n == 0) {
        fail(e, 400, "prompt", NULL, "'prompt' is an empty array");
        return -1;
    }
    json_type t0 = p->type == JSON_STRING ? JSON_STRING : p->items[0].type;
    if (suffix && t0 != JSON_STRING) {
        fail(e, 400, "suffix", NULL, "'suffix' needs text prompts (a string or an array of strings): the "
                                     "fill-in-the-middle prompt is built from text");
        return -1;
    }
    if (p->type == JSON_ARRAY && t0 != JSON_NUMBER && p->n > SRV_MAX_PROMPTS) {
        fail(e, 400, "prompt", NULL, "at most %d prompts per request, got %zu", SRV_MAX_PROMPTS, p->n);
        return -1;
    }
    fim_suffix fs = {NULL, 0};
    if (suffix && (!s->tok || encode_suffix(s, e, suffix, max_tokens, &fs))) {
        if (!s->tok) fail(e, 400, "suffix", NULL, "'suffix' needs a tokenizer in the model directory");
        free(fs.ids);
        return -1;
    }
    const fim_suffix *fsp = suffix ? &fs : NULL;
    int rc = 0;
    if (p->type == JSON_STRING || t0 == JSON_NUMBER) { /* one prompt of text or of ids */
        j->prompts = tp_calloc(1, sizeof *j->prompts);
        j->n_prompts = 1;
        rc = p->type == JSON_STRING ? parse_text(s, e, p, fsp, max_tokens, 0, &j->prompts[0])
                                    : parse_ids(s, e, p, 0, &j->prompts[0]);
    } else {
        j->prompts = tp_calloc(p->n, sizeof *j->prompts);
        for (size_t i = 0; rc == 0 && i < p->n; i++) {
            const json_value *x = &p->items[i];
            j->n_prompts = (int)i + 1;
            if (x->type == JSON_STRING) rc = parse_text(s, e, x, fsp, max_tokens, (int)i, &j->prompts[i]);
            else if (x->type == JSON_ARRAY && !suffix) rc = parse_ids(s, e, x, (int)i, &j->prompts[i]);
            else if (x->type == JSON_ARRAY) {
                fail(e, 400, "suffix", NULL, "'suffix' needs text prompts; prompt %zu is token ids", i);
                rc = -1;
            } else {
                fail(e, 400, "prompt", NULL, "prompt %zu is a %s; 'prompt' must be a string, an array of strings, "
                     "an array of token ids or an array of arrays of token ids", i, type_of(x));
                rc = -1;
            }
        }
    }
    free(fs.ids);
    return rc;
}

static srv_job *parse(tp_server *s, const json_value *root, errctx *e) {
    if (root->type != JSON_OBJECT) return fail(e, 400, NULL, NULL, "the request body must be a JSON object");
    const json_value *v;
    if ((v = json_get(root, "model")) && v->type != JSON_NULL) {
        if (v->type != JSON_STRING) return fail(e, 400, "model", NULL, "'model' must be a string, got %s", type_of(v));
        /* the whole string: a name with an embedded \u0000 is not the served one (strcmp stopped at it) */
        if (strlen(v->str) != v->str_len)
            return fail(e, 404, "model", "model_not_found", "The model '%s\\u0000...' (a name holding a NUL character) "
                        "does not exist; this server serves '%s'", v->str, s->o.name);
        if (strcmp(v->str, s->o.name) != 0)
            return fail(e, 404, "model", "model_not_found", "The model '%s' does not exist; this server serves '%s'",
                        v->str, s->o.name);
    }
    const json_value *suffix = json_get(root, "suffix");
    if (suffix && suffix->type == JSON_NULL) suffix = NULL;
    if (suffix && suffix->type != JSON_STRING)
        return fail(e, 400, "suffix", NULL, "'suffix' must be a string, got %s", type_of(suffix));
    if (suffix && strlen(suffix->str) != suffix->str_len)
        return fail(e, 400, "suffix", NULL, "'suffix' holds a NUL character");
    /* "" (Copilot's plugin sends it at the end of a file) has nothing after the cursor: without a
     * FIM format it is no suffix; a FIM model infills at the end */
    if (suffix && !s->o.fim && suffix->str_len == 0) suffix = NULL;
    if (suffix && !s->o.fim) {
        if (!s->o.ignore_suffix)
            return fail(e, 400, "suffix", NULL, "'suffix' is not supported: this model has no fill-in-the-middle format "
                        "(CodeGen 1 cannot infill; CodeGen2 and 2.5 are recognized by their tokenizer's <mask_1>, "
                        "<sep> and <eom>; another FIM model needs fim.json in its directory or --fim FILE); "
                        "start the server with --ignore-suffix to ignore it");
        suffix = NULL; /* --ignore-suffix: a plain completion of the prompt */
    }
    if ((v = json_get(root, "logit_bias")) && v->type != JSON_NULL && !(v->type == JSON_OBJECT && v->n == 0))
        return fail(e, 400, "logit_bias", NULL, "'logit_bias' is not supported");
    long long n = 1, best_of = -1, logprobs = -1, seed = -1;
    int stream = 0, echo = 0, include_usage = 0, seeded = 0, return_ids = 0;
    /* one request's params, as every choice gets them (seed and scoring are set per choice): the
     * knobs' table, then the fields of the server alone */
    tp_request_params rp = tp_request_params_default();
    if (get_table_params(e, root, &rp) < 0) return NULL;
    long long max_tokens = rp.max_new_tokens;
    if (get_int(e, root, "n", 1, SRV_MAX_N, &n) < 0) return NULL;
    if (get_int(e, root, "best_of", 1, SRV_MAX_N, &best_of) < 0) return NULL;
    if (best_of >= 0 && best_of != n)
        return fail(e, 400, "best_of", NULL, "'best_of' must equal 'n' (%lld): tpgen returns every sequence it makes, "
                                             "got best_of=%lld", n, best_of);
    /* OpenAI's limit of 5, below the engine's TP_MAX_CANDIDATES (`tpgen generate --logprobs`) */
    if (get_int(e, root, "logprobs", 0, SRV_MAX_LOGPROBS, &logprobs) < 0) return NULL;
    /* Deadlines and priority (docs/SERVING.md): vLLM's priority, refused under fcfs as vLLM does
     * (it would be silently ignored); the time budget "timeout" in seconds, at most the server's
     * --request-timeout when one is set (refused above it, never shortened behind the client's back) */
    long long priority = 0;
    double timeout = 0;
    if (get_int(e, root, "priority", INT_MIN, INT_MAX, &priority) < 0) return NULL;
    if (priority != 0 && !s->o.priority_policy)
        return fail(e, 400, "priority", NULL, "'priority' is %lld, but this server schedules first come, first served: "
                    "start it with --scheduling-policy priority, or send priority 0", priority);
    int has_timeout = get_number(e, root, "timeout", 0, 1e9, 1, &timeout);
    if (has_timeout < 0) return NULL;
    if (has_timeout && s->o.request_timeout > 0 && timeout > s->o.request_timeout)
        return fail(e, 400, "timeout", NULL, "'timeout' (%g s) exceeds the server's limit of %g s (--request-timeout)",
                    timeout, s->o.request_timeout);
    rp.sampling.logprobs = logprobs > 0 ? (int)logprobs : 0;
    rp.speculate_k = s->o.speculate_k;
    rp.speculate_n = s->o.speculate_n;
    rp.priority = (int)priority;
    rp.timeout_s = has_timeout ? timeout : s->o.request_timeout;
    if (bad_params(e, &rp)) return NULL;
    if (get_bool(e, root, "stream", &stream) < 0 || get_bool(e, root, "echo", &echo) < 0 ||
        get_bool(e, root, "return_token_ids", &return_ids) < 0)
        return NULL;
    const json_value *so = json_get(root, "stream_options");
    if (so && so->type != JSON_NULL) {
        if (so->type != JSON_OBJECT)
            return fail(e, 400, "stream_options", NULL, "'stream_options' must be an object, got %s", type_of(so));
        if (!stream) return fail(e, 400, "stream_options", NULL, "'stream_options' is only allowed with 'stream': true");
        if (get_bool(e, so, "include_usage", &include_usage) < 0) return NULL;
    }
    if ((v = json_get(root, "seed")) && v->type != JSON_NULL) {
        if (v->type != JSON_NUMBER || !v->is_integer)
            return fail(e, 400, "seed", NULL, "'seed' must be an integer, got %s", type_of(v));
        seed = v->integer;
        seeded = 1;
    }
    if ((v = json_get(root, "user")) && v->type != JSON_NULL && v->type != JSON_STRING)
        return fail(e, 400, "user", NULL, "'user' must be a string, got %s", type_of(v));
    /* vLLM's cache_salt: prefix-cache hits only among requests with the same salt (and API key:
     * step_loop.c, docs/SERVING.md "Prefix cache and KV on demand") */
    uint64_t cache_salt = 0;
    if ((v = json_get(root, "cache_salt")) && v->type != JSON_NULL) {
        if (v->type != JSON_STRING || v->str_len == 0)
            return fail(e, 400, "cache_salt", NULL, "'cache_salt' must be a non-empty string, got %s",
                        v->type == JSON_STRING ? "an empty one" : type_of(v));
        cache_salt = srv_salt_of(v->str, v->str_len);
    }
    if (suffix) { /* the infill ends at the format's stop token (<eom>), left out of the text */
        rp.stop_ids[0] = s->o.fim->stop_id;
        rp.n_stop_ids = 1;
    }

    srv_job *j = tp_calloc(1, sizeof *j);
    pthread_cond_init(&j->cv, NULL);
    j->refs = 1;
    j->stream = stream;
    j->include_usage = include_usage;
    j->echo = echo;
    j->logprobs = (int)logprobs;
    j->return_token_ids = return_ids;
    j->cache_salt = cache_salt;
    j->api_key = -1; /* the HTTP thread sets the key it came with */
    j->n = (int)n;
    j->scored = !(echo && logprobs >= 0);
#define BAIL(...) do { fail(e, __VA_ARGS__); srv_job_free(j); return NULL; } while (0)
    const json_value *st = json_get(root, "stop");
    if (st && st->type != JSON_NULL) {
        if (st->type != JSON_STRING && st->type != JSON_ARRAY) /* one string, or an array of them */
            BAIL(400, "stop", NULL, "'stop' must be a string or an array of strings");
        size_t ns = st->type == JSON_STRING ? 1 : st->n;
        if (ns > 16) BAIL(400, "stop", NULL, "at most 16 stop strings, got %zu", ns);
        for (size_t i = 0; i < ns; i++) {
            const json_value *x = st->type == JSON_STRING ? st : &st->items[i];
            if (x->type != JSON_STRING) BAIL(400, "stop", NULL, "stop %zu is a %s, not a string", i, type_of(x));
            if (x->str_len == 0) BAIL(400, "stop", NULL, "stop %zu is an empty string", i);
            if (strlen(x->str) != x->str_len) BAIL(400, "stop", NULL, "stop %zu holds a NUL character", i);
            j->stops[j->n_stops++] = tp_strdup(x->str);
        }
        if (j->n_stops && !s->tok)
            BAIL(400, "stop", NULL, "'stop' needs a tokenizer in the model directory to match text");
    }

    const json_value *p = json_get(root, "prompt");
    if (!p || p->type == JSON_NULL) BAIL(400, "prompt", NULL, "'prompt' is required");
    if (parse_prompts(s, e, p, suffix, max_tokens, j)) { srv_job_free(j); return NULL; }
    for (int i = 0; i < j->n_prompts; i++) {
        srv_prompt *q = &j->prompts[i];
        if (too_long(s, e, q->n, max_tokens, i)) { srv_job_free(j); return NULL; } /* token-id prompts */
        prompt_offsets(s, q);
    }

    j->n_choices = j->n_prompts * j->n;
    j->ch = tp_calloc(j->n_choices, sizeof *j->ch);
    static unsigned long counter;
    uint64_t base_seed = seeded ? (uint64_t)seed
                                : (uint64_t)time(NULL) * 6364136223846793005ULL + __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < j->n_choices; i++) {
        srv_choice *c = &j->ch[i];
        srv_prompt *q = &j->prompts[i / j->n];
        tp_request *r = &c->r;
        c->prompt = i / j->n;
        /* the generator's stream is i: as `tpgen generate` with each prompt repeated n times */
        int32_t *ids = tp_malloc(q->n * sizeof(int32_t));
        memcpy(ids, q->ids, q->n * sizeof(int32_t));
        rp.seed = base_seed;
        /* echo + logprobs: each prompt's first choice scores it, in its prefill (scheduler.h) */
        rp.score_prompt = echo && logprobs >= 0 && i % j->n == 0;
        tp_request_init(r, i, ids, q->n, &rp);
        /* the scheduler's own count (tp_request_kv_blocks): what passes here is admitted once
         * the pool has room, never retried forever */
        int blocks = tp_request_kv_blocks(r, s->n_positions, s->kv_block_size);
        if (blocks < 0 || blocks > s->met.kv_total)
            BAIL(400, max_tokens > 0 ? "max_tokens" : "prompt", NULL, "prompt %d (%d tokens%s) with max_tokens %lld "
                 "needs %d KV cache blocks of %d tokens, more than the server's whole cache of %d blocks (%d tokens, "
                 "--kv-cache-tokens); %s", c->prompt, q->n, r->params.score_prompt ? ", scored for echo + logprobs" : "",
                 max_tokens, blocks, s->kv_block_size, s->met.kv_total, s->met.kv_total * s->kv_block_size,
                 max_tokens > 0 ? "lower max_tokens or shorten the prompt" : "shorten the prompt");
        c->tok_off = tp_calloc(max_tokens > 0 ? max_tokens : 1, sizeof(size_t));
        if (s->tok) /* the job's stop strings, shared by its choices (freed after them) */
            c->ts = tp_text_stream_new(s->tok, (const char *const *)j->stops, j->n_stops, 1);
    }
#undef BAIL
    return j;
}

srv_job *srv_parse_completion(tp_server *s, const char *body, size_t n, int *status, jbuf *err) {
    errctx e = {status, err};
    char perr[256];
    json_value *root = json_parse_limited(body, n, SRV_JSON_DEPTH, srv_json_budget(n), perr, sizeof perr);
    if (!root) return fail(&e, 400, NULL, NULL, "the request body is not valid JSON: %s", perr);
    srv_job *j = parse(s, root, &e);
    json_free(root);
    return j;
}

/* ---- responses ---- */

static void token_str(tp_server *s, int32_t id, jbuf *b) {
    char *t = NULL;
    size_t len = 0;
    char err[64];
    if (s->tok && tp_tokenizer_decode(s->tok, &id, 1, 0, &t, &len, err, sizeof err) == 0) {
        jb_json(b, t, len);
        free(t);
    } else jb_printf(b, "\"token_id:%d\"", id);
}

static void top_obj(tp_server *s, jbuf *b, const int32_t *ids, const float *lps, int k) {
    jb_str(b, "{");
    int first = 1;
    for (int i = 0; i < k; i++) {
        if (ids[i] < 0) continue;
        if (!first) jb_str(b, ", ");
        first = 0;
        token_str(s, ids[i], b);
        jb_str(b, ": ");
        jb_float(b, lps[i]);
    }
    jb_str(b, "}");
}

/* logprobs of generated tokens [a, b) of c (and of the prompt first when with_prompt). */
static void render_logprobs(tp_server *s, srv_job *j, srv_choice *c, int a, int b, int with_prompt, jbuf *o) {
    const srv_prompt *p = &j->prompts[c->prompt];
    const tp_request *r = &c->r;
    int k = j->logprobs, np = with_prompt && p->lps ? p->n : 0; /* no lps: cancelled before scoring */
    size_t base = j->echo ? p->text_len : 0;
    jb_str(o, "{\"tokens\": [");
    for (int i = 0; i < np; i++) { if (i) jb_str(o, ", "); token_str(s, p->ids[i], o); }
    for (int i = a; i < b; i++) { if (np || i > a) jb_str(o, ", "); token_str(s, r->ids[i], o); }
    jb_str(o, "], \"token_logprobs\": [");
    for (int i = 0; i < np; i++) { if (i) jb_str(o, ", "); jb_float(o, p->lps[i]); }
    for (int i = a; i < b; i++) { if (np || i > a) jb_str(o, ", "); jb_float(o, r->logprobs[i]); }
    jb_str(o, "], \"top_logprobs\": [");
    for (int i = 0; i < np; i++) {
        if (i) jb_str(o, ", ");
        if (i == 0) jb_str(o, "null");
        else if (k == 0) top_obj(s, o, &p->ids[i], &p->lps[i], 1);
        else top_obj(s, o, p->top_ids + (size_t)i * k, p->top_lps + (size_t)i * k, k);
    }
    for (int i = a; i < b; i++) {
        if (np || i > a) jb_str(o, ", ");
        if (k == 0) top_obj(s, o, &r->ids[i], &r->logprobs[i], 1);
        else top_obj(s, o, r->top_ids + (size_t)i * k, r->top_lps + (size_t)i * k, k);
    }
    jb_str(o, "], \"text_offset\": [");
    for (int i = 0; i < np; i++) { if (i) jb_str(o, ", "); jb_printf(o, "%zu", p->tok_off[i]); }
    for (int i = a; i < b; i++) {
        if (np || i > a) jb_str(o, ", ");
        size_t off = c->tok_off[i] < c->text.n ? c->tok_off[i] : c->text.n;
        jb_printf(o, "%zu", base + off);
    }
    jb_str(o, "]}");
}

static void head(tp_server *s, srv_job *j, jbuf *b) {
    jb_printf(b, "{\"id\": \"%s\", \"object\": \"text_completion\", \"created\": %ld, \"model\": ", j->id, j->created);
    jb_json(b, s->o.name, strlen(s->o.name));
}

static void usage(srv_job *j, jbuf *b) {
    long pt = 0, ct = 0;
    for (int i = 0; i < j->n_prompts; i++) pt += j->prompts[i].n;
    for (int i = 0; i < j->n_choices; i++) ct += j->ch[i].n_pub;
    jb_printf(b, "{\"prompt_tokens\": %ld, \"completion_tokens\": %ld, \"total_tokens\": %ld", pt, ct, pt + ct);
    /* prompt tokens served from the prefix cache, per prompt the most any of its n choices found
     * (they share the prompt), as prompt_tokens counts each prompt once */
    long cached = 0;
    for (int i = 0; i < j->n_choices; i += j->n) {
        int best = 0;
        for (int k = i; k < i + j->n && k < j->n_choices; k++)
            if (j->ch[k].r.n_prompt_cached > best) best = j->ch[k].r.n_prompt_cached;
        cached += best;
    }
    jb_printf(b, ", \"prompt_tokens_details\": {\"cached_tokens\": %ld}", cached);
    if (j->n_choices > 0 && j->ch[0].r.params.speculate_k > 0) { /* --speculate: draft tokens fed and accepted, all choices */
        long d = 0, a = 0;
        for (int i = 0; i < j->n_choices; i++) { d += j->ch[i].r.spec_drafted; a += j->ch[i].r.spec_accepted; }
        jb_printf(b, ", \"speculative\": {\"drafted\": %ld, \"accepted\": %ld}", d, a);
    }
    jb_str(b, "}");
}

static void ids_field(jbuf *b, const char *name, const int32_t *ids, int n) {
    jb_printf(b, ", \"%s\": [", name);
    for (int i = 0; i < n; i++) jb_printf(b, "%s%d", i ? ", " : "", ids[i]);
    jb_str(b, "]");
}

const char *srv_finish_name(tp_finish f) {
    switch (f) {
    case TP_FINISH_LENGTH: return "length";
    case TP_FINISH_STOP: return "stop";
    case TP_FINISH_CANCELLED: return "abort";
    case TP_FINISH_TIMEOUT: return "timeout";
    case TP_FINISH_ERROR: return "error";
    case TP_FINISH_NONE: break;
    }
    return "none";
}

/* A choice that failed in the engine: the error the whole response becomes (NULL if none). */
const char *srv_job_error(const srv_job *j) {
    for (int i = 0; i < j->n_choices; i++)
        if (j->ch[i].finish == TP_FINISH_ERROR)
            return j->ch[i].r.error[0] ? j->ch[i].r.error : "the engine failed on this request";
    return NULL;
}

void srv_render_completion(tp_server *s, srv_job *j, jbuf *b) {
    head(s, j, b);
    jb_str(b, ", \"choices\": [");
    for (int i = 0; i < j->n_choices; i++) {
        srv_choice *c = &j->ch[i];
        const srv_prompt *p = &j->prompts[c->prompt];
        jb_printf(b, "%s{\"index\": %d, \"text\": ", i ? ", " : "", i);
        jbuf t = {0};
        if (j->echo) jb_put(&t, p->text ? p->text : "", p->text_len);
        jb_put(&t, c->text.s ? c->text.s : "", c->text.n);
        jb_json(b, t.s ? t.s : "", t.n);
        jb_free(&t);
        jb_str(b, ", \"logprobs\": ");
        if (j->logprobs >= 0) render_logprobs(s, j, c, 0, c->n_pub, j->echo, b);
        else jb_str(b, "null");
        if (j->return_token_ids) {
            ids_field(b, "prompt_token_ids", p->ids, p->n);
            ids_field(b, "token_ids", c->r.ids, c->n_pub);
        }
        jb_printf(b, ", \"finish_reason\": \"%s\"}", srv_finish_name(c->finish));
    }
    jb_str(b, "], \"usage\": ");
    usage(j, b);
    jb_str(b, "}");
}

int srv_render_stream(tp_server *s, srv_job *j, int *sent_tok, size_t *sent_text, int *flags, jbuf *b) {
    int all = 1;
    for (int i = 0; i < j->n_choices; i++) {
        srv_choice *c = &j->ch[i];
        if (flags[i] & 1) continue; /* its last chunk is out */
        if (!c->done) all = 0;
        int echo_now = j->echo && !(flags[i] & 2) && j->scored; /* the prompt goes first, once */
        if (j->echo && !(flags[i] & 2) && !echo_now) continue;
        int ntok = c->n_pub - sent_tok[i];
        size_t ntext = c->text.n - sent_text[i];
        if (!ntok && !ntext && !c->done && !echo_now) continue;
        if (c->done && c->finish == TP_FINISH_ERROR) { /* the engine failed on it: an error event */
            jb_str(b, "data: ");
            srv_error_json(b, c->r.error[0] ? c->r.error : "the engine failed on this request", "server_error", NULL,
                           "engine_error");
            jb_str(b, "\n\n");
            flags[i] |= 3;
            continue;
        }
        const srv_prompt *p = &j->prompts[c->prompt];
        jb_str(b, "data: ");
        head(s, j, b);
        jb_printf(b, ", \"choices\": [{\"index\": %d, \"text\": ", i);
        jbuf t = {0};
        if (echo_now) jb_put(&t, p->text ? p->text : "", p->text_len);
        jb_put(&t, c->text.s ? c->text.s + sent_text[i] : "", ntext);
        jb_json(b, t.s ? t.s : "", t.n);
        jb_free(&t);
        jb_str(b, ", \"logprobs\": ");
        if (j->logprobs >= 0) render_logprobs(s, j, c, sent_tok[i], c->n_pub, echo_now, b);
        else jb_str(b, "null");
        if (j->return_token_ids) {
            if (!(flags[i] & 2)) ids_field(b, "prompt_token_ids", p->ids, p->n); /* first chunk */
            /* c->r.ids only once tokens are published: the engine thread sets the pointer in
             * tp_sched_submit without mu, so reading it earlier is a data race (TSan) */
            ids_field(b, "token_ids", ntok ? c->r.ids + sent_tok[i] : NULL, ntok);
        }
        if (c->done) jb_printf(b, ", \"finish_reason\": \"%s\"}]", srv_finish_name(c->finish));
        else jb_str(b, ", \"finish_reason\": null}]");
        if (j->include_usage) jb_str(b, ", \"usage\": null");
        jb_str(b, "}\n\n");
        sent_tok[i] = c->n_pub;
        sent_text[i] = c->text.n;
        flags[i] |= 2 | (c->done ? 1 : 0);
    }
    return all;
}

void srv_render_usage_chunk(tp_server *s, srv_job *j, jbuf *b) {
    jb_str(b, "data: ");
    head(s, j, b);
    jb_str(b, ", \"choices\": [], \"usage\": ");
    usage(j, b);
    jb_str(b, "}\n\n");
}
