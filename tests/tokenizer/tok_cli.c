/* The tokenize / detokenize commands, run as a user runs them: ids and texts against the HF
 * fixtures, JSON output parsed back, raw output byte for byte, and the errors and exit codes. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/log.h"
#include "tok_test.h"

static const char *g_tpgen, *g_tmpdir;
static int g_fails;

typedef struct {
    int status; /* exit code, or -1 when killed */
    char *out, *err;
    size_t out_len, err_len;
} result;

/* runs TPGEN args... with stdin from stdin_path (or /dev/null); stdout and stderr via files */
static result run(const char *const *args, const char *stdin_path) {
    char out_path[600], err_path[600];
    snprintf(out_path, sizeof out_path, "%s/cli_out", g_tmpdir);
    snprintf(err_path, sizeof err_path, "%s/cli_err", g_tmpdir);
    const char *argv[64];
    int n = 0;
    argv[n++] = g_tpgen;
    for (int i = 0; args[i] && n < 63; i++) argv[n++] = args[i];
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(1);
    }
    if (pid == 0) {
        int in = open(stdin_path ? stdin_path : "/dev/null", O_RDONLY);
        int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (in < 0 || out < 0 || err < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(126);
        execv(g_tpgen, (char *const *)argv);
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) < 0) {
        perror("waitpid");
        exit(1);
    }
    result r = {WIFEXITED(st) ? WEXITSTATUS(st) : -1, NULL, NULL, 0, 0};
    r.out = tp_read_file(out_path, &r.out_len);
    r.err = tp_read_file(err_path, &r.err_len);
    if (!r.out || !r.err || r.status == 127 || r.status == 126) {
        fprintf(stderr, "could not run %s\n", g_tpgen);
        exit(1);
    }
    return r;
}

static void result_free(result *r) {
    free(r->out);
    free(r->err);
}

static void report(const char *what, const char *const *args, const result *r) {
    g_fails++;
    fprintf(stderr, "FAIL: %s\n  command: %s", what, g_tpgen);
    for (int i = 0; args[i]; i++) fprintf(stderr, " '%.80s'", args[i]);
    fprintf(stderr, "\n  exit %d; stderr: %.*s\n", r->status, (int)(r->err_len > 400 ? 400 : r->err_len), r->err);
}

static char *ids_csv(const int32_t *ids, size_t n) {
    char *s = tp_malloc(n * 12 + 1);
    size_t o = 0;
    s[0] = 0;
    for (size_t i = 0; i < n; i++) o += (size_t)sprintf(s + o, i ? ",%d" : "%d", ids[i]);
    return s;
}

static int same(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    return na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
}

/* parses "1,2,3\n" */
static int32_t *parse_csv(const char *s, size_t len, size_t *n) {
    int32_t *ids = tp_malloc((len + 1) * sizeof *ids);
    *n = 0;
    const char *p = s, *end = s + len;
    while (p < end && *p != '\n') {
        char *e;
        ids[(*n)++] = (int32_t)strtol(p, &e, 10);
        if (e == p) break;
        p = e + (*e == ',');
    }
    return ids;
}

