/* A small strict JSON parser (RFC 8259) for config.json, safetensors headers and tokenizer files.
 * The whole document becomes a tree of json_value owned by the root; json_free releases it.
 * Strings are decoded to UTF-8 (\uXXXX and surrogate pairs included) and may hold NUL bytes,
 * so their length is kept. Object members keep their file order; lookups are linear.
 */
#ifndef TPGEN_JSON_H
#define TPGEN_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_type;

typedef struct json_value json_value;
struct json_value {
    json_type type;
    int boolean;
    double number;
    int is_integer;    /* number written without fraction or exponent and fits int64 */
    int64_t integer;   /* exact value when is_integer */
    char *str;         /* JSON_STRING: decoded UTF-8, NUL-terminated */
    size_t str_len;
    size_t n;          /* JSON_ARRAY / JSON_OBJECT: element count */
    json_value *items; /* [n] elements, or member values */
    char **keys;       /* JSON_OBJECT: [n] member names (decoded, NUL-terminated) */
    size_t *key_lens;  /* JSON_OBJECT: [n] */
};

/* Returns NULL on a syntax error and writes "line L column C: what" into err. */
json_value *json_parse(const char *text, size_t len, char *err, size_t err_size);
/* json_parse for text from a client: at most max_depth levels of nesting (256 at most) and at
 * most max_bytes of tree (elements, member names and strings; the allocator's own overhead
 * aside), so that the memory a document costs is bounded by its caller. Over a limit: NULL and
 * the error, as for a syntax error. */
json_value *json_parse_limited(const char *text, size_t len, int max_depth, size_t max_bytes, char *err,
                               size_t err_size);
void json_free(json_value *v);

const json_value *json_get(const json_value *obj, const char *key); /* NULL if absent */
const char *json_type_name(json_type t);

/* Writes str[0..len) as a quoted JSON string through put (called with pieces of output):
 * '"', '\\' and control characters escaped, invalid UTF-8 bytes as \ufffd. One escaper for
 * every JSON writer (the launcher's stdout output and the server's responses). */
void json_write_string(const char *str, size_t len, void (*put)(void *ctx, const char *p, size_t n), void *ctx);

#endif
