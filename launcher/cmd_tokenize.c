/* `tpgen tokenize` and `tpgen detokenize`: the tokenizer alone, in one process, without weights
 * or MPI. Exit codes: 0 ok, 2 usage errors (unknown or missing flags, malformed --ids), 1 the
 * rest (files that cannot be read, invalid UTF-8, ids out of range). */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/json.h"
#include "util/log.h"
#include "tokenizer/tokenizer.h"
#include "checkpoint/hub.h"
#include "launcher/commands.h"

#define MAX_PATTERNS 64

static const char *const TOKENIZE_USAGE =
    "usage: tpgen tokenize --model DIR (--text T | --file F) [--json] [--time]\n"
    "  Prints the token ids of the text, comma-separated on one line, or {\"ids\": [...]} with --json.\n"
    "  --model DIR  a directory with tokenizer.json, vocab.json + merges.txt (+ added_tokens.json), or\n"
    "               CodeGen2.5's tokenizer_config.json (CodeGen25Tokenizer)\n"
    "               (or ORG/NAME from the local Hugging Face cache; --revision R picks a branch or commit)\n"
    "  --text T     the text (UTF-8)\n"
    "  --file F     read the text from file F ('-' for stdin), byte for byte\n"
    "  --json       JSON output\n"
    "  --time       print load and encode time and throughput (MB/s) on stderr\n";

static const char *const DETOKENIZE_USAGE =
    "usage: tpgen detokenize --model DIR --ids 1,2,3 [--json] [--skip-special] [--truncate-before PAT]...\n"
    "  Prints the text of the ids as raw bytes, or {\"text\": \"...\"} with --json.\n"
    "  --model DIR            a directory with the tokenizer files (as for tokenize)\n"
    "  --ids LIST             token ids separated by commas and/or spaces ([1, 2] also accepted); with a\n"
    "                         config.json in DIR, any id below its vocab_size (ids with no token, such as\n"
    "                         CodeGen's padding past the tokenizer, decode to nothing, as HF does)\n"
    "  --json                 JSON output\n"
    "  --skip-special         leave out special tokens such as <|endoftext|>\n"
    "  --truncate-before PAT  CodeGen's truncate_before_pattern (regex, multiline; repeatable)\n";

static int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tpgen %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see tpgen %s --help)\n", cmd);
    va_end(ap);
    return 2;
}

static int fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tpgen %s: error: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

/* "--flag value" or "--flag=value"; returns 1 and the value when argv[*i] is that flag, 0 when it
 * is another flag, -1 when the value is missing (a usage error). */
static int flag_value(int argc, char **argv, int *i, const char *flag, const char **value) {
    size_t n = strlen(flag);
    const char *a = argv[*i];
    if (strncmp(a, flag, n) != 0) return 0;
    if (a[n] == '=') {
        *value = a + n + 1;
        return 1;
    }
    if (a[n] != 0) return 0;
    if (*i + 1 >= argc) return -1;
    *value = argv[++*i];
    return 1;
}

/* The end of flag a's turn in a command's flag loop: r from flag_value (-1: a's value is missing),
 * then its value v kept in *dst (when dst) unless a was given before. 0, or usage_error's status. */
static int keep_value(const char *cmd, const char *a, int r, const char **dst, const char *v) {
    if (r < 0) return usage_error(cmd, "%s needs a value", a);
    if (!dst) return 0;
    if (*dst) return usage_error(cmd, "%s is given twice", a);
    *dst = v;
    return 0;
}

static int write_all(const char *cmd, const char *s, size_t n) {
    if (fwrite(s, 1, n, stdout) != n || fflush(stdout) != 0)
        return fail(cmd, "writing the output failed: %s", strerror(errno));
    return 0;
}

static const char *g_revision; /* --revision R: the hub revision of --model ORG/NAME */

/* The tokenizer of --model; with model_vocab, also the ids the model makes: its config.json's
 * vocab_size when the directory has one (CodeGen pads it past the tokenizer), else 0 (the
 * tokenizer's size). */
