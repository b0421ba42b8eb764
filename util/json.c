#include "util/json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

#define JSON_MAX_DEPTH 256

typedef struct {
    const char *s, *end, *start;
    char *err;
    size_t err_size;
    int failed;
    int max_depth;
    size_t budget, used; /* bytes the tree may take (json_parse_limited), and those it takes */
} parser;

static void fail(parser *p, const char *what) {
    if (p->failed) return;
    p->failed = 1;
    int line = 1, col = 1;
    for (const char *c = p->start; c < p->s && c < p->end; c++) {
        if (*c == '\n') { line++; col = 1; } else col++;
    }
    if (p->err && p->err_size) snprintf(p->err, p->err_size, "line %d column %d: %s", line, col, what);
}

/* Counts n more bytes of tree against the budget; 0 (and the error) when over it. */
static int take(parser *p, size_t n) {
    p->used += n;
    if (p->used <= p->budget) return 1;
    char what[128];
    snprintf(what, sizeof what, "the parsed document would take more than %zu bytes (the limit for this text)",
             p->budget);
    fail(p, what);
    return 0;
}

static void skip_ws(parser *p) {
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r')) p->s++;
}

static int parse_value(parser *p, json_value *v, int depth);

static int hex4(parser *p, unsigned *out) {
    if (p->end - p->s < 4) { fail(p, "truncated \\u escape"); return 0; }
    unsigned x = 0;
    for (int i = 0; i < 4; i++) {
        char c = p->s[i];
        x <<= 4;
        if (c >= '0' && c <= '9') x |= c - '0';
        else if (c >= 'a' && c <= 'f') x |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') x |= c - 'A' + 10;
        else { fail(p, "bad hex digit in \\u escape"); return 0; }
    }
    p->s += 4;
    *out = x;
    return 1;
}

static size_t put_utf8(char *o, unsigned cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12); o[1] = (char)(0x80 | (cp >> 6 & 63)); o[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18); o[1] = (char)(0x80 | (cp >> 12 & 63));
    o[2] = (char)(0x80 | (cp >> 6 & 63)); o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

/* p->s at the opening quote. The decoded string is never longer than the escaped one. */
static int parse_string(parser *p, char **out, size_t *out_len) {
    p->s++;
    const char *q = p->s;
    while (q < p->end && *q != '"') q += (*q == '\\') ? 2 : 1;
    if (q >= p->end) { fail(p, "unterminated string"); return 0; }
    if (!take(p, (size_t)(q - p->s) + 1)) return 0;
    char *buf = tp_malloc((size_t)(q - p->s) + 1), *o = buf;
    while (*p->s != '"') {
        unsigned char c = (unsigned char)*p->s;
        if (c < 0x20) { fail(p, "control character in string"); free(buf); return 0; }
        if (c != '\\') { *o++ = (char)c; p->s++; continue; }
        p->s++;
        char e = *p->s++;
        switch (e) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            unsigned cp;
            if (!hex4(p, &cp)) { free(buf); return 0; }
            if (cp >= 0xD800 && cp < 0xDC00 && p->end - p->s >= 6 && p->s[0] == '\\' && p->s[1] == 'u') {
                const char *save = p->s;
                p->s += 2;
                unsigned lo;
                if (!hex4(p, &lo)) { free(buf); return 0; }
                if (lo >= 0xDC00 && lo < 0xE000) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                else p->s = save; /* lone high surrogate: kept as is, like most parsers */
            }
            o += put_utf8(o, cp);
            break;
        }
        default: fail(p, "bad escape in string"); free(buf); return 0;
        }
    }
    p->s++;
    *o = 0;
    *out = buf;
    *out_len = (size_t)(o - buf);
    return 1;
}

