#include "prompts.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/ids.h"
#include "util/json.h"
#include "util/log.h"

static int is_id_list(const char *s, size_t n) {
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || s[i] == ',' || s[i] == ' ')) return 0;
    return s[0] >= '0' && s[0] <= '9';
}

/* Steps *at through text[0..len) a line at a time: the line's start and length (without its
 * "\n" or "\r\n"); 0 past the last line. */
static int next_line(char *text, size_t len, size_t *at, char **line, size_t *n) {
    if (*at >= len) return 0;
    char *start = text + *at, *end = memchr(start, '\n', len - *at);
    if (!end) end = text + len;
    *line = start;
    *n = end - start;
    if (*n && start[*n - 1] == '\r') (*n)--;
    *at = end - text + 1;
    return 1;
}

/* --prompts-file is read once (it may be a pipe, /dev/stdin): the first reader keeps the text
 * until tp_prompts_read has parsed it. */
static struct {
    char *text;
    size_t len;
    int tried, err; /* read attempted; its errno when it failed */
} g_file;

static char *prompts_text(const char *path, size_t *len) {
    if (!g_file.tried) {
        g_file.tried = 1;
        g_file.text = tp_read_file(path, &g_file.len);
        g_file.err = g_file.text ? 0 : errno;
    }
    errno = g_file.err;
    *len = g_file.len;
    return g_file.text;
}

/* Number of the first line that is text (not ids, not empty), or 0. */
static int first_text_line(const char *path) {
    size_t len, at = 0, n;
    char *text = prompts_text(path, &len), *line;
    if (!text) return 0; /* reported by tp_prompts_read */
    int line_no = 0, found = 0;
    while (!found && next_line(text, len, &at, &line, &n)) {
        line_no++;
        if (n == 0 || line[0] == '[' || is_id_list(line, n)) continue;
        found = line_no;
    }
    return found;
}

int tp_prompts_need_tokenizer(const tp_args *a) {
    if (a->prompt) return 1;
    if (a->prompts_file) return first_text_line(a->prompts_file);
    return 0;
}

const char *tp_prompt_where(const tp_args *a, const tp_prompt *p, char *buf, size_t size) {
    if (p->line > 0) snprintf(buf, size, "%s line %d", a->prompts_file, p->line);
    else snprintf(buf, size, "%s", a->prompt ? "--prompt" : "--prompt-ids");
    return buf;
}

static int no_ids(const char *where);

static int encode(tp_tokenizer *tok, const char *text, size_t len, tp_prompt *p, const char *where) {
    if (!tok) {
        fprintf(stderr, "tpgen: error: %s is text, but the model directory has no tokenizer (vocab.json + "
                        "merges.txt, or tokenizer.json); give token ids instead\n", where);
        return -1;
    }
    char err[256];
    size_t n;
    if (tp_tokenizer_encode(tok, text, len, &p->ids, &n, err, sizeof err)) {
        fprintf(stderr, "tpgen: error: %s: %s\n", where, err);
        return -1;
    }
    p->n = (int)n;
    return n ? 0 : no_ids(where); /* "" or a JSON "" line: nothing to generate from */
}

static int no_ids(const char *where) {
    fprintf(stderr, "tpgen: error: %s holds no token ids (an empty prompt; tpgen adds no BOS token)\n", where);
    return -1;
}

/* "1,2,3", spaces around the commas allowed; an empty item ("1,,2", "1,2,") is an error. */
static int parse_id_list(const char *s, size_t len, int64_t vocab, tp_prompt *p, const char *where) {
    char err[512];
    if (tp_ids_parse_list(s, len, vocab, where, &p->ids, &p->n, err, sizeof err) == 0) return 0;
    fprintf(stderr, "tpgen: error: %s\n", err);
    return -1;
}