static tp_tokenizer *load(const char *cmd, const char *model, int32_t *model_vocab) {
    char err[1024];
    char *dir = tp_hub_resolve(model, g_revision, err, sizeof err);
    if (!dir) {
        fail(cmd, "%s", err);
        return NULL;
    }
    tp_tokenizer *t = tp_tokenizer_load(dir, err, sizeof err);
    if (!t) fail(cmd, "%s", err);
    if (t && model_vocab) {
        /* only vocab_size is read: a tokenizer's directory may hold a model tpgen does not run
         * (CodeGen2.5 is a LLaMA), and its ids are still the tokenizer's to decode */
        char path[4096], jerr[256];
        struct stat st;
        snprintf(path, sizeof path, "%s/config.json", dir);
        *model_vocab = 0;
        if (stat(path, &st) == 0) {
            size_t len;
            char *text = tp_read_file(path, &len);
            json_value *cfg = text ? json_parse(text, len, jerr, sizeof jerr) : NULL;
            const json_value *v = cfg && cfg->type == JSON_OBJECT ? json_get(cfg, "vocab_size") : NULL;
            if (!cfg) fail(cmd, "%s: %s", path, text ? jerr : strerror(errno));
            else if (v && (v->type != JSON_NUMBER || !v->is_integer || v->integer < 1 || v->integer > INT32_MAX))
                fail(cmd, "%s: vocab_size must be a positive integer", path);
            else if (v) *model_vocab = (int32_t)v->integer;
            if (!cfg || (v && *model_vocab == 0)) {
                tp_tokenizer_free(t);
                t = NULL;
            }
            json_free(cfg);
            free(text);
        }
    }
    free(dir);
    return t;
}

int tp_cmd_tokenize(int argc, char **argv) {
    const char *cmd = "tokenize", *model = NULL, *text = NULL, *file = NULL;
    int json = 0, timing = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], **dst = NULL, *v = NULL;
        int r = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(TOKENIZE_USAGE, stdout);
            return 0;
        }
        if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--time")) timing = 1;
        else if ((r = flag_value(argc, argv, &i, "--model", &v))) dst = &model;
        else if ((r = flag_value(argc, argv, &i, "--revision", &v))) dst = &g_revision;
        else if ((r = flag_value(argc, argv, &i, "--text", &v))) dst = &text;
        else if ((r = flag_value(argc, argv, &i, "--file", &v))) dst = &file;
        else return usage_error(cmd, "unknown argument '%s'", a);
        if ((r = keep_value(cmd, a, r, dst, v))) return r;
    }
    if (!model) return usage_error(cmd, "--model DIR is required");
    if (!text == !file) return usage_error(cmd, "give exactly one of --text T or --file F");

    double t0 = tp_now_seconds();
    tp_tokenizer *t = load(cmd, model, NULL);
    if (!t) return 1;
    double t_load = tp_now_seconds() - t0;

    char *buf = NULL;
    size_t len;
    if (file) {
        buf = tp_read_file(strcmp(file, "-") == 0 ? "/dev/stdin" : file, &len);
        if (!buf) {
            int e = errno;
            tp_tokenizer_free(t);
            return fail(cmd, "cannot read --file %s: %s", file, strerror(e));
        }
    } else len = strlen(text);

    char err[256];
    int32_t *ids;
    size_t n;
    double t1 = tp_now_seconds();
    int rc = tp_tokenizer_encode(t, buf ? buf : text, len, &ids, &n, err, sizeof err);
    double t_enc = tp_now_seconds() - t1;
    free(buf);
    tp_tokenizer_free(t);
    if (rc) return fail(cmd, "%s%s", file ? "--file: " : "--text: ", err);

    /* one buffer, one write: up to 12 characters per id (ids are >= 0); printf per id would
     * take longer than the encode itself */
    char *out = tp_malloc(n * 13 + 32);
    size_t o = 0;
    if (json) o += (size_t)sprintf(out, "{\"ids\": [");
    for (size_t i = 0; i < n; i++) {
        if (i) {
            out[o++] = ',';
            if (json) out[o++] = ' ';
        }
        char digits[12];
        int k = 0;
        uint32_t v = (uint32_t)ids[i];
        do digits[k++] = (char)('0' + v % 10);
        while ((v /= 10) != 0);
        while (k) out[o++] = digits[--k];
    }
    o += (size_t)sprintf(out + o, json ? "]}\n" : "\n");
    rc = write_all(cmd, out, o);
    free(out);
    free(ids);
    if (timing)
        fprintf(stderr, "tokenize: load %.1f ms; encode %zu bytes -> %zu ids in %.2f ms = %.1f MB/s\n", t_load * 1e3,
                len, n, t_enc * 1e3, t_enc > 0 ? len / t_enc / 1e6 : 0.0);
    return rc;
}

