/* HF parity of `tpgen generate` and `tpgen score` against a fixture made by
 * tools/fixtures/make_fixtures.py (HF transformers), at one TP size.
 *
 * usage: check_parity --tpgen BIN --np N [--mpiexec MPIRUN] --fixture DIR [--tol T] [-- extra tpgen flags]
 *
 * Checks, each against expected.json:
 *  1. score: log-probabilities and top-5 alternatives of every position;
 *  2. generate, one prompt at a time: greedy ids identical, log-probabilities and top-5;
 *  3. generate, all prompts in one --prompts-file with a tiny step budget (chunked prefill,
 *     prompts queueing for slots, decode and prefill in the same step): the same results;
 *  4. the KV cache: each run forwards every token exactly once (prompt + generated - 1,
 *     from --stats), and the cached decode's log-probabilities equal scoring the whole
 *     sequence (prompt + generated) in one pass.
 * Exits 77 (skip) when np exceeds what the fixture's n_head allows.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/json.h"
#include "util/log.h"

static const char *g_tpgen, *g_mpiexec, *g_fixture, *g_extra = "";
static int g_np = 1, g_fail = 0, g_checks = 0;
static double g_tol = 2e-4;

#define CHECK(cond, ...)                                              \
    do {                                                              \
        g_checks++;                                                   \
        if (!(cond)) {                                                \
            g_fail++;                                                 \
            fprintf(stderr, "FAIL %s np=%d: ", g_fixture, g_np);     \
            fprintf(stderr, __VA_ARGS__);                             \
            fputc('\n', stderr);                                      \
        }                                                             \
    } while (0)

/* Runs a tpgen subcommand on np ranks; returns its stdout (and stderr in *err_out). */
static char *run(const char *args, char **err_out) {
    char errpath[] = "/tmp/tpgen_parity_XXXXXX";
    int fd = mkstemp(errpath);
    if (fd < 0) { perror("mkstemp"); exit(1); }
    static char cmd[80000];
    if (g_mpiexec)
        snprintf(cmd, sizeof cmd, "%s --oversubscribe --allow-run-as-root -np %d %s %s %s 2>%s", g_mpiexec, g_np,
                 g_tpgen, args, g_extra, errpath);
    else snprintf(cmd, sizeof cmd, "%s %s %s 2>%s", g_tpgen, args, g_extra, errpath);
    FILE *p = popen(cmd, "r");
    if (!p) { perror("popen"); exit(1); }
    size_t cap = 1 << 16, n = 0;
    char *out = malloc(cap);
    size_t got;
    while ((got = fread(out + n, 1, cap - n - 1, p)) > 0) {
        n += got;
        if (n + 1 >= cap) out = realloc(out, cap *= 2);
    }
    out[n] = 0;
    int rc = pclose(p);
    size_t elen;
    char *err = tp_read_file(errpath, &elen);
    remove(errpath);
    if (rc != 0) {
        fprintf(stderr, "FAIL: command exited with %d: %s\n%s\n", rc, cmd, err ? err : "");
        exit(1);
    }
    if (err_out) *err_out = err;
    else free(err);
    return out;
}

static json_value *parse_or_die(const char *text, size_t len, const char *what) {
    char err[256];
    json_value *v = json_parse(text, len, err, sizeof err);
    if (!v) {
        fprintf(stderr, "FAIL: %s is not JSON (%s): %.300s\n", what, err, text);
        exit(1);
    }
    return v;
}

static void ids_arg(char *buf, size_t size, const json_value *ids, int extra_n, const int *extra) {
    size_t u = 0;
    buf[0] = 0;
    for (size_t i = 0; i < ids->n; i++) u += snprintf(buf + u, size - u, i ? ",%lld" : "%lld", (long long)ids->items[i].integer);
    for (int i = 0; i < extra_n; i++) u += snprintf(buf + u, size - u, ",%d", extra[i]);
}

static double num(const json_value *v) { return v->type == JSON_NUMBER ? v->number : NAN; }

/* expected/got: [[id, lp], ...] lists (or null). */
static void compare_top(const json_value *exp, const json_value *got, const char *what, int pos) {
    if (exp->type == JSON_NULL) {
        CHECK(got->type == JSON_NULL, "%s[%d]: expected null", what, pos);
        return;
    }
    CHECK(got->type == JSON_ARRAY && got->n == exp->n, "%s[%d]: expected %zu alternatives, got %zu", what, pos,
          exp->n, got->type == JSON_ARRAY ? got->n : 0);
    if (got->type != JSON_ARRAY) return;
    for (size_t j = 0; j < exp->n && j < got->n; j++) {
        long long ei = exp->items[j].items[0].integer, gi = got->items[j].items[0].integer;
        double el = num(&exp->items[j].items[1]), gl = num(&got->items[j].items[1]);
        CHECK(ei == gi, "%s[%d][%zu]: id %lld, expected %lld", what, pos, j, gi, ei);
        CHECK(fabs(el - gl) <= g_tol, "%s[%d][%zu]: logprob %.7f, expected %.7f (tol %g)", what, pos, j, gl, el, g_tol);
    }
}

