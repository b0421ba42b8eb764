#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "tok_test.h"

json_value **tt_read_jsonl(const char *path, size_t *n) {
    size_t len;
    char *text = tp_read_file(path, &len);
    if (!text) {
        perror(path);
        exit(1);
    }
    size_t cap = 256;
    json_value **rows = tp_malloc(cap * sizeof *rows);
    *n = 0;
    int line = 0;
    for (char *s = text, *end = text + len; s < end;) {
        char *nl = memchr(s, '\n', (size_t)(end - s));
        char *e = nl ? nl : end;
        line++;
        if (e > s) {
            char err[256];
            json_value *v = json_parse(s, (size_t)(e - s), err, sizeof err);
            if (!v) {
                fprintf(stderr, "%s:%d: %s\n", path, line, err);
                exit(1);
            }
            if (*n == cap) rows = tp_realloc(rows, (cap *= 2) * sizeof *rows);
            rows[(*n)++] = v;
        }
        s = nl ? nl + 1 : end;
    }
    free(text);
    if (*n == 0) {
        fprintf(stderr, "%s: no rows\n", path);
        exit(1);
    }
    return rows;
}

void tt_free_jsonl(json_value **rows, size_t n) {
    for (size_t i = 0; i < n; i++) json_free(rows[i]);
    free(rows);
}

int32_t *tt_json_ids(const json_value *arr, size_t *n) {
    if (!arr || arr->type != JSON_ARRAY) {
        fprintf(stderr, "fixture row without an ids array\n");
        exit(1);
    }
    int32_t *ids = tp_malloc((arr->n + 1) * sizeof *ids);
    for (size_t i = 0; i < arr->n; i++) ids[i] = (int32_t)arr->items[i].integer;
    *n = arr->n;
    return ids;
}

tp_tokenizer *tt_load(const char *dir) {
    char err[1024];
    tp_tokenizer *t = tp_tokenizer_load(dir, err, sizeof err);
    if (!t) {
        fprintf(stderr, "loading the tokenizer: %s\n", err);
        exit(1);
    }
    return t;
}

void tt_print_text(const char *label, const char *s, size_t n) {
    fprintf(stderr, "%s (%zu bytes): \"", label, n);
    for (size_t i = 0; i < n && i < 160; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(stderr, "\\%c", c);
        else if (c >= 0x20 && c < 0x7f) fputc(c, stderr);
        else fprintf(stderr, "\\x%02x", c);
    }
    fprintf(stderr, n > 160 ? "\"...\n" : "\"\n");
}

void tt_print_ids(const char *label, const int32_t *ids, size_t n) {
    fprintf(stderr, "%s (%zu):", label, n);
    for (size_t i = 0; i < n && i < 40; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, n > 40 ? " ...\n" : "\n");
}

char *tt_stream_decode(const tp_tokenizer *t, const int32_t *ids, size_t n, int skip, size_t *len) {
    tp_detok_stream *s = tp_detok_stream_new(t, skip);
    char *out = NULL;
    size_t out_len = 0;
    for (size_t i = 0; i < n; i++) {
        size_t before = out_len;
        if (tp_detok_stream_push(s, ids[i], &out, &out_len)) {
            fprintf(stderr, "stream push of id %d failed\n", ids[i]);
            exit(1);
        }
        /* what each push adds is whole characters */
        if (tt_utf8_first_invalid((const unsigned char *)out + before, out_len - before) != out_len - before) {
            fprintf(stderr, "stream push of id %d emitted an incomplete character\n", ids[i]);
            exit(1);
        }
    }
    tp_detok_stream_flush(s, &out, &out_len);
    tp_detok_stream_free(s);
    *len = out_len;
    return out;
}

int tt_usage(const char *usage) {
    fprintf(stderr, "usage: test_tokenizer %s\n", usage);
    return 2;
}

void tt_write_file(const char *dir, const char *name, const char *content) {
    char p[2048];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f || fputs(content, f) < 0 || fclose(f)) {
        perror(p);
        exit(1);
    }
}

size_t tt_utf8_first_invalid(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        int k;
        unsigned cp, min;
        if (c < 0x80) { i++; continue; }
        else if ((c & 0xE0) == 0xC0) { k = 1; cp = c & 0x1F; min = 0x80; }
        else if ((c & 0xF0) == 0xE0) { k = 2; cp = c & 0x0F; min = 0x800; }
        else if ((c & 0xF8) == 0xF0) { k = 3; cp = c & 0x07; min = 0x10000; }
        else return i;
        for (int j = 1; j <= k; j++) {
            if (i + (size_t)j >= n || (s[i + j] & 0xC0) != 0x80) return i;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
        i += (size_t)k + 1;
    }
    return n;
}