/* ids separated by commas and/or white space, optionally inside [ ] */
static int parse_ids(const char *s, int32_t **ids, size_t *n) {
    size_t cap = 16;
    *ids = tp_malloc(cap * sizeof **ids);
    *n = 0;
    while (*s == ' ' || *s == '\t' || *s == '\n') s++;
    int bracket = *s == '[';
    if (bracket) s++;
    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == '\n' || *s == ',') s++;
        if (*s == 0 || (bracket && *s == ']')) break;
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || v < INT32_MIN || v > INT32_MAX ||
            (*end && *end != ',' && *end != ' ' && *end != '\t' && *end != '\n' && *end != ']'))
            return -1;
        if (*n == cap) *ids = tp_realloc(*ids, (cap *= 2) * sizeof **ids);
        (*ids)[(*n)++] = (int32_t)v;
        s = end;
    }
    if (bracket && *s == ']') s++;
    while (*s == ' ' || *s == '\t' || *s == '\n') s++;
    return *s == 0 ? 0 : -1;
}

/* JSON string escaping; s is valid UTF-8 (decode guarantees it) */
static char *json_escape(const char *s, size_t n, size_t *out_len) {
    char *o = tp_malloc(n * 6 + 3);
    size_t k = 0;
    o[k++] = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': k += (size_t)sprintf(o + k, "\\\""); break;
        case '\\': k += (size_t)sprintf(o + k, "\\\\"); break;
        case '\n': k += (size_t)sprintf(o + k, "\\n"); break;
        case '\r': k += (size_t)sprintf(o + k, "\\r"); break;
        case '\t': k += (size_t)sprintf(o + k, "\\t"); break;
        case '\b': k += (size_t)sprintf(o + k, "\\b"); break;
        case '\f': k += (size_t)sprintf(o + k, "\\f"); break;
        default:
            if (c < 0x20) k += (size_t)sprintf(o + k, "\\u%04x", c);
            else o[k++] = (char)c;
        }
    }
    o[k++] = '"';
    o[k] = 0;
    *out_len = k;
    return o;
}

int tp_cmd_detokenize(int argc, char **argv) {
    const char *cmd = "detokenize", *model = NULL, *ids_arg = NULL;
    const char *patterns[MAX_PATTERNS];
    int n_patterns = 0, json = 0, skip = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], **dst = NULL, *v = NULL;
        int r = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(DETOKENIZE_USAGE, stdout);
            return 0;
        }
        if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--skip-special") || !strcmp(a, "--skip-special-tokens")) skip = 1;
        else if ((r = flag_value(argc, argv, &i, "--model", &v))) dst = &model;
        else if ((r = flag_value(argc, argv, &i, "--revision", &v))) dst = &g_revision;
        else if ((r = flag_value(argc, argv, &i, "--ids", &v))) dst = &ids_arg;
        else if ((r = flag_value(argc, argv, &i, "--truncate-before", &v))) {
            if (r > 0) {
                if (n_patterns == MAX_PATTERNS) return usage_error(cmd, "more than %d --truncate-before", MAX_PATTERNS);
                patterns[n_patterns++] = v;
            }
        } else return usage_error(cmd, "unknown argument '%s'", a);
        if ((r = keep_value(cmd, a, r, dst, v))) return r;
    }
    if (!model) return usage_error(cmd, "--model DIR is required");
    if (!ids_arg) return usage_error(cmd, "--ids LIST is required");
    char err[1024];
    if (tp_tokenizer_truncate_check(patterns, n_patterns, err, sizeof err))
        return usage_error(cmd, "--truncate-before: %s", err);
    int32_t *ids;
    size_t n;
    if (parse_ids(ids_arg, &ids, &n)) {
        free(ids);
        return usage_error(cmd, "--ids '%.60s' is not a list of integers such as 1,2,3", ids_arg);
    }
    int32_t model_vocab;
    tp_tokenizer *t = load(cmd, model, &model_vocab);
    if (!t) {
        free(ids);
        return 1;
    }
    char *text;
    size_t len;
    int rc = tp_tokenizer_decode_model(t, model_vocab, ids, n, skip, &text, &len, err, sizeof err);
    tp_tokenizer_free(t);
    free(ids);
    if (rc)
        return fail(cmd, "--ids: %s (%s)", err, model_vocab ? "the vocab_size of the model's config.json"
                                                            : "the tokenizer's size: the directory has no config.json");
    len = tp_tokenizer_truncate(text, len, patterns, n_patterns);
    if (json) {
        size_t el;
        char *esc = json_escape(text, len, &el);
        rc = write_all(cmd, "{\"text\": ", 9) || write_all(cmd, esc, el) || write_all(cmd, "}\n", 2);
        free(esc);
    } else rc = write_all(cmd, text, len);
    free(text);
    return rc ? 1 : 0;
}