static void compare_generation(const json_value *exp, const json_value *got, const char *what) {
    const json_value *eids = json_get(exp, "ids"), *gids = json_get(got, "ids");
    const json_value *elp = json_get(exp, "logprobs"), *glp = json_get(got, "logprobs");
    const json_value *etop = json_get(exp, "top_logprobs"), *gtop = json_get(got, "top_logprobs");
    CHECK(gids && gids->n == eids->n, "%s: %zu ids, expected %zu", what, gids ? gids->n : 0, eids->n);
    if (!gids || !glp || !gtop) return;
    for (size_t i = 0; i < eids->n && i < gids->n; i++) {
        CHECK(gids->items[i].integer == eids->items[i].integer, "%s: id %zu is %lld, expected %lld", what, i,
              (long long)gids->items[i].integer, (long long)eids->items[i].integer);
        if (gids->items[i].integer != eids->items[i].integer) return; /* the rest diverges */
        CHECK(fabs(num(&glp->items[i]) - num(&elp->items[i])) <= g_tol, "%s: logprob %zu is %.7f, expected %.7f", what,
              i, num(&glp->items[i]), num(&elp->items[i]));
        compare_top(&etop->items[i], &gtop->items[i], what, (int)i);
    }
    const json_value *fr = json_get(got, "finish_reason");
    CHECK(fr && fr->type == JSON_STRING && strcmp(fr->str, "length") == 0, "%s: finish_reason is not \"length\"", what);
}

static long long stat_value(const char *err, const char *key) {
    const char *p = err ? strstr(err, key) : NULL;
    if (!p) return -1;
    p += strlen(key);
    while (*p == ':' || *p == ' ') p++;
    return atoll(p); /* "key": N */
}

