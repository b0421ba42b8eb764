#include "prompts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/json.h"
#include "engine/log.h"

static int is_id_list(const char *s, size_t n) {
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || s[i] == ',' || s[i] == ' ')) return 0;
    return s[0] >= '0' && s[0] <= '9';
}

static int has_text_lines(const char *path) {
    size_t len;
    char *text = tp_read_file(path, &len);
    if (!text) return 0; /* reported by tp_prompts_read */
    int any = 0;
    for (char *line = text, *end; line < text + len && !any; line = end + 1) {
        end = memchr(line, '\n', text + len - line);
        if (!end) end = text + len;
        size_t n = end - line;
        if (n && line[n - 1] == '\r') n--;
        if (n == 0 || line[0] == '[' || is_id_list(line, n)) continue;
        any = 1;
    }
    free(text);
    return any;
}

int tp_prompts_need_tokenizer(const tp_args *a) {
    if (a->prompt) return 1;
    if (a->prompts_file) return has_text_lines(a->prompts_file);
    return 0;
}

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
    return 0;
}

static int parse_ids(const char *s, size_t len, tp_prompt *p, const char *where) {
    p->ids = tp_malloc((len / 2 + 1) * sizeof(int32_t));
    p->n = 0;
    const char *e = s + len;
    while (s < e) {
        while (s < e && (*s == ' ' || *s == ',' || *s == '[' || *s == ']')) s++;
        if (s >= e) break;
        if (*s < '0' || *s > '9') {
            fprintf(stderr, "tpgen: error: %s: expected a token id at \"%.20s\"\n", where, s);
            return -1;
        }
        long x = 0;
        while (s < e && *s >= '0' && *s <= '9' && x < 1000000000) x = x * 10 + (*s++ - '0');
        if (s < e && *s >= '0' && *s <= '9') {
            fprintf(stderr, "tpgen: error: %s: token id too large\n", where);
            return -1;
        }
        p->ids[p->n++] = (int32_t)x;
    }
    return 0;
}

int tp_prompts_read(const tp_args *a, tp_tokenizer *tok, tp_prompt **out) {
    tp_prompt *ps = NULL;
    int n = 0, cap = 0;
    if (a->prompt || a->prompt_ids) {
        ps = tp_calloc(1, sizeof *ps);
        int rc = a->prompt ? encode(tok, a->prompt, strlen(a->prompt), ps, "--prompt")
                           : parse_ids(a->prompt_ids, strlen(a->prompt_ids), ps, "--prompt-ids");
        *out = ps;
        return rc ? -1 : 1;
    }
    size_t len;
    char *text = tp_read_file(a->prompts_file, &len);
    if (!text) {
        fprintf(stderr, "tpgen: error: cannot read --prompts-file %s: %s\n", a->prompts_file, strerror(errno));
        return -1;
    }
    int line_no = 0, rc = 0;
    for (char *line = text, *end; line < text + len && !rc; line = end + 1) {
        end = memchr(line, '\n', text + len - line);
        if (!end) end = text + len;
        line_no++;
        size_t ln = end - line;
        if (ln && line[ln - 1] == '\r') ln--;
        if (ln == 0) continue;
        if (n == cap) ps = tp_realloc(ps, (cap = cap ? 2 * cap : 16) * sizeof *ps);
        tp_prompt *p = &ps[n++];
        memset(p, 0, sizeof *p);
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
        } else if (line[0] == '[' || is_id_list(line, ln)) rc = parse_ids(line, ln, p, where);
        else rc = encode(tok, line, ln, p, where);
    }
    free(text);
    if (!rc && n == 0) {
        fprintf(stderr, "tpgen: error: --prompts-file %s holds no prompt\n", a->prompts_file);
        rc = -1;
    }
    *out = ps;
    return rc ? -1 : n;
}
