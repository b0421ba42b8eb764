#include "jbuf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void jb_json(jbuf *b, const char *str, size_t len) {
    const unsigned char *s = (const unsigned char *)str;
    reserve(b, len + 2);
    jb_put(b, "\"", 1);
    for (size_t i = 0; i < len;) {
        unsigned c = s[i];
        if (c == '"' || c == '\\') { char e[2] = {'\\', (char)c}; jb_put(b, e, 2); i++; }
        else if (c == '\n') { jb_put(b, "\\n", 2); i++; }
        else if (c == '\r') { jb_put(b, "\\r", 2); i++; }
        else if (c == '\t') { jb_put(b, "\\t", 2); i++; }
        else if (c < 0x20 || c == 0x7f) { jb_printf(b, "\\u%04x", c); i++; }
        else {
            int n = utf8_len(s + i, len - i);
            if (n == 0) { jb_put(b, "\\ufffd", 6); i++; }
            else { jb_put(b, (const char *)s + i, n); i += n; }
        }
    }
    jb_put(b, "\"", 1);
}

void jb_float(jbuf *b, float x) {
    if (!isfinite(x)) jb_str(b, "null");
    else jb_printf(b, "%.9g", x);
}
