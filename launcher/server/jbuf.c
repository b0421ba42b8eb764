#include "jbuf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/json.h"
#include "util/log.h"

void jb_free(jbuf *b) {
    free(b->s);
    memset(b, 0, sizeof *b);
}

static void reserve(jbuf *b, size_t more) {
    if (b->n + more + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + more + 1) cap *= 2;
    b->s = tp_realloc(b->s, cap);
    b->cap = cap;
}

void jb_reserve(jbuf *b, size_t n) {
    if (n + 1 <= b->cap) return;
    b->s = tp_realloc(b->s, n + 1);
    b->cap = n + 1;
}

void jb_put(jbuf *b, const char *s, size_t n) {
    reserve(b, n);
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

void jb_str(jbuf *b, const char *s) { jb_put(b, s, strlen(s)); }

void jb_printf(jbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += n;
}

static void put_jbuf(void *b, const char *p, size_t n) { jb_put(b, p, n); }

void jb_json(jbuf *b, const char *str, size_t len) {
    reserve(b, len + 2);
    json_write_string(str, len, put_jbuf, b);
}

static void count_bytes(void *ctx, const char *p, size_t n) {
    (void)p;
    *(size_t *)ctx += n;
}

size_t jb_json_size(const char *s, size_t n) {
    size_t k = 0;
    json_write_string(s, n, count_bytes, &k);
    return k;
}

void jb_float(jbuf *b, float x) {
    if (!isfinite(x)) jb_str(b, "null");
    else jb_printf(b, "%.9g", x);
}
