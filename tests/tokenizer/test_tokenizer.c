/* Tokenizer tests against HF fixtures (tools/fixtures/make_tokenizer_fixtures.py) and against plain
 * references written here. One program, one subcommand per ctest test:
 *   encode DIR FILE.jsonl...  ids == HF's (or tiktoken's), cached == uncached == heap BPE, decode(encode(x)) == x
 *                             (rows with "plain": true through tp_tokenizer_encode_text)
 *                             (or == HF's decode where a row gives it),
 *                             streaming decode == full decode
 *   decode DIR FILE.jsonl     text == HF's decode, with and without skipping special tokens
 *   truncate FILE.jsonl       kept prefix == CodeGen's truncate (transformers)
 *   fuzz DIR SEED N           random bytes and random Unicode (tok_fuzz.c)
 *   unit DIR DATA             loading errors, vocab facts, errors, stop strings (tok_unit.c)
 *   cli TPGEN DATA            the tokenize/detokenize commands (tok_cli.c)
 *   codegen25 DIR TMP         CodeGen2.5's id layout, plain text, load errors (tok_codegen25.c)
 *   fim CASES CG2 CG25 CG TMP the FIM format recognized, its prompt ids (tok_fim.c)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "tokenizer/tokenizer_internal.h"
#include "tok_test.h"

static int same_ids(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    return na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
}

static int encode_file(tp_tokenizer *t, tp_tokenizer *t_heap, const char *path) {
    size_t n_rows, total_ids = 0, total_bytes = 0;
    json_value **rows = tt_read_jsonl(path, &n_rows);
    int bad = 0;
    for (size_t r = 0; r < n_rows; r++) {
        const json_value *text = json_get(rows[r], "text"), *round = json_get(rows[r], "decoded");
        /* "decoded": HF's own decode of the ids, where it is not the text (only for added tokens
         * that HF's byte-level decoder maps to other bytes; CodeGen has none) */
        if (!round) round = text;
        /* "plain": true: the ids of tp_tokenizer_encode_text (control token names as text) */
        const json_value *pl = json_get(rows[r], "plain");
        int (*enc)(tp_tokenizer *, const char *, size_t, int32_t **, size_t *, char *, size_t) =
            pl && pl->type == JSON_BOOL && pl->boolean ? tp_tokenizer_encode_text : tp_tokenizer_encode;
        size_t n_want;
        int32_t *want = tt_json_ids(json_get(rows[r], "ids"), &n_want);
        char err[256];
        int32_t *got = NULL, *again = NULL, *heap = NULL;
        size_t n_got = 0, n_again = 0, n_heap = 0;
        int rc = enc(t, text->str, text->str_len, &got, &n_got, err, sizeof err);
        int rc2 = enc(t, text->str, text->str_len, &again, &n_again, err, sizeof err);
        tpk_cache_clear(t_heap);
        int rc3 = enc(t_heap, text->str, text->str_len, &heap, &n_heap, err, sizeof err);
        const char *what = NULL;
        if (rc || rc2 || rc3) what = err;
        else if (!same_ids(got, n_got, want, n_want)) what = "ids differ from HF";
        else if (!same_ids(again, n_again, want, n_want)) what = "ids differ from HF on the second (cached) encode";
        else if (!same_ids(heap, n_heap, want, n_want)) what = "ids of the heap BPE differ from HF";
        char *dec = NULL, *str = NULL;
        size_t n_dec = 0, n_str = 0;
        if (!what) {
            if (tp_tokenizer_decode(t, got, n_got, 0, &dec, &n_dec, err, sizeof err)) what = err;
            else if (n_dec != round->str_len || memcmp(dec, round->str, n_dec) != 0)
                what = round == text ? "decode(encode(text)) != text" : "decode(ids) != HF's decode";
            else {
                str = tt_stream_decode(t, got, n_got, 0, &n_str);
                if (n_str != n_dec || memcmp(str, dec, n_dec) != 0) what = "streaming decode != decode";
            }
        }
        if (what) {
            if (++bad <= 5) {
                fprintf(stderr, "%s row %zu: %s\n", path, r + 1, what);
                tt_print_text("  text", text->str, text->str_len);
                tt_print_ids("  HF  ", want, n_want);
                if (got) tt_print_ids("  ours", got, n_got);
                if (dec) tt_print_text("  decoded", dec, n_dec);
            }
        }
        total_ids += n_want;
        total_bytes += text->str_len;
        free(want), free(got), free(again), free(heap), free(dec), free(str);
    }
    printf("%s: %zu texts, %zu bytes, %zu ids: %s\n", path, n_rows, total_bytes, total_ids,
           bad ? "MISMATCHES" : "all equal to HF, round trips and streaming ok");
    if (bad) fprintf(stderr, "%s: %d of %zu rows failed\n", path, bad, n_rows);
    tt_free_jsonl(rows, n_rows);
    return bad;
}

