/* POST /tokenize and POST /detokenize: text to the model's token ids and back. /detokenize holds
 * its memory against SRV_DETOK_BUDGET (internal.h): its body and parse on the headers
 * (srv_detok_admit), its decoded text and JSON once known. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "route.h"
#include "util/json.h"
#include "util/log.h"

/* The body of /tokenize or /detokenize parsed, with its member `field` of JSON type `type` in *v
 * (`want`: what the error says it must be) and a tokenizer to serve it; NULL when not, the 400
 * already queued in *res. The caller frees the root. */
static json_value *tok_route_body(tp_server *s, struct MHD_Connection *c, srv_req *rq, const char *field,
                                  json_type type, const char *want, const json_value **v, enum MHD_Result *res) {
    char perr[256];
    json_value *root = json_parse_limited(rq->body.s ? rq->body.s : "", rq->body.n, SRV_JSON_DEPTH,
                                          srv_json_budget(rq->body.n), perr, sizeof perr);
    if (!root) {
        *res = srv_send_error(s, c, rq, 400, "invalid_request_error", NULL, NULL, "the request body is not valid JSON: %s", perr);
        return NULL;
    }
    *v = root->type == JSON_OBJECT ? json_get(root, field) : NULL;
    if (!*v || (*v)->type != type)
        *res = srv_send_error(s, c, rq, 400, "invalid_request_error", NULL, field, "'%s' must be %s", field, want);
    else if (!s->tok)
        *res = srv_send_error(s, c, rq, 400, "invalid_request_error", NULL, field,
                          "the model directory has no tokenizer (vocab.json + merges.txt, or tokenizer.json)");
    else
        return root;
    json_free(root);
    return NULL;
}

enum MHD_Result srv_route_tokenize(tp_server *s, struct MHD_Connection *c, srv_req *rq) {
    const json_value *p;
    enum MHD_Result res;
    json_value *root = tok_route_body(s, c, rq, "prompt", JSON_STRING, "a string", &p, &res);
    if (!root) return res;
    int32_t *ids = NULL;
    size_t n = 0;
    char err[256];
    int bad = tp_tokenizer_encode(s->tok, p->str, p->str_len, &ids, &n, err, sizeof err); /* thread-safe, no lock */
    json_free(root);
    if (bad) return srv_send_error(s, c, rq, 400, "invalid_request_error", NULL, "prompt", "%s", err);
    jbuf b = {0};
    jb_str(&b, "{\"tokens\": [");
    for (size_t i = 0; i < n; i++) jb_printf(&b, "%s%d", i ? ", " : "", ids[i]);
    jb_printf(&b, "], \"count\": %zu", n);
    if (s->ready) jb_printf(&b, ", \"max_model_len\": %d", s->n_positions);
    jb_str(&b, "}");
    free(ids);
    return srv_send(s, c, rq, 200, "application/json", &b, 1);
}

enum MHD_Result srv_route_detokenize(tp_server *s, struct MHD_Connection *c, srv_req *rq) {
    const json_value *t;
    enum MHD_Result res;
    json_value *root = tok_route_body(s, c, rq, "tokens", JSON_ARRAY, "an array of token ids", &t, &res);
    if (!root) return res;
    if (t->n > SRV_DETOK_MAX_IDS) {
        size_t n = t->n;
        json_free(root);
        return srv_send_error(s, c, rq, 400, "invalid_request_error", "too_many_tokens", "tokens",
                          "'tokens' has %zu ids; /detokenize takes at most %d per request", n, SRV_DETOK_MAX_IDS);
    }
    /* the model's ids (vocab_size; CodeGen pads it past the tokenizer: those decode to nothing), or
     * the tokenizer's before the model is known */
    long long lim = s->ready ? s->vocab : tp_tokenizer_vocab_size(s->tok);
    int32_t *ids = tp_malloc((t->n ? t->n : 1) * sizeof(int32_t));
    for (size_t i = 0; i < t->n; i++) {
        const json_value *v = &t->items[i];
        if (v->type != JSON_NUMBER || !v->is_integer || v->integer < 0 || v->integer >= lim) {
            char what[64];
            if (v->type != JSON_NUMBER) snprintf(what, sizeof what, "a %s", json_type_name(v->type));
            else if (v->is_integer) snprintf(what, sizeof what, "%lld", (long long)v->integer);
            else snprintf(what, sizeof what, "%.17g", v->number);
            free(ids);
            json_free(root);
            return srv_send_error(s, c, rq, 400, "invalid_request_error", NULL, "tokens",
                              "token %zu is %s, not a token id in [0, %lld) (the %s)", i, what, lim,
                              s->ready ? "model's vocab_size" : "tokenizer's size");
        }
        ids[i] = (int32_t)v->integer;
    }
    char *text = NULL, err[256];
    size_t len = 0;
    int bad = tp_tokenizer_decode_model(s->tok, (int32_t)lim, ids, t->n, 1, &text, &len, err, sizeof err);
    free(ids);
    json_free(root);
    if (bad) return srv_send_error(s, c, rq, 400, "invalid_request_error", NULL, "tokens", "%s", err);
    /* decoded: the text is known, its JSON and libmicrohttpd's copy of it are held before made */
    size_t body = 14 + jb_json_size(text, len), more = len + 2 * body;
    pthread_mutex_lock(&s->mu);
    int over = s->detok_held + more > SRV_DETOK_BUDGET;
    if (!over) s->detok_held += more, rq->detok += more;
    size_t held = s->detok_held;
    pthread_mutex_unlock(&s->mu);
    if (over) {
        free(text);
        return srv_send_error(s, c, rq, 503, "server_error", "server_busy", "tokens",
                          "these ids decode to %zu bytes of JSON; with the /detokenize requests in flight (%zu "
                          "MiB) that passes their memory budget of %zu MiB; retry", body, held >> 20,
                          SRV_DETOK_BUDGET >> 20);
    }
    jbuf b = {0};
    jb_reserve(&b, body);
    jb_str(&b, "{\"prompt\": ");
    jb_json(&b, text, len);
    jb_str(&b, "}");
    free(text);
    return srv_send(s, c, rq, 200, "application/json", &b, 1);
}

/* On the headers of a /detokenize that passed its limits: its body (as announced, or the route's
 * limit when chunked) and the parse of it are held against the budget before a byte is read. */
enum MHD_Result srv_detok_admit(tp_server *s, struct MHD_Connection *c, srv_req *rq) {
    size_t n = rq->length >= 0 ? (size_t)rq->length : rq->body_limit, need = n + srv_json_budget(n);
    pthread_mutex_lock(&s->mu);
    int over = s->detok_held + need > SRV_DETOK_BUDGET;
    if (!over) s->detok_held += need, rq->detok = need;
    size_t held = s->detok_held;
    pthread_mutex_unlock(&s->mu);
    if (!over) return MHD_YES;
    return srv_send_error(s, c, rq, 503, "invalid_request_error", "server_busy", NULL,
                          "the /detokenize requests in flight hold %zu MiB of their memory budget of %zu MiB; "
                          "this one needs %zu MiB to parse; retry", held >> 20, SRV_DETOK_BUDGET >> 20, need >> 20);
}
