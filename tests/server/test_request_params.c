/* The table of request fields (engine/sched/request_params.h) is well formed and agrees with the
 * request's defaults, its checks and both readers (JSON and flag text); then it is printed, one
 * line per scalar field with a key (key flag type srv_lo srv_hi cli_lo cli_hi lo_open), for
 * params_test.py, which sends bad values of every one to the server and to `tpgen generate`.
 * usage: test_request_params [--list] */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sched/request_params.h"

static int fails;
#define CHECK(c, ...)                                                                                                   \
    do {                                                                                                                \
        if (!(c)) {                                                                                                     \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                                        \
            fprintf(stderr, __VA_ARGS__);                                                                               \
            fputc('\n', stderr);                                                                                        \
            fails++;                                                                                                    \
        }                                                                                                               \
    } while (0)

static int scalar(const tp_field *f) { return f->type <= TP_FIELD_NUMBER; }
static int same_range(const tp_field *f) {
    return f->srv.lo == f->cli.lo && f->srv.hi == f->cli.hi && f->srv.lo_open == f->cli.lo_open;
}

/* the entry's own well-formedness: names, fronts, a reason where the front ends differ */
static void check_entry(const tp_field *f, int i) {
    const char *name = f->key ? f->key : f->flag ? f->flag : "?";
    CHECK((f->key || f->flag) && f->help && *f->help, "field %d: a key or a flag, and help", i);
    CHECK(!f->help || !strchr(f->help, '|'), "%s: help without '|' (a Markdown table cell)", name);
    CHECK(!!f->key == !!(f->fronts & TP_FRONT_SERVER), "%s: a key exactly when the server takes it", name);
    CHECK(!!f->flag == !!(f->fronts & ~TP_FRONT_SERVER), "%s: a flag exactly when the CLI takes it", name);
    CHECK(!f->flag || (strncmp(f->flag, "--", 2) == 0 && !!f->arg == (f->type != TP_FIELD_BOOL)),
          "%s: --flag, with a value name unless a boolean", name);
    for (int j = 0; j < i; j++) {
        const tp_field *g = &tp_fields[j];
        CHECK(!f->key || !g->key || strcmp(f->key, g->key), "%s: key unique", name);
        CHECK(!f->flag || !g->flag || strcmp(f->flag, g->flag), "%s: flag unique", name);
    }
    CHECK(!f->key || tp_field_by_key(f->key, strlen(f->key)) == f, "%s: found by key", name);
    CHECK(!f->flag || tp_field_by_flag(f->flag, f->fronts & ~TP_FRONT_SERVER) == f, "%s: found by flag", name);
    CHECK(!f->flag || !tp_field_by_flag(f->flag, TP_FRONT_SERVER), "%s: not a flag of the server", name);
    if (f->type != TP_FIELD_REFUSED && f->type != TP_FIELD_PROMPT) CHECK(tp_field_of(f->off) == f, "%s: its field", name);
    int both = (f->fronts & TP_FRONT_SERVER) && (f->fronts & ~TP_FRONT_SERVER);
    /* a difference between the front ends is said, in the entry (and so in both docs' rows) */
    if (both && (!same_range(f) || f->def != f->cli_def || !!f->srv_def_doc != !!f->cli_def_doc))
        CHECK(f->why && *f->why, "%s: the front ends differ (range or default) without a `why`", name);
}

