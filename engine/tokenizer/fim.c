#include "fim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/json.h"
#include "util/log.h"

/* The id of the one added token whose text is name, or -1. */
static int32_t token_id(tp_tokenizer *t, const char *name) {
    int32_t *ids = NULL;
    size_t n = 0, len = 0;
    char err[256];
    if (tp_tokenizer_encode(t, name, strlen(name), &ids, &n, err, sizeof err)) return -1;
    int32_t id = n == 1 ? ids[0] : -1;
    free(ids);
    const char *bytes = id >= 0 ? tp_tokenizer_token_bytes(t, id, &len) : NULL;
    return bytes && len == strlen(name) && !memcmp(bytes, name, len) ? id : -1;
}

static int resolve(tp_tokenizer *t, const char *name, const char *what, tp_fim *f, int32_t *id, char *err,
                   size_t err_size) {
    if (!t) {
        snprintf(err, err_size, "%s: %s \"%s\" needs a tokenizer in the model directory", f->path, what, name);
        return -1;
    }
    *id = token_id(t, name);
    if (*id < 0) {
        snprintf(err, err_size, "%s: the tokenizer has no token \"%s\" (%s); the model cannot do fill-in-the-middle "
                 "in this format", f->path, name, what);
        return -1;
    }
    return 0;
}

/* CodeGen2's infill format (its model card; CodeGen2.5's card gives the same), as
 * configs/fim-codegen2.json writes it */
static const char *const g_cg2_prompt[] = {"{prefix}", "<mask_1>", "{suffix}", "<|endoftext|>", "<sep>", "<mask_1>"};
static const char g_cg2_stop[] = "<eom>";

/* The CodeGen2 format when t has every token it names: 1, else 0. */
static int builtin(tp_tokenizer *t, tp_fim *f) {
    if (!t) return 0;
    snprintf(f->path, sizeof f->path, "(built in: CodeGen2's infill format, recognized from the tokenizer's <mask_1>, "
             "<sep>, <eom> and <|endoftext|>)");
    f->n_parts = (int)(sizeof g_cg2_prompt / sizeof *g_cg2_prompt);
    for (int i = 0; i < f->n_parts; i++) {
        const char *name = g_cg2_prompt[i];
        if (!strcmp(name, "{prefix}")) f->part_id[i] = -1;
        else if (!strcmp(name, "{suffix}")) f->part_id[i] = -2;
        else if ((f->part_id[i] = token_id(t, name)) < 0) return 0; /* the tokenizer lacks it: not this format */
    }
    f->stop_id = token_id(t, g_cg2_stop);
    return f->stop_id >= 0;
}

int tp_fim_load(const char *path, const char *model_dir, tp_tokenizer *t, tp_fim *f, char *err, size_t err_size) {
    memset(f, 0, sizeof *f);
    struct stat st;
    if (path) snprintf(f->path, sizeof f->path, "%s", path);
    else if (model_dir) {
        snprintf(f->path, sizeof f->path, "%s/fim.json", model_dir);
        if (stat(f->path, &st) != 0) {
            if (builtin(t, f)) return 1;
            memset(f, 0, sizeof *f);
            return 0;
        }
    } else return 0;
    size_t len;
    char *text = tp_read_file(f->path, &len);
    if (!text) {
        snprintf(err, err_size, "cannot read the FIM format %s: %s", f->path, strerror(errno));
        return -1;
    }
    char jerr[256];
    json_value *root = json_parse(text, len, jerr, sizeof jerr);
    free(text);
    int rc = -1, have_prefix = 0, have_suffix = 0;
    const json_value *p = root ? json_get(root, "prompt") : NULL, *stop = root ? json_get(root, "stop_token") : NULL;
    if (!root || root->type != JSON_OBJECT) snprintf(err, err_size, "%s is not a JSON object%s%s", f->path,
                                                     root ? "" : ": ", root ? "" : jerr);
    else if (!p || p->type != JSON_ARRAY || p->n == 0 || p->n > TP_FIM_MAX_PARTS)
        snprintf(err, err_size, "%s: \"prompt\" must be an array of 1 to %d strings", f->path, TP_FIM_MAX_PARTS);
    else if (!stop || stop->type != JSON_STRING || !stop->str_len)
        snprintf(err, err_size, "%s: \"stop_token\" must be a token's text (the token ending the infill)", f->path);
    else {
        rc = 0;
        for (size_t i = 0; rc == 0 && i < p->n; i++) {
            const json_value *x = &p->items[i];
            if (x->type != JSON_STRING || !x->str_len) {
                snprintf(err, err_size, "%s: \"prompt\" item %zu must be a non-empty string", f->path, i);
                rc = -1;
            } else if (!strcmp(x->str, "{prefix}")) f->part_id[i] = -1, have_prefix++;
            else if (!strcmp(x->str, "{suffix}")) f->part_id[i] = -2, have_suffix++;
            else rc = resolve(t, x->str, "a \"prompt\" item", f, &f->part_id[i], err, err_size);
        }
        f->n_parts = (int)p->n;
        if (rc == 0 && (have_prefix != 1 || have_suffix != 1)) {
            snprintf(err, err_size, "%s: \"prompt\" must hold \"{prefix}\" and \"{suffix}\" once each", f->path);
            rc = -1;
        }
        if (rc == 0) rc = resolve(t, stop->str, "\"stop_token\"", f, &f->stop_id, err, err_size);
    }
    json_free(root);
    return rc < 0 ? -1 : 1;
}

int tp_fim_tokens(const tp_fim *f) { return f->n_parts - 2; }

int tp_fim_assemble(const tp_fim *f, tp_tokenizer *t, const char *prefix, size_t prefix_len, const int32_t *suffix,
                    size_t n_suffix, int32_t **ids, size_t *n, char *err, size_t err_size) {
    int32_t *pre = NULL;
    size_t n_pre = 0;
    if (tp_tokenizer_encode_text(t, prefix, prefix_len, &pre, &n_pre, err, err_size)) return -1;
    size_t used = 0;
    int32_t *out = tp_malloc((n_pre + n_suffix + (size_t)f->n_parts) * sizeof *out);
    for (int i = 0; i < f->n_parts; i++) {
        const int32_t *part = f->part_id[i] == -1 ? pre : f->part_id[i] == -2 ? suffix : &f->part_id[i];
        size_t np = f->part_id[i] == -1 ? n_pre : f->part_id[i] == -2 ? n_suffix : 1;
        if (np) memcpy(out + used, part, np * sizeof *out);
        used += np;
    }
    free(pre);
    *ids = out;
    *n = used;
    return 0;
}

int tp_fim_encode(const tp_fim *f, tp_tokenizer *t, const char *prefix, size_t prefix_len, const char *suffix,
                  size_t suffix_len, int32_t **ids, size_t *n, char *err, size_t err_size) {
    int32_t *suf = NULL;
    size_t n_suf = 0;
    if (tp_tokenizer_encode_text(t, suffix, suffix_len, &suf, &n_suf, err, err_size)) return -1;
    int rc = tp_fim_assemble(f, t, prefix, prefix_len, suf, n_suf, ids, n, err, err_size);
    free(suf);
    return rc;
}
