/* Weight loading: this rank's shard of every tensor, from the mmapped checkpoint (safetensors
 * or torch.save .bin: checkpoint.h) into one device arena carved by a size table.
 *
 * Every rank validates every tensor it needs (presence, dtype, shape) from the headers before
 * reading any data; the checks see the same files on every rank, so a problem is reported once
 * (tp_die_all) and every rank exits. Then each rank copies only its own rows / columns into a
 * host staging buffer (in the file's dtype) and hands it to the backend, which converts it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "model.h"
#include "checkpoint/checkpoint.h"
#include "kernels/common/tp_quant.h" /* tp_q8_absmax: row scales of column slices (--weights int8) */

#define ARENA_ALIGN 256

typedef enum { SLICE_ALL, SLICE_ROWS, SLICE_COLS, SLICE_QKV } slice_kind;

/* One tensor to load: where it goes, which part of the file tensor this rank takes. */
typedef struct {
    char name[96];
    void **dst;        /* where the device pointer is stored */
    int is_matrix;
    int64_t rows, cols; /* full shape in the file (cols = 1 for vectors) */
    slice_kind slice;
    int64_t first, count; /* rows or columns taken; SLICE_QKV: heads */
    int64_t out_rows;   /* rows of the device tensor (>= count for padded lm_head) */
    float rand_mean;
    size_t offset;      /* in the arena */
} load_item;

typedef struct {
    load_item *items;
    int n, cap;
} load_list;

static load_item *add_item(load_list *l, const char *name, void **dst, int is_matrix, int64_t rows, int64_t cols,
                           slice_kind slice, int64_t first, int64_t count, int64_t out_rows, float mean) {
    if (l->n == l->cap) l->items = tp_realloc(l->items, (l->cap = l->cap ? l->cap * 2 : 64) * sizeof *l->items);
    load_item *it = &l->items[l->n++];
    memset(it, 0, sizeof *it);
    snprintf(it->name, sizeof it->name, "%s", name);
    it->dst = dst;
    it->is_matrix = is_matrix;
    it->rows = rows;
    it->cols = cols;
    it->slice = slice;
    it->first = first;
    it->count = count;
    it->out_rows = out_rows;
    it->rand_mean = mean;
    return it;
}

/* Device shape of an item: [out_rows, out_cols]. */
static int64_t item_out_cols(const load_item *it) { return it->slice == SLICE_COLS ? it->count : it->cols; }

static size_t item_bytes(tp_backend *b, const load_item *it) {
    int64_t r = it->out_rows, c = item_out_cols(it);
    if (it->is_matrix) return b->matrix_bytes(b, (int)r, (int)c);
    return (size_t)(r * c) * tp_dtype_size(b->act);
}

static void build_list(tp_model *m, load_list *l) {
    const tp_config *c = &m->cfg;
    const tp_shard *s = &m->sh;
    int64_t E = c->n_embd, I = c->n_inner, D = c->head_dim, V = c->vocab_size;
    char name[96];
    m->w.layers = tp_calloc(c->n_layer, sizeof *m->w.layers);
    add_item(l, "transformer.wte.weight", &m->w.wte, 0, V, E, SLICE_ALL, 0, V, V, 0);
    for (int i = 0; i < c->n_layer; i++) {
        tp_layer *L = &m->w.layers[i];
#define NAME(suffix) (snprintf(name, sizeof name, "transformer.h.%d.%s", i, suffix), name)
        add_item(l, NAME("ln_1.weight"), &L->ln1_g, 0, E, 1, SLICE_ALL, 0, E, E, 1);
        add_item(l, NAME("ln_1.bias"), &L->ln1_b, 0, E, 1, SLICE_ALL, 0, E, E, 0);
        add_item(l, NAME("attn.qkv_proj.weight"), &L->qkv, 1, 3 * E, E, SLICE_QKV, s->head0, s->n_heads,
                 3 * s->n_heads * D, 0);
        add_item(l, NAME("attn.out_proj.weight"), &L->out, 1, E, E, SLICE_COLS, s->head0 * D, s->n_heads * D, E, 0);
        add_item(l, NAME("mlp.fc_in.weight"), &L->fc_in, 1, I, E, SLICE_ROWS, s->inner0, s->n_inner, s->n_inner, 0);
        add_item(l, NAME("mlp.fc_in.bias"), &L->fc_in_b, 0, I, 1, SLICE_ROWS, s->inner0, s->n_inner, s->n_inner, 0);
        add_item(l, NAME("mlp.fc_out.weight"), &L->fc_out, 1, E, I, SLICE_COLS, s->inner0, s->n_inner, E, 0);
        add_item(l, NAME("mlp.fc_out.bias"), &L->fc_out_b, 0, E, 1, SLICE_ALL, 0, E, E, 0);
#undef NAME
    }
    add_item(l, "transformer.ln_f.weight", &m->w.lnf_g, 0, E, 1, SLICE_ALL, 0, E, E, 1);
    add_item(l, "transformer.ln_f.bias", &m->w.lnf_b, 0, E, 1, SLICE_ALL, 0, E, E, 0);
    add_item(l, "lm_head.weight", &m->w.lm_head, 1, V, E, SLICE_ROWS, s->vocab0, s->n_vocab_valid, s->n_vocab, 0);
    add_item(l, "lm_head.bias", &m->w.lm_head_b, 0, V, 1, SLICE_ROWS, s->vocab0, s->n_vocab_valid, s->n_vocab, 0);
}