static void check_row(const char *dir, const json_value *row, int via_stdin) {
    const json_value *text = json_get(row, "text");
    size_t n_want;
    int32_t *want = tt_json_ids(json_get(row, "ids"), &n_want);
    char path[600], err[256];
    snprintf(path, sizeof path, "%s/cli_text", g_tmpdir);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(text->str, 1, text->str_len, f) != text->str_len || fclose(f)) {
        perror(path);
        exit(1);
    }
    /* tokenize --file --json */
    const char *a1[] = {"tokenize", "--model", dir, "--file", path, "--json", NULL};
    result r = run(a1, NULL);
    json_value *j = r.status == 0 ? json_parse(r.out, r.out_len, err, sizeof err) : NULL;
    size_t n_got = 0;
    int32_t *got = j && json_get(j, "ids") ? tt_json_ids(json_get(j, "ids"), &n_got) : NULL;
    if (!got || !same(got, n_got, want, n_want)) report("tokenize --file --json: ids differ from HF", a1, &r);
    free(got);
    json_free(j);
    result_free(&r);
    /* tokenize --text (argv cannot carry NUL bytes), plain output */
    if (!memchr(text->str, 0, text->str_len)) {
        const char *a2[] = {"tokenize", "--model", dir, "--text", text->str, NULL};
        r = run(a2, NULL);
        got = parse_csv(r.out, r.out_len, &n_got);
        if (r.status != 0 || !same(got, n_got, want, n_want)) report("tokenize --text: ids differ from HF", a2, &r);
        free(got);
        result_free(&r);
    }
    /* tokenize --file - (stdin) */
    if (via_stdin) {
        const char *a3[] = {"tokenize", "--model", dir, "--file", "-", NULL};
        r = run(a3, path);
        got = parse_csv(r.out, r.out_len, &n_got);
        if (r.status != 0 || !same(got, n_got, want, n_want)) report("tokenize --file - (stdin): ids differ", a3, &r);
        free(got);
        result_free(&r);
    }
    /* detokenize --json and raw */
    char *csv = ids_csv(want, n_want);
    const char *a4[] = {"detokenize", "--model", dir, "--ids", csv, "--json", NULL};
    r = run(a4, NULL);
    j = r.status == 0 ? json_parse(r.out, r.out_len, err, sizeof err) : NULL;
    const json_value *jt = j ? json_get(j, "text") : NULL;
    if (!jt || jt->str_len != text->str_len || memcmp(jt->str, text->str, text->str_len) != 0)
        report("detokenize --json: text differs", a4, &r);
    json_free(j);
    result_free(&r);
    const char *a5[] = {"detokenize", "--model", dir, "--ids", csv, NULL};
    r = run(a5, NULL);
    if (r.status != 0 || r.out_len != text->str_len || memcmp(r.out, text->str, text->str_len) != 0)
        report("detokenize: raw text differs", a5, &r);
    result_free(&r);
    free(csv);
    free(want);
}

static void expect_error(const char *const *args, int code, const char *want) {
    result r = run(args, NULL);
    if (r.status != code || !strstr(r.err, want)) {
        char what[256];
        snprintf(what, sizeof what, "expected exit %d and \"%s\" on stderr", code, want);
        report(what, args, &r);
    }
    result_free(&r);
}