/* "[1, 2, 3]": a JSON array of token ids. */
static int parse_id_array(const char *s, size_t len, int64_t vocab, tp_prompt *p, const char *where) {
    char jerr[128];
    json_value *v = json_parse(s, len, jerr, sizeof jerr);
    if (!v || v->type != JSON_ARRAY) {
        fprintf(stderr, "tpgen: error: %s starts with '[' but is not a JSON array of token ids: %s\n", where,
                v ? "not an array" : jerr);
        json_free(v);
        return -1;
    }
    p->ids = tp_malloc((v->n ? v->n : 1) * sizeof(int32_t));
    p->n = 0;
    for (size_t i = 0; i < v->n; i++) {
        const json_value *x = &v->items[i];
        char err[512];
        if (x->type != JSON_NUMBER || !x->is_integer) {
            fprintf(stderr, "tpgen: error: %s: item %zu of the array is not a token id (an integer below vocab_size "
                            "%lld)\n", where, i + 1, (long long)vocab);
            json_free(v);
            return -1;
        }
        if (tp_ids_check(x->integer, vocab, (int)i, where, err, sizeof err)) {
            fprintf(stderr, "tpgen: error: %s\n", err);
            json_free(v);
            return -1;
        }
        p->ids[p->n++] = (int32_t)x->integer;
    }
    json_free(v);
    return p->n ? 0 : no_ids(where);
}

int tp_prompts_read(const tp_args *a, tp_tokenizer *tok, int64_t vocab, tp_prompt **out) {
    tp_prompt *ps = NULL;
    int n = 0, cap = 0;
    if (a->prompt || a->prompt_ids) {
        ps = tp_calloc(1, sizeof *ps);
        int rc = a->prompt ? encode(tok, a->prompt, strlen(a->prompt), ps, "--prompt")
             : a->prompt_ids[0] == '[' ? parse_id_array(a->prompt_ids, strlen(a->prompt_ids), vocab, ps, "--prompt-ids")
                                       : parse_id_list(a->prompt_ids, strlen(a->prompt_ids), vocab, ps, "--prompt-ids");
        if (rc) { free(ps->ids); free(ps); ps = NULL; }
        *out = ps;
        return rc ? -1 : 1;
    }
    size_t len;
    char *text = prompts_text(a->prompts_file, &len);
    if (!text) {
        fprintf(stderr, "tpgen: error: cannot read --prompts-file %s: %s\n", a->prompts_file, strerror(errno));
        return -1;
    }
    int line_no = 0, rc = 0;
    size_t at = 0, ln;
    char *line;
    while (!rc && next_line(text, len, &at, &line, &ln)) {
        line_no++;
        if (ln == 0) continue;
        if (n == cap) ps = tp_realloc(ps, (cap = cap ? 2 * cap : 16) * sizeof *ps);
        tp_prompt *p = &ps[n++];
        memset(p, 0, sizeof *p);
        p->line = line_no;
        char where[4200];
        snprintf(where, sizeof where, "%s line %d", a->prompts_file, line_no);
        if (line[0] == '"') {
            char jerr[128];
            json_value *v = json_parse(line, ln, jerr, sizeof jerr);
            if (!v || v->type != JSON_STRING) {
                fprintf(stderr, "tpgen: error: %s starts with '\"' but is not one JSON string: %s\n", where,
                        v ? "not a string" : jerr);
                rc = -1;
            } else rc = encode(tok, v->str, v->str_len, p, where);
            json_free(v);
        } else if (line[0] == '[') rc = parse_id_array(line, ln, vocab, p, where);
        else if (is_id_list(line, ln)) rc = parse_id_list(line, ln, vocab, p, where);
        else rc = encode(tok, line, ln, p, where);
    }
    free(text);
    g_file.text = NULL;
    if (!rc && n == 0) {
        fprintf(stderr, "tpgen: error: --prompts-file %s holds no prompt\n", a->prompts_file);
        rc = -1;
    }
    if (rc) { /* nothing half-made goes back */
        for (int i = 0; i < n; i++) free(ps[i].ids);
        free(ps);
        ps = NULL;
    }
    *out = ps;
    return rc ? -1 : n;
}