/* every scalar: the defaults valid, each end of the range as written, the message, validate */
static void check_scalar(const tp_field *f) {
    const char *name = f->key ? f->key : f->flag;
    char err[512];
    tp_request_fields def = tp_request_fields_default(TP_FRONT_SERVER), cli = tp_request_fields_default(TP_FRONT_GENERATE);
    tp_request_params pd = tp_request_params_default();
    CHECK(tp_field_get(f, &def) == f->def, "%s: default %g, the defaults have %g", name, f->def, tp_field_get(f, &def));
    CHECK(tp_field_get(f, &cli) == f->cli_def, "%s: CLI default %g", name, f->cli_def);
    CHECK(f->off >= sizeof pd || tp_field_get(f, (tp_request_fields *)&(tp_request_fields){.params = pd}) == f->def,
          "%s: tp_request_params_default has the table's default", name);
    if (f->type == TP_FIELD_BOOL) return;
    for (int front = TP_FRONT_SERVER; front <= TP_FRONT_GENERATE; front <<= 1) {
        if (!(f->fronts & (front == TP_FRONT_SERVER ? front : ~TP_FRONT_SERVER))) continue;
        const tp_range *g = tp_field_range(f, front);
        CHECK(g->lo < g->hi, "%s: lo %g < hi %g", name, g->lo, g->hi);
        double d = front == TP_FRONT_SERVER ? f->def : f->cli_def;
        const char *absent = front == TP_FRONT_SERVER ? f->srv_def_doc : f->cli_def_doc; /* a state, not a value */
        CHECK(absent || tp_field_check(f, front, d, "x", err, sizeof err) == 0, "%s: default %g accepted: %s", name, d,
              err);
        CHECK(tp_field_check(f, front, g->hi, "x", err, sizeof err) == 0, "%s: hi accepted", name);
        CHECK((tp_field_check(f, front, g->lo, "x", err, sizeof err) == 0) == !g->lo_open, "%s: lo %s", name,
              g->lo_open ? "refused" : "accepted");
        CHECK(tp_field_check(f, front, nextafter(g->hi, INFINITY), "'k'", err, sizeof err) && strstr(err, "'k' expects"),
              "%s: above hi refused, named: %s", name, err);
        CHECK(tp_field_check(f, front, NAN, "x", err, sizeof err), "%s: NaN refused", name);
    }
    if (f->id == TP_REQ_PARAM_OK) return;
    /* what either reader accepts, tp_request_params_validate accepts; what both refuse, it refuses */
    double hi = fmax(f->fronts & TP_FRONT_SERVER ? f->srv.hi : -INFINITY, f->fronts & ~TP_FRONT_SERVER ? f->cli.hi : -INFINITY);
    tp_request_fields r = def;
    tp_field_set(f, &r, hi);
    r.params.max_new_tokens = 1 << 24; /* min_tokens <= max_tokens */
    CHECK(tp_request_params_validate(&r.params) == TP_REQ_PARAM_OK, "%s: hi passes validate", name);
    tp_field_set(f, &r, f->type == TP_FIELD_INT ? hi + 1 : hi * 2 + 1);
    if (f->id != TP_REQ_PARAM_TIMEOUT) /* the stored budget: any finite one (--request-timeout's) */
        CHECK(tp_request_params_validate(&r.params) == f->id, "%s: above hi fails validate as its own field", name);
}

