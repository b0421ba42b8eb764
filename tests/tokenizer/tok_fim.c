/* The fill-in-the-middle prompt (engine/tokenizer/fim.h) against the reference libraries' ids
 * (tools/fixtures/make_fim_fixtures.py): CodeGen2's format recognized from the tokenizer without fim.json
 * (CodeGen2's tokenizer.json, CodeGen2.5's CodeGen25Tokenizer), fim.json still first, CodeGen 1
 * without a format; prefix and suffix as plain text (token names stay text), an empty suffix. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/log.h"
#include "tokenizer/fim.h"
#include "tok_test.h"
#include "tests/common/check.h"


/* copies src/name into dir */
static void copy_file(const char *src, const char *dir, const char *name) {
    char a[2048], b[2048];
    snprintf(a, sizeof a, "%s/%s", src, name);
    snprintf(b, sizeof b, "%s/%s", dir, name);
    size_t n;
    char *data = tp_read_file(a, &n);
    FILE *f = data ? fopen(b, "wb") : NULL;
    if (!f || fwrite(data, 1, n, f) != n || fclose(f)) {
        perror(data ? b : a);
        exit(1);
    }
    free(data);
}

/* every row of rows for tokenizer `which`: the FIM prompt ids, in one step and in two */
static void check_rows(tp_tokenizer *t, const tp_fim *f, json_value **rows, size_t n_rows, const char *which) {
    int seen = 0;
    for (size_t r = 0; r < n_rows; r++) {
        if (strcmp(json_get(rows[r], "tokenizer")->str, which) != 0) continue;
        seen++;
        const json_value *pre = json_get(rows[r], "prefix"), *suf = json_get(rows[r], "suffix");
        size_t n_want, n = 0, n2 = 0, n_suf = 0;
        int32_t *want = tt_json_ids(json_get(rows[r], "ids"), &n_want), *ids = NULL, *ids2 = NULL, *sids = NULL;
        char err[256];
        int rc = tp_fim_encode(f, t, pre->str, pre->str_len, suf->str, suf->str_len, &ids, &n, err, sizeof err);
        CHECK(rc == 0 && n == n_want && !memcmp(ids, want, n * sizeof *ids), "%s row %zu (prefix \"%s\", suffix "
              "\"%s\"): the FIM prompt ids differ from the reference's", which, r + 1, pre->str, suf->str);
        if (rc == 0 && (n != n_want || memcmp(ids, want, n * sizeof *ids))) {
            tt_print_ids("  want", want, n_want);
            tt_print_ids("  got ", ids, n);
        }
        rc = tp_tokenizer_encode_text(t, suf->str, suf->str_len, &sids, &n_suf, err, sizeof err) ||
             tp_fim_assemble(f, t, pre->str, pre->str_len, sids, n_suf, &ids2, &n2, err, sizeof err);
        CHECK(rc == 0 && n2 == n_want && !memcmp(ids2, want, n2 * sizeof *ids2), "%s row %zu: tp_fim_assemble "
              "differs", which, r + 1);
        CHECK(f->stop_id == json_get(rows[r], "stop")->integer, "%s: stop id %d", which, f->stop_id);
        free(want), free(ids), free(ids2), free(sids);
    }
    CHECK(seen >= 5, "%s: %d rows", which, seen);
}

int tt_cmd_fim(int argc, char **argv) {
    if (argc != 5) return tt_usage("fim CASES.jsonl CODEGEN2_FIXTURE CODEGEN25_DIR CODEGEN_DIR TMPDIR");
    size_t n_rows;
    json_value **rows = tt_read_jsonl(argv[0], &n_rows);
    char err[4096], dir[1024];
    tp_fim f;

    /* CodeGen2 as published: tokenizer.json, no fim.json */
    mkdir(argv[4], 0755);
    snprintf(dir, sizeof dir, "%s/fim_codegen2_no_fim_json", argv[4]);
    mkdir(dir, 0755);
    copy_file(argv[1], dir, "tokenizer.json");
    tp_tokenizer *t = tt_load(dir);
    CHECK(tp_fim_load(NULL, dir, t, &f, err, sizeof err) == 1 && strstr(f.path, "built in"),
          "CodeGen2's tokenizer without fim.json: the format is recognized (%s)", f.path);
    check_rows(t, &f, rows, n_rows, "codegen2");
    /* an explicit --fim file is still read first */
    CHECK(tp_fim_load("/nonexistent/fim.json", dir, t, &f, err, sizeof err) == -1 &&
              strstr(err, "/nonexistent/fim.json"),
          "--fim FILE overrides: %s", err);
    tp_tokenizer_free(t);

    /* the fixture's fim.json comes before the recognized format */
    t = tt_load(argv[1]);
    CHECK(tp_fim_load(NULL, argv[1], t, &f, err, sizeof err) == 1 && strstr(f.path, "/fim.json"), "fim.json: %s",
          f.path);
    tp_tokenizer_free(t);

    /* CodeGen2.5: the same format from its tiktoken tokenizer */
    t = tt_load(argv[2]);
    CHECK(tp_fim_load(NULL, argv[2], t, &f, err, sizeof err) == 1 && strstr(f.path, "built in"),
          "CodeGen2.5: the format is recognized (%s)", f.path);
    check_rows(t, &f, rows, n_rows, "codegen25");
    tp_tokenizer_free(t);

    /* CodeGen 1: no <mask_1>, <sep>, <eom>: no format */
    t = tt_load(argv[3]);
    CHECK(tp_fim_load(NULL, argv[3], t, &f, err, sizeof err) == 0, "CodeGen 1 has no FIM format");
    tp_tokenizer_free(t);

    tt_free_jsonl(rows, n_rows);
    printf("fim: %s\n", g_fail ? "FAILED" : "formats recognized, prompt ids equal to the references");
    return g_fail ? 1 : 0;
}