int main(int argc, char **argv) {
    static char extra[4096];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tpgen")) g_tpgen = argv[++i];
        else if (!strcmp(argv[i], "--mpiexec")) g_mpiexec = argv[++i];
        else if (!strcmp(argv[i], "--np")) g_np = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--fixture")) g_fixture = argv[++i];
        else if (!strcmp(argv[i], "--tol")) g_tol = atof(argv[++i]);
        else if (!strcmp(argv[i], "--")) {
            size_t u = 0;
            for (i++; i < argc; i++) u += snprintf(extra + u, sizeof extra - u, " %s", argv[i]);
            g_extra = extra;
        } else { fprintf(stderr, "check_parity: unknown argument %s\n", argv[i]); return 2; }
    }
    if (!g_tpgen || !g_fixture) { fprintf(stderr, "check_parity: --tpgen and --fixture are required\n"); return 2; }
    if (g_np > 1 && !g_mpiexec) { fprintf(stderr, "check_parity: --np > 1 needs --mpiexec\n"); return 2; }

    char path[4096];
    snprintf(path, sizeof path, "%s/expected.json", g_fixture);
    size_t len;
    char *text = tp_read_file(path, &len);
    if (!text) { fprintf(stderr, "FAIL: cannot read %s\n", path); return 1; }
    json_value *exp = parse_or_die(text, len, path);
    const json_value *valid = json_get(exp, "valid_tp");
    int ok_tp = 0;
    for (size_t i = 0; valid && i < valid->n; i++) ok_tp |= valid->items[i].integer == g_np;
    if (!ok_tp) { printf("SKIPPED: TP=%d is not valid for %s\n", g_np, g_fixture); return 77; }

    static char args[65536], idbuf[32768];
    /* 1. score */
    const json_value *sc = json_get(exp, "score");
    ids_arg(idbuf, sizeof idbuf, json_get(sc, "ids"), 0, NULL);
    snprintf(args, sizeof args, "score --model %s --ids %s --logprobs 5 --json", g_fixture, idbuf);
    char *out = run(args, NULL);
    json_value *got = parse_or_die(out, strlen(out), "score output");
    const json_value *elp = json_get(sc, "logprobs"), *glp = json_get(got, "logprobs");
    const json_value *etop = json_get(sc, "top_logprobs"), *gtop = json_get(got, "top_logprobs");
    CHECK(glp && glp->n == elp->n, "score: %zu logprobs, expected %zu", glp ? glp->n : 0, elp->n);
    for (size_t i = 0; glp && gtop && i < elp->n && i < glp->n; i++) {
        if (elp->items[i].type == JSON_NULL) CHECK(glp->items[i].type == JSON_NULL, "score[%zu]: expected null", i);
        else CHECK(fabs(num(&glp->items[i]) - num(&elp->items[i])) <= g_tol, "score[%zu]: %.7f, expected %.7f", i,
                   num(&glp->items[i]), num(&elp->items[i]));
        compare_top(&etop->items[i], &gtop->items[i], "score top", (int)i);
    }
    json_free(got);
    free(out);

    /* 2. one prompt at a time; 4. KV cache vs score of the whole sequence */
    const json_value *gens = json_get(exp, "generate");
    for (size_t g = 0; g < gens->n; g++) {
        const json_value *e = &gens->items[g];
        const json_value *pids = json_get(e, "prompt_ids");
        int max_new = (int)json_get(e, "max_new_tokens")->integer;
        ids_arg(idbuf, sizeof idbuf, pids, 0, NULL);
        snprintf(args, sizeof args, "generate --model %s --prompt-ids %s --max-new-tokens %d --ignore-eos --logprobs 5 "
                 "--json --stats", g_fixture, idbuf, max_new);
        char *err = NULL;
        out = run(args, &err);
        got = parse_or_die(out, strlen(out), "generate output");
        char what[64];
        snprintf(what, sizeof what, "generate[%zu]", g);
        compare_generation(e, got, what);
        long long fwd = stat_value(err, "\"forwarded_tokens\"");
        CHECK(fwd == (long long)pids->n + max_new - 1, "%s: forwarded %lld tokens, expected %lld (each token once)",
              what, fwd, (long long)pids->n + max_new - 1);
        free(err);
        /* score prompt + generated in one pass: same log-probabilities as the cached decode */
        const json_value *gids = json_get(got, "ids"), *gl = json_get(got, "logprobs");
        int *gen = malloc(gids->n * sizeof(int));
        for (size_t i = 0; i < gids->n; i++) gen[i] = (int)gids->items[i].integer;
        ids_arg(idbuf, sizeof idbuf, pids, (int)gids->n, gen);
        free(gen);
        snprintf(args, sizeof args, "score --model %s --ids %s --json", g_fixture, idbuf);
        char *sout = run(args, NULL);
        json_value *s = parse_or_die(sout, strlen(sout), "score output");
        const json_value *sl = json_get(s, "logprobs");
        for (size_t i = 0; i < gids->n; i++) {
            double a = num(&gl->items[i]), b = num(&sl->items[pids->n + i]);
            CHECK(fabs(a - b) <= 1e-4, "%s: cached decode logprob %zu = %.7f, whole-sequence score %.7f", what, i, a, b);
        }
        json_free(s);
        free(sout);
        json_free(got);
        free(out);
    }

    /* 3. all prompts at once, tiny step budget */
    char pf[] = "/tmp/tpgen_prompts_XXXXXX";
    int fd = mkstemp(pf);
    FILE *f = fdopen(fd, "w");
    int max_new = 0;
    for (size_t g = 0; g < gens->n; g++) {
        ids_arg(idbuf, sizeof idbuf, json_get(&gens->items[g], "prompt_ids"), 0, NULL);
        fprintf(f, "[%s]\n", idbuf);
        int m = (int)json_get(&gens->items[g], "max_new_tokens")->integer;
        max_new = m > max_new ? m : max_new;
    }
    fclose(f);
    snprintf(args, sizeof args, "generate --model %s --prompts-file %s --max-new-tokens %d --ignore-eos --logprobs 5 "
             "--json --max-batch 2 --max-batch-tokens 6", g_fixture, pf, max_new);
    out = run(args, NULL);
    remove(pf);
    char *line = out;
    for (size_t g = 0; g < gens->n; g++) {
        char *nl = strchr(line, '\n');
        if (!nl) { CHECK(0, "batched generate: only %zu result lines", g); break; }
        got = parse_or_die(line, nl - line, "batched generate line");
        /* the fixture has max_new_tokens per prompt; compare the common prefix */
        const json_value *e = &gens->items[g];
        json_value *ids = (json_value *)json_get(got, "ids");
        json_value *lps = (json_value *)json_get(got, "logprobs"), *tops = (json_value *)json_get(got, "top_logprobs");
        size_t want = json_get(e, "ids")->n, had = ids ? ids->n : 0;
        int cut = ids && lps && tops && had > want && lps->n == had && tops->n == had;
        if (cut) ids->n = lps->n = tops->n = want;
        char what[64];
        snprintf(what, sizeof what, "batched generate[%zu]", g);
        compare_generation(e, got, what);
        if (cut) ids->n = lps->n = tops->n = had; /* json_free frees the items it counts */
        json_free(got);
        line = nl + 1;
    }
    free(out);
    json_free(exp);
    free(text);
    printf("%s np=%d: %d checks, %d failed\n", g_fixture, g_np, g_checks, g_fail);
    return g_fail ? 1 : 0;
}
