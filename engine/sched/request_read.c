/* Reading request fields by the table (request_params.h): a JSON value for the server, a flag's
 * text for the CLI, each checked against its front end's range with one wording for both. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h" /* tp_set_err */

#include "request_params.h"
#include "sampler.h"

static const char *kind(const tp_field *f) { return f->type == TP_FIELD_FLOAT || f->type == TP_FIELD_NUMBER ? "a number" : "an integer"; }

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

const char *tp_field_range_text(const tp_field *f, int front, char *buf, size_t size) {
    const tp_range *g = tp_field_range(f, front);
    char lo[32], hi[32];
    if (f->type == TP_FIELD_INT64) snprintf(buf, size, "[%lld, %lld]", (long long)INT64_MIN, (long long)INT64_MAX);
    else if (f->type <= TP_FIELD_NUMBER)
        snprintf(buf, size, "%c%s, %s]", g->lo_open ? '(' : '[', num(g->lo, lo, sizeof lo), num(g->hi, hi, sizeof hi));
    else snprintf(buf, size, "%s", "");
    return buf;
}

const char *tp_field_default_text(const tp_field *f, int front, char *buf, size_t size) {
    const char *doc = front == TP_FRONT_SERVER ? f->srv_def_doc : f->cli_def_doc;
    double def = front == TP_FRONT_SERVER ? f->def : f->cli_def;
    if (doc) snprintf(buf, size, "%s", doc);
    else if (f->type == TP_FIELD_BOOL) snprintf(buf, size, "%s", front == TP_FRONT_SERVER ? "false" : "off");
    else if (f->type <= TP_FIELD_NUMBER || f->type == TP_FIELD_INT64) num(def, buf, size);
    else snprintf(buf, size, "%s", "");
    return buf;
}

/* "NAME expects an integer in [lo, hi], got WHAT": the message of every bad scalar */
static int range_error(const tp_field *f, int front, const char *name, const char *what, char *err, size_t err_size) {
    char range[64];
    snprintf(err, err_size, "%s expects %s in %s, got %s", name, kind(f), tp_field_range_text(f, front, range, sizeof range),
             what);
    return -1;
}

int tp_field_check(const tp_field *f, int front, double x, const char *name, char *err, size_t err_size) {
    const tp_range *g = tp_field_range(f, front);
    char got[32];
    int in = (g->lo_open ? x > g->lo : x >= g->lo) && x <= g->hi; /* false for NaN */
    if (f->type == TP_FIELD_INT64) in = x >= -0x1p63 && x < 0x1p63;
    if (!in || (f->type != TP_FIELD_FLOAT && f->type != TP_FIELD_NUMBER && x != floor(x)))
        return range_error(f, front, name, num(x, got, sizeof got), err, err_size);
    /* a float the sampler keeps: top_p 1e-300 is > 0 as a double but 0 as a float, a nucleus of nothing */
    if (f->type == TP_FIELD_FLOAT && !tp_sampling_value_ok(x)) {
        num(x, got, sizeof got);
        snprintf(err, err_size, "%s expects %sa number of magnitude at least %g (it is applied as a 32-bit float, "
                 "where %s is %g), got %s", name, g->lo_open && g->lo == 0 ? "" : "0 or ", FLT_MIN, got,
                 (double)(float)x, got);
        return -1;
    }
    return 0;
}

static void *at(const tp_field *f, tp_request_fields *r) { return (char *)r + f->off; }

/* ---- the server: JSON values ---- */

static const char *type_of(const json_value *v) {
    if (v->type == JSON_NUMBER) return v->is_integer ? "integer" : "number";
    return json_type_name(v->type);
}