/* both readers on one value: the JSON number and the flag's text set the same field */
static void check_readers(void) {
    char err[512], param[64], body[256];
    for (int i = 0; i < tp_n_fields; i++) {
        const tp_field *f = &tp_fields[i];
        if (!scalar(f) || !f->key || strchr(f->key, '.')) continue;
        snprintf(body, sizeof body, "{\"%s\": %.17g, \"%s\": \"x\"}", f->key, f->srv.hi, f->key);
        json_value *root = json_parse(body, strlen(body), err, sizeof err);
        const json_value *at[64];
        tp_fields_index(root, at);
        tp_request_fields r = tp_request_fields_default(TP_FRONT_SERVER);
        CHECK(at[i] && tp_field_from_json(f, at[i], &r, param, sizeof param, err, sizeof err) == 0 &&
              tp_field_get(f, &r) == (f->type == TP_FIELD_FLOAT ? (double)(float)f->srv.hi : f->srv.hi) &&
              tp_field_given(&r, f), "%s: the first of two members read, %g: %s", f->key, f->srv.hi, err);
        json_free(root);
        snprintf(body, sizeof body, "{\"%s\": \"x\"}", f->key);
        root = json_parse(body, strlen(body), err, sizeof err);
        tp_fields_index(root, at);
        CHECK(tp_field_from_json(f, at[i], &r, param, sizeof param, err, sizeof err) && strcmp(param, f->key) == 0 &&
              strstr(err, "must be") && strstr(err, "got string"), "%s: a string refused, named: %s", f->key, err);
        json_free(root);
        if (!f->flag) continue;
        snprintf(body, sizeof body, "%.17g", f->cli.hi);
        r = tp_request_fields_default(TP_FRONT_GENERATE);
        CHECK(tp_field_from_text(f, body, &r, err, sizeof err) == 0 &&
              tp_field_get(f, &r) == (f->type == TP_FIELD_FLOAT ? (double)(float)f->cli.hi : f->cli.hi),
              "%s %s: read: %s", f->flag, body, err);
        CHECK(tp_field_from_text(f, "5x", &r, err, sizeof err) && strstr(err, f->flag) && strstr(err, "got \"5x\""),
              "%s 5x refused, named: %s", f->flag, err);
    }
    /* null is absent; a member of an object; the stop array's limit, from either front end */
    const char *body2 = "{\"stream\": null, \"stream_options\": {\"include_usage\": true}, \"stop\": "
                        "[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\",\"j\",\"k\",\"l\",\"m\",\"n\",\"o\",\"p\",\"q\"]}";
    json_value *root = json_parse(body2, strlen(body2), err, sizeof err);
    const json_value *at[64];
    tp_fields_index(root, at);
    tp_request_fields r = tp_request_fields_default(TP_FRONT_SERVER);
    const tp_field *stream = TP_FIELD_OF(stream), *usage = TP_FIELD_OF(include_usage), *stop = TP_FIELD_OF(stop);
    CHECK(!at[stream - tp_fields], "null is absent");
    CHECK(tp_field_from_json(usage, at[usage - tp_fields], &r, param, sizeof param, err, sizeof err) == 0 &&
          r.include_usage == 1, "stream_options.include_usage read");
    CHECK(tp_field_from_json(stop, at[stop - tp_fields], &r, param, sizeof param, err, sizeof err) &&
          strcmp(err, "at most 16 stop strings, got 17") == 0, "17 stop strings refused: %s", err);
    json_free(root);
    r = tp_request_fields_default(TP_FRONT_GENERATE);
    for (int i = 0; i < TP_MAX_STOP; i++) CHECK(tp_field_from_text(stop, "s", &r, err, sizeof err) == 0, "--stop %d", i);
    CHECK(tp_field_from_text(stop, "s", &r, err, sizeof err) && strcmp(err, "at most 16 --stop strings") == 0,
          "--stop 17: %s", err);
    const tp_field *seed = TP_FIELD_OF(params.seed);
    CHECK(tp_field_from_text(seed, "-1", &r, err, sizeof err) == 0 && r.params.seed == UINT64_MAX, "--seed -1: %s", err);
    CHECK(tp_field_from_text(seed, "9223372036854775807", &r, err, sizeof err) == 0 && r.params.seed == INT64_MAX,
          "--seed 2^63 - 1 exactly: %s", err);
}

int main(int argc, char **argv) {
    for (int i = 0; i < tp_n_fields; i++) {
        check_entry(&tp_fields[i], i);
        if (scalar(&tp_fields[i])) check_scalar(&tp_fields[i]);
    }
    check_readers();
    if (argc > 1 && strcmp(argv[1], "--list") == 0)
        for (int i = 0; i < tp_n_fields; i++) {
            const tp_field *f = &tp_fields[i];
            if (!scalar(f) || f->type == TP_FIELD_BOOL || !f->key || strchr(f->key, '.')) continue;
            printf("%s %s %s %.17g %.17g %.17g %.17g %d\n", f->key, f->flag ? f->flag : "-",
                   f->type == TP_FIELD_INT ? "int" : f->type == TP_FIELD_FLOAT ? "float" : "number", f->srv.lo, f->srv.hi, f->flag ? f->cli.lo : 0,
                   f->flag ? f->cli.hi : 0, f->srv.lo_open);
        }
    if (fails) fprintf(stderr, "%d checks failed\n", fails);
    return fails != 0;
}