static int parse_number(parser *p, json_value *v) {
    const char *b = p->s;
    int integer = 1;
    if (p->s < p->end && *p->s == '-') p->s++;
    if (p->s >= p->end || *p->s < '0' || *p->s > '9') { fail(p, "bad number"); return 0; }
    if (*p->s == '0') p->s++;
    else while (p->s < p->end && *p->s >= '0' && *p->s <= '9') p->s++;
    if (p->s < p->end && *p->s == '.') {
        integer = 0;
        p->s++;
        if (p->s >= p->end || *p->s < '0' || *p->s > '9') { fail(p, "bad number"); return 0; }
        while (p->s < p->end && *p->s >= '0' && *p->s <= '9') p->s++;
    }
    if (p->s < p->end && (*p->s == 'e' || *p->s == 'E')) {
        integer = 0;
        p->s++;
        if (p->s < p->end && (*p->s == '+' || *p->s == '-')) p->s++;
        if (p->s >= p->end || *p->s < '0' || *p->s > '9') { fail(p, "bad number"); return 0; }
        while (p->s < p->end && *p->s >= '0' && *p->s <= '9') p->s++;
    }
    char tmp[64];
    size_t n = (size_t)(p->s - b);
    if (n >= sizeof tmp) {
        if (integer) { fail(p, "integer too long"); return 0; }
        n = sizeof tmp - 1; /* absurd float literal: precision beyond 63 chars is irrelevant */
    }
    memcpy(tmp, b, n);
    tmp[n] = 0;
    v->type = JSON_NUMBER;
    v->number = strtod(tmp, NULL);
    errno = 0;
    long long x = integer && n <= 20 ? strtoll(tmp, NULL, 10) : 0;
    if (integer && n <= 20 && errno != ERANGE) { /* 20: "-" and 19 digits; ERANGE: beyond int64 */
        v->is_integer = 1;
        v->integer = x;
    } else if (integer) {
        v->is_integer = 0; /* beyond int64: only the double is meaningful */
    }
    return 1;
}

static int literal(parser *p, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(p->end - p->s) < n || memcmp(p->s, word, n) != 0) { fail(p, "unexpected character"); return 0; }
    p->s += n;
    return 1;
}

