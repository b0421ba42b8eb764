/* A growable byte buffer for building JSON and SSE text. */
#ifndef TPGEN_SERVER_JBUF_H
#define TPGEN_SERVER_JBUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *s;     /* NUL-terminated */
    size_t n, cap;
} jbuf;

void jb_free(jbuf *b);
/* Room for n bytes in all, allocated exactly (a body of known length). */
void jb_reserve(jbuf *b, size_t n);
void jb_put(jbuf *b, const char *s, size_t n);
void jb_str(jbuf *b, const char *s); /* raw text */
void jb_printf(jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string literal of n bytes; invalid UTF-8 bytes become \ufffd. */
void jb_json(jbuf *b, const char *s, size_t n);
size_t jb_json_size(const char *s, size_t n); /* the bytes jb_json writes for it */
/* A JSON number that round-trips a float; NaN/inf as null. */
void jb_float(jbuf *b, float x);

#endif