static void shape_str(char *buf, size_t size, const int64_t *shape, int ndim) {
    size_t u = snprintf(buf, size, "[");
    for (int i = 0; i < ndim && u < size; i++) u += snprintf(buf + u, size - u, i ? ", %" PRId64 : "%" PRId64, shape[i]);
    if (u < size) snprintf(buf + u, size - u, "]");
}

/* Source tensor of an item; the checks every rank makes identically. */
static const tp_st_tensor *check_tensor(const tp_ckpt *st, const char *dir, const tp_config *c,
                                        const load_item *it) {
    const tp_st_tensor *t = tp_ckpt_find(st, it->name);
    if (!t && c->tie_word_embeddings && strcmp(it->name, "lm_head.weight") == 0)
        t = tp_ckpt_find(st, "transformer.wte.weight");
    if (!t && tp_ckpt_unsupported(st, it->name))
        tp_die_all("tensor %s in the checkpoint %s: %s", it->name, dir, tp_ckpt_unsupported(st, it->name));
    if (!t) tp_die_all("missing tensor %s in the checkpoint %s", it->name, dir);
    int64_t want[2] = {it->rows, it->cols};
    int want_nd = it->cols == 1 && !it->is_matrix ? 1 : 2;
    int ok = t->ndim == want_nd;
    for (int i = 0; ok && i < want_nd; i++) ok = t->shape[i] == want[i];
    if (!ok) {
        char found[128], expect[128];
        shape_str(found, sizeof found, t->shape, t->ndim);
        shape_str(expect, sizeof expect, want, want_nd);
        tp_die_all("tensor %s in %s has shape %s, expected %s (from config.json)", it->name, t->file, found, expect);
    }
    return t;
}

/* Copies this rank's part of t into staging (file dtype), laid out [out_rows, out_cols]. */
static void stage_slice(const load_item *it, const tp_st_tensor *t, const tp_config *c, uint8_t *staging) {
    size_t es = tp_dtype_size(t->dtype);
    int64_t cols = it->cols, oc = item_out_cols(it);
    const uint8_t *src = t->data;
    memset(staging, 0, (size_t)(it->out_rows * oc) * es); /* padding rows stay zero */
    switch (it->slice) {
    case SLICE_ALL:
        memcpy(staging, src, (size_t)(it->rows * cols) * es);
        break;
    case SLICE_ROWS:
        memcpy(staging, src + (size_t)(it->first * cols) * es, (size_t)(it->count * cols) * es);
        break;
    case SLICE_COLS:
        for (int64_t r = 0; r < it->rows; r++)
            memcpy(staging + (size_t)(r * oc) * es, src + (size_t)(r * cols + it->first) * es, (size_t)oc * es);
        break;
    case SLICE_QKV: {
        /* qkv_proj rows come in G groups (mp_num: 4 for CodeGen, 8 for CodeGen2; remote_code.h),
         * group g = [Q_g; V_g; K_g], each E/G rows = H/G whole heads. Head h is in group h / (H/G)
         * at index h % (H/G). Gather this rank's heads into [q heads; k heads; v heads]. */
        const int64_t G = c->qkv_groups;
        if (G < 1 || c->n_head % G) tp_die("qkv_proj: %d groups for %d heads (tp_checkpoint_qkv_groups not applied)",
                                           (int)G, c->n_head);
        int64_t E = c->n_embd, D = c->head_dim, per_group = c->n_head / G, Hl = it->count;
        static const int part_of[3] = {0, 2, 1}; /* q, k, v -> offset in group: Q=0, V=1, K=2 */
        for (int which = 0; which < 3; which++)
            for (int64_t hl = 0; hl < Hl; hl++) {
                int64_t h = it->first + hl, grp = h / per_group, j = h % per_group;
                int64_t src_row = grp * (3 * E / G) + part_of[which] * (E / G) + j * D;
                int64_t dst_row = (which * Hl + hl) * D;
                memcpy(staging + (size_t)(dst_row * cols) * es, src + (size_t)(src_row * cols) * es,
                       (size_t)(D * cols) * es);
            }
        break;
    }
    }
}

/* max |w| of each of the file tensor's rows over its full width (--weights int8 with a column
 * slice: the scales every TP size agrees on; kernels/common/tp_quant.h). */
static float *full_row_absmax(const load_item *it, const tp_st_tensor *t) {
    const size_t es = tp_dtype_size(t->dtype);
    float *mx = tp_malloc((size_t)it->rows * sizeof(float)), *row = tp_malloc((size_t)it->cols * sizeof(float));
    for (int64_t r = 0; r < it->rows; r++) {
        tp_convert_to_f32(row, (const uint8_t *)t->data + (size_t)(r * it->cols) * es, t->dtype, (size_t)it->cols);
        mx[r] = tp_q8_absmax(row, it->cols);
    }
    free(row);
    return mx;
}

