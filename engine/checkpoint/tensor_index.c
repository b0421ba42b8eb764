/* Tensor table and sharded-index reader shared by safetensors.c and torch_bin.c: see tensor_index.h. */
#include "tensor_index.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_path.h"
#include "util/json.h"
#include "util/log.h"

/* ---- tensor table ---- */

static uint64_t hash_name(const char *s) { /* FNV-1a */
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static size_t *slot_of(const tp_tensor_table *t, const char *name) {
    size_t mask = t->n_slots - 1;
    for (size_t i = hash_name(name) & mask;; i = (i + 1) & mask) {
        size_t s = t->slots[i];
        if (!s || strcmp(t->tensors[s - 1].name, name) == 0) return &t->slots[i];
    }
}

/* Grows the hash to hold need names, re-adding tensors [0, n_indexed) (names unique). */
static void rehash(tp_tensor_table *t, size_t need, size_t n_indexed) {
    size_t n = 16;
    while (n < 2 * need) n *= 2;
    if (n <= t->n_slots) return;
    free(t->slots);
    t->slots = tp_calloc(n, sizeof *t->slots);
    t->n_slots = n;
    for (size_t i = 0; i < n_indexed; i++) *slot_of(t, t->tensors[i].name) = i + 1;
}

void tp_tensor_table_init(tp_tensor_table *t) {
    memset(t, 0, sizeof *t);
    rehash(t, 0, 0);
}

tp_st_tensor *tp_tensor_table_reserve(tp_tensor_table *t) {
    if (t->n == t->cap) t->tensors = tp_realloc(t->tensors, (t->cap = t->cap ? 2 * t->cap : 256) * sizeof *t->tensors);
    memset(&t->tensors[t->n], 0, sizeof *t->tensors);
    return &t->tensors[t->n];
}

void tp_tensor_table_push(tp_tensor_table *t) { t->total_bytes += t->tensors[t->n++].nbytes; }

int tp_tensor_table_index(tp_tensor_table *t, size_t first, char *err, size_t err_size) {
    rehash(t, t->n, first);
    for (size_t i = first; i < t->n; i++) {
        const tp_st_tensor *x = &t->tensors[i];
        size_t *s = slot_of(t, x->name);
        if (*s) {
            const tp_st_tensor *o = &t->tensors[*s - 1];
            if (o->file == x->file) snprintf(err, err_size, "%s: tensor %s appears twice", x->file, x->name);
            else snprintf(err, err_size, "tensor %s is in two files: %s and %s", x->name, o->file, x->file);
            return -1;
        }
        *s = i + 1;
    }
    return 0;
}

const tp_st_tensor *tp_tensor_table_find(const tp_tensor_table *t, const char *name) {
    size_t s = *slot_of(t, name);
    return s ? &t->tensors[s - 1] : NULL;
}

void tp_tensor_table_free(tp_tensor_table *t) {
    for (size_t i = 0; i < t->n; i++) free((char *)t->tensors[i].name);
    free(t->tensors);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

/* ---- index + shards ---- */

static const char *a_type(json_type t) {
    static const char *names[] = {"null", "a boolean", "a number", "a string", "an array", "an object"};
    return names[t];
}

static int by_string(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

int tp_tensor_index_load_text(const char *text, size_t len, const char *index, const char *dir, void *reader,
                              tp_shard_load_fn load, tp_shard_skipped_fn skipped, const tp_tensor_table *table,
                              char *err, size_t err_size) {
    char jerr[160];
    json_value *root = json_parse(text, len, jerr, sizeof jerr);
    if (!root) {
        snprintf(err, err_size, "%s: not valid JSON: %s", index, jerr);
        return -1;
    }
    int rc = -1;
    const char **names = NULL; /* [wm->n] shard names, then sorted and deduplicated */
    char *path = NULL;
    const json_value *wm = json_get(root, "weight_map");
    if (root->type != JSON_OBJECT) {
        snprintf(err, err_size, "%s: holds %s, not a JSON object", index, a_type(root->type));
        goto done;
    }
    if (!wm) {
        snprintf(err, err_size, "%s: no \"weight_map\"", index);
        goto done;
    }
    if (wm->type != JSON_OBJECT || wm->n == 0) {
        snprintf(err, err_size, "%s: \"weight_map\" must be a non-empty object (tensor name -> shard file)", index);
        goto done;
    }
    names = tp_malloc(wm->n * sizeof *names);
    for (size_t i = 0; i < wm->n; i++) {
        const json_value *v = &wm->items[i];
        if (v->type != JSON_STRING || v->str_len == 0 || v->str_len != strlen(v->str)) {
            snprintf(err, err_size, "%s: weight_map[\"%s\"] is not a file name", index, wm->keys[i]);
            goto done;
        }
        char why[320];
        if (tp_ckpt_path_check(v->str, why, sizeof why)) {
            snprintf(err, err_size, "%s: weight_map[\"%s\"]: %s", index, wm->keys[i], why);
            goto done;
        }
        names[i] = v->str;
    }
    qsort(names, wm->n, sizeof *names, by_string);
    size_t n_shards = 0;
    for (size_t i = 0; i < wm->n; i++)
        if (!n_shards || strcmp(names[n_shards - 1], names[i]) != 0) names[n_shards++] = names[i];
    char why[64 + 4096];
    snprintf(why, sizeof why, "(a shard named by the weight_map of %s)", index);
    for (size_t i = 0; i < n_shards; i++) {
        path = tp_ckpt_join(dir, names[i]);
        if (load(reader, path, why, err, err_size)) goto done;
        free(path);
        path = NULL;
    }
    for (size_t i = 0; i < wm->n; i++) {
        const char *tname = wm->keys[i];
        path = tp_ckpt_join(dir, wm->items[i].str);
        const tp_st_tensor *t = tp_tensor_table_find(table, tname);
        if (!(skipped && skipped(reader, tname)) && (!t || strcmp(t->file, path) != 0)) {
            snprintf(err, err_size, "%s: weight_map maps tensor %s to %s, but that file lacks it%s%s%s", index, tname,
                     path, t ? " (it is in " : "", t ? t->file : "", t ? ")" : "");
            goto done;
        }
        free(path);
        path = NULL;
    }
    rc = 0;
done:
    free(path);
    free(names);
    json_free(root);
    return rc;
}

int tp_tensor_index_load(const char *index, const char *dir, void *reader, tp_shard_load_fn load,
                         tp_shard_skipped_fn skipped, const tp_tensor_table *table, char *err, size_t err_size) {
    size_t len;
    char *text = tp_read_file(index, &len);
    if (!text) {
        snprintf(err, err_size, "%s: cannot read: %s", index, strerror(errno));
        return -1;
    }
    int rc = tp_tensor_index_load_text(text, len, index, dir, reader, load, skipped, table, err, err_size);
    free(text);
    return rc;
}