static int parse_container(parser *p, json_value *v, int depth, int object) {
    p->s++;
    v->type = object ? JSON_OBJECT : JSON_ARRAY;
    size_t cap = 0;
    skip_ws(p);
    char close = object ? '}' : ']';
    if (p->s < p->end && *p->s == close) { p->s++; return 1; }
    for (;;) {
        if (v->n == cap) {
            /* doubling, but never past what the rest of the text can hold: each element takes at
             * least 2 bytes of it (a value and a ',' or the closing bracket) */
            size_t most = v->n + (size_t)(p->end - p->s) / 2 + 1, grown = cap ? cap * 2 : 8;
            size_t old = cap;
            cap = grown < most ? grown : most;
            if (!take(p, (cap - old) * (sizeof *v->items + (object ? sizeof *v->keys + sizeof *v->key_lens : 0))))
                return 0;
            v->items = tp_realloc(v->items, cap * sizeof *v->items);
            if (object) {
                v->keys = tp_realloc(v->keys, cap * sizeof *v->keys);
                v->key_lens = tp_realloc(v->key_lens, cap * sizeof *v->key_lens);
            }
        }
        skip_ws(p);
        if (object) {
            if (p->s >= p->end || *p->s != '"') { fail(p, "expected a member name"); return 0; }
            if (!parse_string(p, &v->keys[v->n], &v->key_lens[v->n])) return 0;
            skip_ws(p);
            if (p->s >= p->end || *p->s != ':') { free(v->keys[v->n]); fail(p, "expected ':'"); return 0; }
            p->s++;
        }
        memset(&v->items[v->n], 0, sizeof *v->items);
        v->n++; /* counted before parsing so json_free releases a partial element */
        if (!parse_value(p, &v->items[v->n - 1], depth + 1)) return 0;
        skip_ws(p);
        if (p->s < p->end && *p->s == ',') { p->s++; continue; }
        if (p->s < p->end && *p->s == close) {
            p->s++;
            if (v->n < cap) { /* to size: what a tree keeps is its elements, not the doubling's slack */
                p->used -= (cap - v->n) * (sizeof *v->items + (object ? sizeof *v->keys + sizeof *v->key_lens : 0));
                v->items = tp_realloc(v->items, v->n * sizeof *v->items);
                if (object) {
                    v->keys = tp_realloc(v->keys, v->n * sizeof *v->keys);
                    v->key_lens = tp_realloc(v->key_lens, v->n * sizeof *v->key_lens);
                }
            }
            return 1;
        }
        fail(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
        return 0;
    }
}

static int parse_value(parser *p, json_value *v, int depth) {
    if (depth >= p->max_depth) { /* depth 0 is the first level */
        char what[64];
        snprintf(what, sizeof what, "nested deeper than %d levels", p->max_depth);
        fail(p, what);
        return 0;
    }
    skip_ws(p);
    if (p->s >= p->end) { fail(p, "unexpected end of input"); return 0; }
    switch (*p->s) {
    case '{': return parse_container(p, v, depth, 1);
    case '[': return parse_container(p, v, depth, 0);
    case '"': v->type = JSON_STRING; return parse_string(p, &v->str, &v->str_len);
    case 't': v->type = JSON_BOOL; v->boolean = 1; return literal(p, "true");
    case 'f': v->type = JSON_BOOL; v->boolean = 0; return literal(p, "false");
    case 'n': v->type = JSON_NULL; return literal(p, "null");
    default: return parse_number(p, v);
    }
}

static void free_children(json_value *v) {
    if (v->type == JSON_STRING) free(v->str);
    if (v->type == JSON_ARRAY || v->type == JSON_OBJECT) {
        for (size_t i = 0; i < v->n; i++) {
            free_children(&v->items[i]);
            if (v->keys) free(v->keys[i]);
        }
        free(v->items);
        free(v->keys);
        free(v->key_lens);
    }
}

json_value *json_parse(const char *text, size_t len, char *err, size_t err_size) {
    return json_parse_limited(text, len, JSON_MAX_DEPTH, SIZE_MAX, err, err_size);
}

json_value *json_parse_limited(const char *text, size_t len, int max_depth, size_t max_bytes, char *err,
                               size_t err_size) {
    parser p = {text, text + len, text, err, err_size, 0, max_depth < JSON_MAX_DEPTH ? max_depth : JSON_MAX_DEPTH,
                max_bytes, 0};
    json_value *root = tp_calloc(1, sizeof *root);
    if (parse_value(&p, root, 0)) {
        skip_ws(&p);
        if (p.s != p.end) fail(&p, "trailing characters after the JSON value");
    }
    if (p.failed) { json_free(root); return NULL; }
    return root;
}

void json_free(json_value *v) {
    if (!v) return;
    free_children(v);
    free(v);
}

const json_value *json_get(const json_value *obj, const char *key) {
    if (!obj || obj->type != JSON_OBJECT) return NULL;
    size_t n = strlen(key);
    for (size_t i = 0; i < obj->n; i++)
        if (obj->key_lens[i] == n && memcmp(obj->keys[i], key, n) == 0) return &obj->items[i];
    return NULL;
}

const char *json_type_name(json_type t) {
    static const char *names[] = {"null", "boolean", "number", "string", "array", "object"};
    return names[t];
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid. */
static int utf8_len(const unsigned char *s, size_t left) {
    unsigned c = s[0];
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || (size_t)n > left) return 0;
    for (int i = 1; i < n; i++) if ((s[i] & 0xC0) != 0x80) return 0;
    if (n == 2 && c < 0xC2) return 0;
    if (n == 3) {
        unsigned cp = (c & 15) << 12 | (s[1] & 63) << 6 | (s[2] & 63);
        if (cp < 0x800 || (cp >= 0xD800 && cp < 0xE000)) return 0;
    }
    if (n == 4) {
        unsigned cp = (c & 7) << 18 | (s[1] & 63) << 12 | (s[2] & 63) << 6 | (s[3] & 63);
        if (cp < 0x10000 || cp > 0x10FFFF) return 0;
    }
    return n;
}

void json_write_string(const char *str, size_t len, void (*put)(void *ctx, const char *p, size_t n), void *ctx) {
    const unsigned char *s = (const unsigned char *)str;
    put(ctx, "\"", 1);
    for (size_t i = 0; i < len;) {
        unsigned c = s[i];
        char e[8];
        if (c == '"' || c == '\\') { e[0] = '\\'; e[1] = (char)c; put(ctx, e, 2); i++; }
        else if (c == '\n') { put(ctx, "\\n", 2); i++; }
        else if (c == '\r') { put(ctx, "\\r", 2); i++; }
        else if (c == '\t') { put(ctx, "\\t", 2); i++; }
        else if (c < 0x20 || c == 0x7f) { put(ctx, e, (size_t)snprintf(e, sizeof e, "\\u%04x", c)); i++; }
        else {
            int n = utf8_len(s + i, len - i);
            if (n == 0) { put(ctx, "\\ufffd", 6); i++; }
            else { put(ctx, (const char *)s + i, (size_t)n); i += n; }
        }
    }
    put(ctx, "\"", 1);
}