void tp_fields_index(const json_value *obj, const json_value *at_[]) {
    const json_value *seen[64] = {0}; /* the first member of each field, null or not (json_get's) */
    for (size_t m = 0; m < obj->n; m++) {
        const char *k = obj->keys[m];
        size_t len = obj->key_lens[m];
        for (int i = 0; i < tp_n_fields; i++) {
            const char *key = tp_fields[i].key, *dot = key ? strchr(key, '.') : NULL;
            size_t klen = !key ? 0 : dot ? (size_t)(dot - key) : strlen(key); /* a dotted key: its object's */
            if (key && !seen[i] && klen == len && memcmp(key, k, len) == 0) seen[i] = &obj->items[m];
        }
    }
    for (int i = 0; i < tp_n_fields; i++) at_[i] = seen[i] && seen[i]->type != JSON_NULL ? seen[i] : NULL;
}


/* stop: a string or an array of strings, each non-empty, without NUL (the flags) */
static int strings_from_json(const tp_field *f, const json_value *v, tp_request_fields *r, char *err, size_t es) {
    const char *k = f->key;
    if (v->type != JSON_STRING && v->type != JSON_ARRAY) return tp_set_err(err, es, "'%s' must be a string or an array of strings", k);
    size_t ns = v->type == JSON_STRING ? 1 : v->n;
    if (ns > TP_MAX_STOP) return tp_set_err(err, es, "at most %d %s strings, got %zu", TP_MAX_STOP, k, ns);
    for (size_t i = 0; i < ns; i++) {
        const json_value *x = v->type == JSON_STRING ? v : &v->items[i];
        if (x->type != JSON_STRING) return tp_set_err(err, es, "%s %zu is a %s, not a string", k, i, type_of(x));
        if ((f->flags & TP_FIELD_NON_EMPTY) && x->str_len == 0) return tp_set_err(err, es, "%s %zu is an empty string", k, i);
        if ((f->flags & TP_FIELD_NO_NUL) && strlen(x->str) != x->str_len)
            return tp_set_err(err, es, "%s %zu holds a NUL character", k, i);
        r->stop[i] = (tp_text){x->str, x->str_len};
    }
    r->n_stop = (int)ns;
    return 0;
}

int tp_field_from_json(const tp_field *f, const json_value *v, tp_request_fields *r, char *param, size_t ps, char *err,
                       size_t es) {
    const char *key = f->key, *dot = strchr(key, '.');
    char name[64];
    snprintf(param, ps, "%s", key);
    r->given |= 1ull << (f - tp_fields); /* for a member: its object is given, the member or not */
    if (dot) { /* a member of an object: the object's type, then the member's (named alone, as OpenAI's) */
        int plen = (int)(dot - key);
        if (v->type != JSON_OBJECT) {
            snprintf(param, ps, "%.*s", plen, key);
            return tp_set_err(err, es, "'%.*s' must be an object, got %s", plen, key, type_of(v));
        }
        const json_value *m = NULL;
        for (size_t i = 0; i < v->n && !m; i++)
            if (v->key_lens[i] == strlen(dot + 1) && memcmp(v->keys[i], dot + 1, v->key_lens[i]) == 0) m = &v->items[i];
        if (!m || m->type == JSON_NULL) return 0;
        key = dot + 1;
        snprintf(param, ps, "%s", key);
        v = m;
    }
    snprintf(name, sizeof name, "'%s'", key);
    switch (f->type) {
    case TP_FIELD_BOOL:
        if (v->type != JSON_BOOL) return tp_set_err(err, es, "%s must be a boolean, got %s", name, type_of(v));
        tp_field_set(f, r, v->boolean);
        return 0;
    case TP_FIELD_INT:
    case TP_FIELD_FLOAT:
    case TP_FIELD_NUMBER:
    case TP_FIELD_INT64: {
        if (v->type != JSON_NUMBER) return tp_set_err(err, es, "%s must be %s, got %s", name, kind(f), type_of(v));
        if (f->type == TP_FIELD_INT64 && v->is_integer) { /* exact: a double has 53 bits */
            *(uint64_t *)at(f, r) = (uint64_t)v->integer;
            return 0;
        }
        double x = v->is_integer ? (double)v->integer : v->number;
        if (tp_field_check(f, TP_FRONT_SERVER, x, name, err, es)) return -1;
        tp_field_set(f, r, x);
        return 0;
    }
    case TP_FIELD_STRING: {
        tp_text *t = at(f, r);
        if (v->type != JSON_STRING || ((f->flags & TP_FIELD_NON_EMPTY) && v->str_len == 0))
            return tp_set_err(err, es, "%s must be a %sstring, got %s", name, f->flags & TP_FIELD_NON_EMPTY ? "non-empty " : "",
                        v->type == JSON_STRING ? "an empty one" : type_of(v));
        if ((f->flags & TP_FIELD_NO_NUL) && strlen(v->str) != v->str_len)
            return tp_set_err(err, es, "%s holds a NUL character", name);
        *t = (tp_text){v->str, v->str_len};
        return 0;
    }
    case TP_FIELD_STRINGS: return strings_from_json(f, v, r, err, es);
    case TP_FIELD_REFUSED:
        if (v->type == JSON_OBJECT && v->n == 0) return 0;
        return tp_set_err(err, es, "%s is not supported", name);
    case TP_FIELD_PROMPT: return 0; /* the front end's */
    }
    return 0;
}