int tt_cmd_cli(int argc, char **argv) {
    if (argc != 3) return tt_usage("cli TPGEN DATA_DIR TMPDIR");
    g_tpgen = argv[0];
    char dir[600], small[600], corpus[600], dec_path[600], trunc_path[600], tmp[600];
    snprintf(dir, sizeof dir, "%s/codegen", argv[1]);
    snprintf(small, sizeof small, "%s/small", argv[1]);
    snprintf(corpus, sizeof corpus, "%s/hf_corpus.jsonl", argv[1]);
    snprintf(dec_path, sizeof dec_path, "%s/hf_decode.jsonl", argv[1]);
    snprintf(trunc_path, sizeof trunc_path, "%s/hf_truncate.jsonl", argv[1]);
    snprintf(tmp, sizeof tmp, "%s/tok_cli_XXXXXX", argv[2]);
    mkdir(argv[2], 0755);
    if (!mkdtemp(tmp)) {
        perror(tmp);
        return 1;
    }
    g_tmpdir = tmp;

    /* ids and texts: a spread of corpus rows (each command loads the tokenizer: keep it short) */
    size_t n_rows;
    json_value **rows = tt_read_jsonl(corpus, &n_rows);
    int checked = 0;
    for (size_t i = 0; i < n_rows; i += n_rows / 12 + 1, checked++) check_row(dir, rows[i], checked < 3);
    for (size_t i = 0; i < n_rows; i++) { /* a few hard edge cases by content */
        const json_value *t = json_get(rows[i], "text");
        if (strstr(t->str, "<|endoftext|>") || memchr(t->str, '"', t->str_len) || memchr(t->str, 0, t->str_len) ||
            memchr(t->str, '\\', t->str_len) || memchr(t->str, 0x1c, t->str_len)) {
            if (checked++ > 24) break;
            check_row(dir, rows[i], 0);
        }
    }
    tt_free_jsonl(rows, n_rows);

    /* --skip-special against HF's decode */
    rows = tt_read_jsonl(dec_path, &n_rows);
    for (size_t i = 0, done = 0; i < n_rows && done < 6; i++) {
        const json_value *skip = json_get(rows[i], "skip_special"), *want = json_get(rows[i], "text");
        if (!skip->boolean) continue;
        size_t n;
        int32_t *ids = tt_json_ids(json_get(rows[i], "ids"), &n);
        char *csv = ids_csv(ids, n);
        const char *a[] = {"detokenize", "--model", dir, "--ids", csv, "--skip-special", NULL};
        result r = run(a, NULL);
        if (r.status != 0 || r.out_len != want->str_len || memcmp(r.out, want->str, r.out_len) != 0)
            report("detokenize --skip-special differs from HF", a, &r);
        result_free(&r);
        free(csv);
        free(ids);
        done++;
    }
    tt_free_jsonl(rows, n_rows);

    /* --truncate-before against CodeGen's truncate (ids from the library, checked elsewhere) */
    tp_tokenizer *t = tt_load(dir);
    rows = tt_read_jsonl(trunc_path, &n_rows);
    for (size_t i = 0, done = 0; i < n_rows && done < 6; i++) {
        const json_value *pats = json_get(rows[i], "patterns"), *text = json_get(rows[i], "text");
        if (pats->n == 0 || pats->n > 4) continue;
        size_t keep = (size_t)json_get(rows[i], "keep")->integer, n;
        int32_t *ids;
        char err[256];
        if (tp_tokenizer_encode(t, text->str, text->str_len, &ids, &n, err, sizeof err)) exit(1);
        char *csv = ids_csv(ids, n);
        const char *a[16] = {"detokenize", "--model", dir, "--ids", csv};
        int k = 5;
        for (size_t p = 0; p < pats->n; p++) a[k++] = "--truncate-before", a[k++] = pats->items[p].str;
        a[k] = NULL;
        result r = run(a, NULL);
        if (r.status != 0 || r.out_len != keep || memcmp(r.out, text->str, keep) != 0)
            report("detokenize --truncate-before differs from CodeGen's truncate", a, &r);
        result_free(&r);
        free(csv);
        free(ids);
        done++;
    }
    tt_free_jsonl(rows, n_rows);
    tp_tokenizer_free(t);

    /* CodeGen2.5: a checkpoint directory with config.json (a LLaMA's) + tokenizer_config.json and
     * no vocabulary file; rows of the tiktoken references */
    char cg25[600], cg25_cases[600];
    snprintf(cg25, sizeof cg25, "%s/codegen25", argv[1]);
    snprintf(cg25_cases, sizeof cg25_cases, "%s/codegen25_cases.jsonl", argv[1]);
    rows = tt_read_jsonl(cg25_cases, &n_rows);
    for (size_t i = 0, done = 0; i < n_rows && done < 6; i += n_rows / 6 + 1, done++) check_row(cg25, rows[i], 0);
    tt_free_jsonl(rows, n_rows);

    /* tokenizer.json directory */
    const char *a_small[] = {"tokenize", "--model", small, "--text", "def f(x):\n    return x", "--json", NULL};
    result r = run(a_small, NULL);
    if (r.status != 0 || strncmp(r.out, "{\"ids\": [", 9) != 0) report("tokenize with tokenizer.json", a_small, &r);
    result_free(&r);

    /* help, usage errors (2), other errors (1) */
    char badfile[700], missing[700];
    snprintf(badfile, sizeof badfile, "%s/bad_utf8", tmp);
    snprintf(missing, sizeof missing, "%s/no_such_file", tmp);
    FILE *f = fopen(badfile, "wb");
    fputs("ok \xff\xfe", f);
    fclose(f);
    const char *help[] = {"tokenize", "--help", NULL};
    r = run(help, NULL);
    if (r.status != 0 || !strstr(r.out, "usage: tpgen tokenize")) report("tokenize --help", help, &r);
    result_free(&r);
    const char *dhelp[] = {"detokenize", "-h", NULL};
    r = run(dhelp, NULL);
    if (r.status != 0 || !strstr(r.out, "usage: tpgen detokenize")) report("detokenize -h", dhelp, &r);
    result_free(&r);
    expect_error((const char *[]){"tokenize", NULL}, 2, "--model");
    expect_error((const char *[]){"tokenize", "--model", dir, NULL}, 2, "--text");
    expect_error((const char *[]){"tokenize", "--model", dir, "--text", "a", "--file", badfile, NULL}, 2, "exactly one");
    expect_error((const char *[]){"tokenize", "--model", dir, "--text", "a", "--frobnicate", NULL}, 2, "--frobnicate");
    expect_error((const char *[]){"tokenize", "--model", dir, "--text", NULL}, 2, "--text needs a value");
    expect_error((const char *[]){"tokenize", "--model", dir, "--text", "a", "--text", "b", NULL}, 2, "twice");
    expect_error((const char *[]){"tokenize", "--model", tmp, "--text", "a", NULL}, 1, tmp);
    expect_error((const char *[]){"tokenize", "--model", dir, "--file", missing, NULL}, 1, "no_such_file");
    expect_error((const char *[]){"tokenize", "--model", dir, "--file", badfile, NULL}, 1, "invalid UTF-8 at byte offset 3");
    expect_error((const char *[]){"detokenize", "--model", dir, NULL}, 2, "--ids");
    expect_error((const char *[]){"detokenize", "--model", dir, "--ids", "1,x,3", NULL}, 2, "1,x,3");
    expect_error((const char *[]){"detokenize", "--model", dir, "--ids", "1;2", NULL}, 2, "--ids");
    expect_error((const char *[]){"detokenize", "--model", dir, "--ids", "1,99999", NULL}, 1, "99999");
    expect_error((const char *[]){"detokenize", "--model", dir, "--ids", "-1", NULL}, 1, "-1");
    expect_error((const char *[]){"detokenize", "--model", dir, "--ids", "1", "--truncate-before", "(", NULL}, 2, "(");
    expect_error((const char *[]){"detokenize", "--model", missing, "--ids", "1", NULL}, 1, "no_such_file");
    expect_error((const char *[]){"detokenize", "--ids", "1", "--bogus", NULL}, 2, "--bogus");
    /* --ids also as [1, 2] and space-separated; --flag=value */
    const char *a_br[] = {"detokenize", "--model", dir, "--ids", "[40, 1101]", NULL};
    char model_eq[700];
    snprintf(model_eq, sizeof model_eq, "--model=%s", dir);
    const char *a_sp[] = {"detokenize", model_eq, "--ids=40 1101", NULL};
    result r1 = run(a_br, NULL), r2 = run(a_sp, NULL);
    if (r1.status != 0 || r2.status != 0 || r1.out_len == 0 || r1.out_len != r2.out_len ||
        memcmp(r1.out, r2.out, r1.out_len) != 0)
        report("detokenize --ids [a, b] vs --ids='a b'", a_sp, &r2);
    result_free(&r1);
    result_free(&r2);

    printf("cli (%s): %d texts through tokenize/detokenize, errors and exit codes: %s\n", g_tpgen, checked,
           g_fails ? "FAILURES" : "ok");
    return g_fails ? 1 : 0;
}