int tt_cmd_encode(int argc, char **argv) {
    if (argc < 2) return tt_usage("encode DIR FILE.jsonl...");
    tp_tokenizer *t = tt_load(argv[0]), *t_heap = tt_load(argv[0]);
    t_heap->bpe_small_max = 0; /* every word of 2+ bytes through the heap BPE */
    int bad = 0;
    for (int i = 1; i < argc; i++) bad += encode_file(t, t_heap, argv[i]);
    tp_tokenizer_free(t);
    tp_tokenizer_free(t_heap);
    return bad ? 1 : 0;
}

int tt_cmd_decode(int argc, char **argv) {
    if (argc != 2) return tt_usage("decode DIR FILE.jsonl");
    tp_tokenizer *t = tt_load(argv[0]);
    size_t n_rows;
    json_value **rows = tt_read_jsonl(argv[1], &n_rows);
    int bad = 0;
    for (size_t r = 0; r < n_rows; r++) {
        const json_value *want = json_get(rows[r], "text"), *skipv = json_get(rows[r], "skip_special");
        int skip = skipv && skipv->boolean;
        size_t n;
        int32_t *ids = tt_json_ids(json_get(rows[r], "ids"), &n);
        char err[256], *got = NULL, *str = NULL;
        size_t n_got = 0, n_str = 0;
        const char *what = NULL;
        if (tp_tokenizer_decode(t, ids, n, skip, &got, &n_got, err, sizeof err)) what = err;
        else if (n_got != want->str_len || memcmp(got, want->str, n_got) != 0) what = "text differs from HF";
        else if (strlen(got) != n_got && !memchr(want->str, 0, want->str_len)) what = "not NUL-terminated";
        else {
            str = tt_stream_decode(t, ids, n, skip, &n_str);
            if (n_str != n_got || memcmp(str, got, n_got) != 0) what = "streaming decode differs";
        }
        if (what && ++bad <= 5) {
            fprintf(stderr, "%s row %zu (skip_special=%d): %s\n", argv[1], r + 1, skip, what);
            tt_print_ids("  ids", ids, n);
            tt_print_text("  HF  ", want->str, want->str_len);
            if (got) tt_print_text("  ours", got, n_got);
            if (str) tt_print_text("  stream", str, n_str);
        }
        free(ids), free(got), free(str);
    }
    printf("%s: %zu decodes: %s\n", argv[1], n_rows, bad ? "MISMATCHES" : "all equal to HF (full and streaming)");
    tt_free_jsonl(rows, n_rows);
    tp_tokenizer_free(t);
    return bad ? 1 : 0;
}

int tt_cmd_truncate(int argc, char **argv) {
    if (argc != 1) return tt_usage("truncate FILE.jsonl");
    size_t n_rows;
    json_value **rows = tt_read_jsonl(argv[0], &n_rows);
    int bad = 0;
    for (size_t r = 0; r < n_rows; r++) {
        const json_value *text = json_get(rows[r], "text"), *pats = json_get(rows[r], "patterns");
        size_t want = (size_t)json_get(rows[r], "keep")->integer;
        const char *p[16];
        int np = 0;
        for (size_t i = 0; i < pats->n && np < 16; i++) p[np++] = pats->items[i].str;
        char err[256];
        size_t got = tp_tokenizer_truncate(text->str, text->str_len, p, np);
        if (tp_tokenizer_truncate_check(p, np, err, sizeof err)) {
            fprintf(stderr, "row %zu: %s\n", r + 1, err);
            bad++;
        } else if (got != want && ++bad <= 5) {
            fprintf(stderr, "%s row %zu: keep %zu bytes, CodeGen keeps %zu; patterns:", argv[0], r + 1, got, want);
            for (int i = 0; i < np; i++) fprintf(stderr, " /%s/", p[i]);
            fputc('\n', stderr);
            tt_print_text("  text", text->str, text->str_len);
        }
    }
    printf("%s: %zu truncations: %s\n", argv[0], n_rows, bad ? "MISMATCHES" : "all equal to CodeGen's");
    tt_free_jsonl(rows, n_rows);
    return bad ? 1 : 0;
}

int main(int argc, char **argv) {
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } cmds[] = {{"encode", tt_cmd_encode}, {"decode", tt_cmd_decode}, {"truncate", tt_cmd_truncate},
                {"fuzz", tt_cmd_fuzz},     {"unit", tt_cmd_unit},     {"cli", tt_cmd_cli},
                {"codegen25", tt_cmd_codegen25}, {"fim", tt_cmd_fim}};
    for (size_t i = 0; argc >= 2 && i < sizeof cmds / sizeof *cmds; i++)
        if (strcmp(argv[1], cmds[i].name) == 0) return cmds[i].fn(argc - 2, argv + 2);
    fprintf(stderr, "usage: test_tokenizer encode|decode|truncate|fuzz|unit|cli|codegen25|fim ...\n");
    return 2;
}