/* ---- the CLI: a flag's text ---- */

int tp_field_from_text(const tp_field *f, const char *v, tp_request_fields *r, char *err, size_t es) {
    const char *flag = f->flag;
    char what[300];
    r->given |= 1ull << (f - tp_fields);
    switch (f->type) {
    case TP_FIELD_BOOL: tp_field_set(f, r, 1); return 0;
    case TP_FIELD_INT64: {
        char *end;
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end) {
            snprintf(what, sizeof what, "\"%.256s\"", v);
            return range_error(f, TP_FRONT_GENERATE, flag, what, err, es);
        }
        *(uint64_t *)at(f, r) = (uint64_t)x;
        return 0;
    }
    case TP_FIELD_INT:
    case TP_FIELD_FLOAT:
    case TP_FIELD_NUMBER: {
        char *end;
        double x = strtod(v, &end); /* out of double's range: inf or 0, refused or kept as the server does */
        if (end == v || *end) {
            snprintf(what, sizeof what, "\"%.256s\"", v);
            return range_error(f, TP_FRONT_GENERATE, flag, what, err, es);
        }
        if (tp_field_check(f, TP_FRONT_GENERATE, x, flag, err, es)) return -1;
        tp_field_set(f, r, x);
        return 0;
    }
    case TP_FIELD_STRING:
        if ((f->flags & TP_FIELD_NON_EMPTY) && !*v) return tp_set_err(err, es, "%s needs a non-empty string", flag);
        *(tp_text *)at(f, r) = (tp_text){v, strlen(v)};
        return 0;
    case TP_FIELD_STRINGS:
        if (r->n_stop == TP_MAX_STOP) return tp_set_err(err, es, "at most %d %s strings", TP_MAX_STOP, flag);
        if ((f->flags & TP_FIELD_NON_EMPTY) && !*v) return tp_set_err(err, es, "%s needs a non-empty string", flag);
        r->stop[r->n_stop++] = (tp_text){v, strlen(v)};
        return 0;
    default: return tp_set_err(err, es, "%s is not a flag", flag); /* the table gives these no flag */
    }
}

void tp_fields_usage(int front, int indent, int width, char *buf, size_t size) {
    size_t n = 0;
    int col = indent;
    buf[0] = 0;
    for (int i = 0; i < tp_n_fields; i++) {
        const tp_field *f = &tp_fields[i];
        if (!f->flag || !(f->fronts & front)) continue;
        char item[96];
        int len = snprintf(item, sizeof item, "[%s%s%s]%s", f->flag, f->arg ? " " : "", f->arg ? f->arg : "",
                           f->type == TP_FIELD_STRINGS ? "..." : "");
        int wrap = col > indent && col + 1 + len > width;
        if (n < size)
            n += snprintf(buf + n, size - n, "%s%*s%s", wrap ? "\n" : col > indent ? " " : "", wrap ? indent : 0, "", item);
        col = (wrap ? indent : col + (col > indent)) + len;
    }
}
