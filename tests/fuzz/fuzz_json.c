/* Fuzz target: util/json.c. Any bytes either parse or fail with a message; a parsed tree keeps
 * the header's promises: strings NUL-terminated at their length, objects' keys with their
 * lengths, json_get finding each key's first member, an is_integer number equal to its double. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/json.h"

static void check(const json_value *v, int depth) {
    if (depth > 300) abort(); /* the parser limits nesting to 256 */
    switch (v->type) {
    case JSON_NULL: case JSON_BOOL: break;
    case JSON_NUMBER:
        /* "fits int64": the exact value, so the double is its rounding (-0 compares equal to 0) */
        if (v->is_integer && (double)v->integer != v->number) abort();
        break;
    case JSON_STRING:
        if (!v->str || v->str[v->str_len] != 0) abort();
        break;
    case JSON_ARRAY: case JSON_OBJECT:
        if (v->n && !v->items) abort();
        for (size_t i = 0; i < v->n; i++) {
            if (v->type == JSON_OBJECT) {
                if (!v->keys[i] || v->keys[i][v->key_lens[i]] != 0) abort();
                const json_value *first = json_get(v, v->keys[i]);
                /* json_get takes a C string: a key with a NUL byte is found by its prefix, if at all */
                if (strlen(v->keys[i]) == v->key_lens[i] && (!first || first > &v->items[i])) abort();
            }
            check(&v->items[i], depth + 1);
        }
        break;
    default: abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[128];
    err[0] = 0;
    json_value *v = json_parse((const char *)data, size, err, sizeof err);
    if (!v) {
        if (!err[0] || !memchr(err, 0, sizeof err)) abort(); /* a failure always says why */
        return 0;
    }
    check(v, 0);
    (void)json_type_name(v->type);
    json_free(v);
    return 0;
}