static void upload_item(tp_backend *b, const load_item *it, const void *host, tp_dtype dt, const tp_st_tensor *t) {
    int64_t r = it->out_rows, c = item_out_cols(it);
    if (it->is_matrix && it->slice == SLICE_COLS && b->matrix_upload_rowmax) {
        float *mx = full_row_absmax(it, t);
        b->matrix_upload_rowmax(b, *it->dst, host, dt, (int)r, (int)c, mx);
        free(mx);
    } else if (it->is_matrix) b->matrix_upload(b, *it->dst, host, dt, (int)r, (int)c);
    else b->upload(b, *it->dst, host, dt, (size_t)(r * c));
}

/* Random weights for benchmarks, drawn on the device (the whole buffer, whatever its layout;
 * a matrix through the backend's own fill where it has one: int8, which draws f32 values and
 * quantizes them, and the bf16 CPU backend's panels). */
static void random_item(tp_backend *b, const load_item *it, uint64_t seed) {
    float stdv = it->rand_mean != 0 ? 0.01f : 0.02f;
    if (it->is_matrix && b->matrix_fill_random)
        b->matrix_fill_random(b, *it->dst, (int)it->out_rows, (int)item_out_cols(it), seed, it->rand_mean, stdv);
    else b->fill_random(b, *it->dst, item_bytes(b, it) / tp_dtype_size(b->act), seed, it->rand_mean, stdv);
}

/* The weight arena's size, as tp_model_load_weights will ask for it (for the memory plan). */
size_t tp_model_weights_bytes(const tp_model *m) {
    tp_model tmp = *m; /* build_list fills tmp.w.layers */
    load_list l = {0};
    build_list(&tmp, &l);
    size_t total = 0;
    for (int i = 0; i < l.n; i++) total += (item_bytes(m->b, &l.items[i]) + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    free(tmp.w.layers);
    free(l.items);
    return total;
}

void tp_model_load_weights(tp_model *m, const char *dir, int random, uint64_t seed) {
    tp_backend *b = m->b;
    load_list l = {0};
    build_list(m, &l);

    tp_ckpt *st = NULL;
    const tp_st_tensor **src = tp_calloc(l.n, sizeof *src);
    if (!random) {
        char err[1024];
        double t_open = tp_now_seconds();
        st = tp_ckpt_open(dir, err, sizeof err);
        if (!st) tp_die_all("%s", err);
        tp_log0("checkpoint: %s, opened in %.1f ms\n", tp_ckpt_describe(st), 1e3 * (tp_now_seconds() - t_open));
        for (int i = 0; i < l.n; i++) src[i] = check_tensor(st, dir, &m->cfg, &l.items[i]);
    }

    /* Size table, then one arena. */
    size_t total = 0, staging_max = 0, matrices = 0, matrices_read = 0;
    for (int i = 0; i < l.n; i++) {
        load_item *it = &l.items[i];
        it->offset = total;
        size_t bytes = item_bytes(b, it);
        total += (bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
        if (it->is_matrix) {
            matrices += bytes;
            matrices_read += tp_matrix_read_bytes(b, (int)it->out_rows, (int)item_out_cols(it));
        }
        if (src[i]) {
            size_t sb = (size_t)(it->out_rows * item_out_cols(it)) * tp_dtype_size(src[i]->dtype);
            if (sb > staging_max) staging_max = sb;
        }
    }
    m->w.arena = b->alloc(b, total, "weights");
    m->w.arena_bytes = total;
    m->w.matrix_bytes = matrices;
    m->w.matrix_read_bytes = matrices_read;
    for (int i = 0; i < l.n; i++) *l.items[i].dst = (char *)m->w.arena + l.items[i].offset;

    tp_log0("loading %s weights: %.1f MiB per rank (%s, TP=%d%s)\n", random ? "random" : "checkpoint",
            total / 1048576.0, b->name, m->sh.tp, b->weights ? ", GEMM weights int8" : "");
    double t0 = tp_now_seconds(), last = t0;
    uint8_t *staging = staging_max ? b->host_alloc(b, staging_max, "weight staging buffer") : NULL;
    size_t done = 0;
    for (int i = 0; i < l.n; i++) {
        load_item *it = &l.items[i];
        if (random) random_item(b, it, seed + (uint64_t)i * 7919u + (uint64_t)m->sh.rank * 104729u);
        else {
            stage_slice(it, src[i], &m->cfg, staging);
            upload_item(b, it, staging, src[i]->dtype, src[i]);
        }
        done += item_bytes(b, it);
        double now = tp_now_seconds();
        if (now - last > 2.0) {
            tp_log0("  %5.1f%%  %.0f / %.0f MiB  %.0f MiB/s\n", 100.0 * done / total, done / 1048576.0,
                    total / 1048576.0, done / 1048576.0 / (now - t0));
            last = now;
        }
    }
    b->sync(b);
    tp_log0("loaded in %.2f s\n", tp_now_seconds() - t0);
    if (staging) b->host_free(b, staging);
    free(src);
    free(l.items);
    if (st) tp_ckpt_close(st);
}
