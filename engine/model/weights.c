/* Weight loading: this rank's shard of every tensor, from the mmapped checkpoint (safetensors
 * or torch.save .bin: checkpoint.h) into one device arena carved by a size table.
 *
 * 4-bit layers (config.h's q4_group: an AWQ / GPTQ checkpoint, or --weights int4): every layer
 * Linear (qkv, out, MLP in and out) is a 4-bit device matrix, staged in canonical form on the host
 * (weights_q4.c: unpacked from the checkpoint, or quantized here by round-to-nearest) with the same
 * row and column slicing as every other tensor; lm_head and a Linear the checkpoint leaves in
 * float (modules_to_not_convert) go through matrix_upload, int8 under int4 as under --weights int8.
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
#include "arch.h"
#include "weights_items.h"

#define ARENA_ALIGN 256

typedef struct {
    load_item *items;
    int n, cap;
} load_list;

static load_item *add_item(load_list *l, void **dst, int is_matrix, slice_kind slice, int64_t out_rows, float mean) {
    if (l->n == l->cap) l->items = tp_realloc(l->items, (l->cap = l->cap ? l->cap * 2 : 64) * sizeof *l->items);
    load_item *it = &l->items[l->n++];
    *it = (load_item){.dst = dst, .is_matrix = is_matrix, .slice = slice, .out_rows = out_rows, .rand_mean = mean};
    return it;
}

/* Adds a file tensor fmt(layer) + suffix of [rows, cols] to it, taking [first, first + count). */
static void add_part(load_item *it, const char *fmt, int layer, const char *suffix, int64_t rows, int64_t cols,
                     int64_t first, int64_t count) {
    load_part *p = &it->part[it->n_parts++];
    tp_arch_tensor(p->module, sizeof p->module, fmt, layer, "");
    tp_arch_tensor(p->name, sizeof p->name, fmt, layer, suffix);
    p->rows = rows;
    p->cols = cols;
    p->first = first;
    p->count = count;
}

static size_t item_bytes(tp_backend *b, const load_item *it) {
    int64_t r = it->out_rows, c = item_out_cols(it);
    if (it->q4 && !b->matrix_bytes_q4) tp_die("internal: a 4-bit matrix on the %s backend without int4", b->name);
    if (it->q4) return b->matrix_bytes_q4(b, (int)r, (int)c, it->group);
    if (it->is_matrix) return b->matrix_bytes(b, (int)r, (int)c);
    return (size_t)(r * c) * tp_dtype_size(b->act);
}

/* A whole replicated tensor (norms, the embedding, row-parallel biases). */
static void add_all(load_list *l, void **dst, const char *fmt, int layer, const char *suffix, int64_t rows,
                    int64_t cols, float mean) {
    add_part(add_item(l, dst, 0, SLICE_ALL, rows, mean), fmt, layer, suffix, rows, cols, 0, rows);
}

/* A norm's weight (mean 1 for random weights) and, when the architecture has one, its bias. */
static void add_norm(load_list *l, const tp_arch *A, void **g, void **bias, const char *fmt, int layer, int64_t E) {
    add_all(l, g, fmt, layer, ".weight", E, 1, 1);
    if (A->norm_bias) add_all(l, bias, fmt, layer, ".bias", E, 1, 0);
}

/* A layer's Linear matrix under 4-bit layers (config.h's q4_group; biases are not matrices): 4-bit on
 * the device unless the checkpoint keeps it in float (modules_to_not_convert), in groups of q4_group,
 * or under group_size -1 of the k this rank's slice has. The parts of one device matrix (q/k/v,
 * gate/up) must agree. */
static void layer_linear(const tp_config *c, load_item *it) {
    if (!c->q4_group || !it->is_matrix) return;
    int conv[3], n_conv = 0;
    for (int i = 0; i < it->n_parts; i++) n_conv += conv[i] = tp_quant_converts(&c->quant, it->part[i].module);
    for (int i = 1; i < it->n_parts; i++)
        if (conv[i] != conv[0])
            tp_die_all("%s and %s: config.json's quantization_config.modules_to_not_convert keeps one of them in "
                       "float, not the other; tpgen loads them into one matrix", it->part[0].module,
                       it->part[i].module);
    it->q4_src = n_conv > 0;
    it->q4 = c->quant.method == TP_QUANT_NONE || it->q4_src; /* --weights int4: every layer Linear */
    it->group = c->q4_group > 0 ? c->q4_group : (int)item_out_cols(it);
}

/* This rank's q, k and v rows ([(Hl + 2 Hkl) D, E], or the bias [(Hl + 2 Hkl) D] when is_bias). */
static void add_qkv(load_list *l, const tp_config *c, const tp_shard *s, void **dst, int layer, int is_bias) {
    const tp_arch_names *N = &c->arch->names;
    const int64_t E = c->n_embd, D = c->head_dim, H = c->n_head, Hk = c->n_kv_head;
    const int64_t Hl = s->n_heads, Hkl = s->n_kv_heads, out = (Hl + 2 * Hkl) * D, cols = is_bias ? 1 : E;
    const char *sfx = is_bias ? ".bias" : ".weight";
    if (N->qkv) { /* CodeGen's fused qkv_proj in mp_num groups (no bias) */
        load_item *it = add_item(l, dst, !is_bias, SLICE_QKV, out, 0);
        add_part(it, N->qkv, layer, sfx, 3 * H * D, cols, s->head0, Hl);
        layer_linear(c, it);
        return;
    }
    load_item *it = add_item(l, dst, !is_bias, SLICE_ROWS, out, 0);
    add_part(it, N->q, layer, sfx, H * D, cols, s->head0 * D, Hl * D);
    add_part(it, N->k, layer, sfx, Hk * D, cols, s->kv_head0 * D, Hkl * D);
    add_part(it, N->v, layer, sfx, Hk * D, cols, s->kv_head0 * D, Hkl * D);
    layer_linear(c, it);
}

/* This rank's MLP input rows: fc_in [Il, E], or gate_proj then up_proj [2 Il, E] (or the bias). */
static void add_mlp_in(load_list *l, const tp_config *c, const tp_shard *s, void **dst, int layer, int is_bias) {
    const tp_arch_names *N = &c->arch->names;
    const int64_t I = c->n_inner, Il = s->n_inner, cols = is_bias ? 1 : c->n_embd;
    const char *sfx = is_bias ? ".bias" : ".weight";
    load_item *it = add_item(l, dst, !is_bias, SLICE_ROWS, N->mlp_up ? 2 * Il : Il, 0);
    add_part(it, N->mlp_in, layer, sfx, I, cols, s->inner0, Il);
    if (N->mlp_up) add_part(it, N->mlp_up, layer, sfx, I, cols, s->inner0, Il);
    layer_linear(c, it);
}

/* A row-parallel Linear: all E rows, this rank's k columns [k0, k0 + kn) of K. */
static void add_row_parallel(load_list *l, const tp_config *c, void **dst, const char *fmt, int layer, int64_t K,
                             int64_t k0, int64_t kn) {
    load_item *it = add_item(l, dst, 1, SLICE_COLS, c->n_embd, 0);
    add_part(it, fmt, layer, ".weight", c->n_embd, K, k0, kn);
    layer_linear(c, it);
}

/* Every tensor this rank loads, by the architecture's names (engine/model/arch.h) and the shard plan. */
static void build_list(tp_model *m, load_list *l) {
    const tp_config *c = &m->cfg;
    const tp_arch *A = c->arch;
    const tp_arch_names *N = &A->names;
    const tp_shard *s = &m->sh;
    int64_t E = c->n_embd, I = c->n_inner, D = c->head_dim, V = c->vocab_size, HD = (int64_t)c->n_head * D;
    m->w.layers = tp_calloc(c->n_layer, sizeof *m->w.layers);
    add_all(l, &m->w.wte, N->embed, -1, ".weight", V, E, 0);
    for (int i = 0; i < c->n_layer; i++) {
        tp_layer *L = &m->w.layers[i];
        add_norm(l, A, &L->norm1_g, &L->norm1_b, N->norm1, i, E);
        add_qkv(l, c, s, &L->qkv, i, 0);
        if (c->qkv_bias) add_qkv(l, c, s, &L->qkv_b, i, 1);
        add_row_parallel(l, c, &L->out, N->o, i, HD, s->head0 * D, s->n_heads * D);
        if (c->o_bias) add_all(l, &L->out_b, N->o, i, ".bias", E, 1, 0);
        if (N->norm2) add_norm(l, A, &L->norm2_g, &L->norm2_b, N->norm2, i, E);
        add_mlp_in(l, c, s, &L->mlp_in, i, 0);
        if (c->mlp_in_bias) add_mlp_in(l, c, s, &L->mlp_in_b, i, 1);
        add_row_parallel(l, c, &L->mlp_out, N->mlp_out, i, I, s->inner0, s->n_inner);
        if (c->mlp_out_bias) add_all(l, &L->mlp_out_b, N->mlp_out, i, ".bias", E, 1, 0);
    }
    add_norm(l, A, &m->w.normf_g, &m->w.normf_b, N->norm_f, -1, E);
    load_item *lm = add_item(l, &m->w.lm_head, 1, SLICE_ROWS, s->n_vocab, 0);
    add_part(lm, N->lm_head, -1, ".weight", V, E, s->vocab0, s->n_vocab_valid);
    if (c->q4_lm_head) { /* --lm-head int4: quantized here from the float lm_head, groups along E */
        lm->q4 = 1;
        lm->group = c->q4_group > 0 ? c->q4_group : (int)E;
        if (E % lm->group)
            tp_die_all("--lm-head int4: lm_head's %lld columns (n_embd) do not split into 4-bit groups of %d",
                       (long long)E, lm->group);
    }
    if (c->lm_head_bias)
        add_part(add_item(l, &m->w.lm_head_b, 0, SLICE_ROWS, s->n_vocab, 0), N->lm_head, -1, ".bias", V, 1, s->vocab0,
                 s->n_vocab_valid);
}

static void shape_str(char *buf, size_t size, const int64_t *shape, int ndim) {
    size_t u = snprintf(buf, size, "[");
    for (int i = 0; i < ndim && u < size; i++) u += snprintf(buf + u, size - u, i ? ", %" PRId64 : "%" PRId64, shape[i]);
    if (u < size) snprintf(buf + u, size - u, "]");
}

/* Source tensors of an item; the checks every rank makes identically. */
static void check_item(const tp_ckpt *st, const char *dir, const tp_config *c, load_item *it) {
    if (it->q4_src) { /* AWQ / GPTQ tensors: weights_q4.c */
        tp_q4_check_item(st, dir, c, it);
        return;
    }
    char embed[112], lm[112]; /* tie_word_embeddings: lm_head.weight is the embedding, often not stored */
    tp_arch_tensor(embed, sizeof embed, c->arch->names.embed, -1, ".weight");
    tp_arch_tensor(lm, sizeof lm, c->arch->names.lm_head, -1, ".weight");
    for (int i = 0; i < it->n_parts; i++) {
        load_part *p = &it->part[i];
        const tp_st_tensor *t = tp_ckpt_find(st, p->name);
        if (!t && c->tie_word_embeddings && strcmp(p->name, lm) == 0) t = tp_ckpt_find(st, embed);
        if (!t && tp_ckpt_unsupported(st, p->name))
            tp_die_all("tensor %s in the checkpoint %s: %s", p->name, dir, tp_ckpt_unsupported(st, p->name));
        if (!t) {
            char packed[120]; /* a 4-bit checkpoint whose config.json says nothing of it */
            snprintf(packed, sizeof packed, "%s.qweight", p->module);
            tp_die_all("missing tensor %s in the checkpoint %s%s%s%s", p->name, dir,
                       tp_ckpt_find(st, packed) ? " (it holds " : "", tp_ckpt_find(st, packed) ? packed : "",
                       tp_ckpt_find(st, packed) ? ", 4-bit weights, but config.json has no quantization_config "
                                                  "naming this module quantized)" : "");
        }
        if (t->int32)
            tp_die_all("tensor %s in %s is I32; tpgen reads it as F32, F16 or BF16 weights", p->name, t->file);
        int64_t want[2] = {p->rows, p->cols};
        int want_nd = p->cols == 1 && !it->is_matrix ? 1 : 2;
        int ok = t->ndim == want_nd;
        for (int d = 0; ok && d < want_nd; d++) ok = t->shape[d] == want[d];
        if (!ok) {
            char found[128], expect[128];
            shape_str(found, sizeof found, t->shape, t->ndim);
            shape_str(expect, sizeof expect, want, want_nd);
            tp_die_all("tensor %s in %s has shape %s, expected %s (from config.json)", p->name, t->file, found, expect);
        }
        if (i > 0 && t->dtype != it->part[0].t->dtype)
            tp_die_all("tensors %s and %s in the checkpoint %s have different dtypes (%s, %s); tpgen loads them into "
                       "one matrix",
                       it->part[0].name, p->name, dir, tp_dtype_name(it->part[0].t->dtype), tp_dtype_name(t->dtype));
        p->t = t;
    }
}

/* Copies this rank's part of the file tensors into staging (file dtype), laid out
 * [out_rows, out_cols], row by row as tp_item_row_source maps them. */
static void stage_slice(const load_item *it, const tp_config *c, uint8_t *staging) {
    const size_t es = tp_dtype_size(it->part[0].t->dtype);
    const int64_t oc = item_out_cols(it), c0 = item_col0(it);
    for (int64_t r = 0; r < it->out_rows; r++) {
        int part;
        int64_t src;
        tp_item_row_source(it, c, r, &part, &src);
        uint8_t *dst = staging + (size_t)(r * oc) * es;
        if (part < 0) memset(dst, 0, (size_t)oc * es); /* padding rows stay zero */
        else {
            const load_part *p = &it->part[part];
            memcpy(dst, (const uint8_t *)p->t->data + (size_t)(src * p->cols + c0) * es, (size_t)oc * es);
        }
    }
}

/* max |w| of each of the file tensor's rows over its full width (--weights int8 with a column
 * slice: the scales every TP size agrees on; kernels/common/tp_quant.h). */
static float *full_row_absmax(const load_part *p) {
    const tp_st_tensor *t = p->t;
    const size_t es = tp_dtype_size(t->dtype);
    float *mx = tp_malloc((size_t)p->rows * sizeof(float)), *row = tp_malloc((size_t)p->cols * sizeof(float));
    for (int64_t r = 0; r < p->rows; r++) {
        tp_convert_to_f32(row, (const uint8_t *)t->data + (size_t)(r * p->cols) * es, t->dtype, (size_t)p->cols);
        mx[r] = tp_q8_absmax(row, p->cols);
    }
    free(row);
    return mx;
}

static void upload_item(tp_backend *b, const load_item *it, const void *host) {
    int64_t r = it->out_rows, c = item_out_cols(it);
    const tp_dtype dt = it->part[0].t->dtype;
    if (it->is_matrix && it->slice == SLICE_COLS && b->matrix_upload_rowmax) {
        float *mx = full_row_absmax(&it->part[0]);
        b->matrix_upload_rowmax(b, *it->dst, host, dt, (int)r, (int)c, mx);
        free(mx);
    } else if (it->is_matrix) b->matrix_upload(b, *it->dst, host, dt, (int)r, (int)c);
    else b->upload(b, *it->dst, host, dt, (size_t)(r * c));
}

/* Random weights for benchmarks, drawn on the device (the whole buffer, whatever its layout;
 * a matrix through the backend's own fill where it has one: int8 and int4, which draw f32 values and
 * quantize them, and the bf16 CPU backend's panels). */
static void random_item(tp_backend *b, const load_item *it, uint64_t seed) {
    float stdv = it->rand_mean != 0 ? 0.01f : 0.02f;
    if (it->q4)
        b->matrix_fill_random_q4(b, *it->dst, (int)it->out_rows, (int)item_out_cols(it), it->group, seed,
                                 it->rand_mean, stdv);
    else if (it->is_matrix && b->matrix_fill_random)
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

/* Host buffers of one 4-bit matrix in canonical form (the largest item's sizes). */
typedef struct {
    uint8_t *q, *zero; /* [rows * cols], [rows * cols / group] */
    float *scale, *row; /* [rows * cols / group], [cols] */
} q4_staging;

static void q4_staging_grow(q4_staging *s, const load_item *it, size_t *q_max, size_t *g_max, size_t *c_max) {
    const size_t n = (size_t)(it->out_rows * item_out_cols(it)), g = n / (size_t)it->group;
    const size_t cols = (size_t)item_out_cols(it);
    if (n > *q_max) s->q = tp_realloc(s->q, *q_max = n);
    if (g > *g_max) {
        s->zero = tp_realloc(s->zero, g);
        s->scale = tp_realloc(s->scale, (*g_max = g) * sizeof(float));
    }
    if (cols > *c_max) s->row = tp_realloc(s->row, (*c_max = cols) * sizeof(float));
}

/* A 4-bit item: its canonical slice (weights_q4.c) to the backend. */
static void upload_q4_item(tp_backend *b, const tp_config *c, const load_item *it, const uint8_t *staging,
                           const q4_staging *s) {
    tp_q4_stage(it, c, staging, s->row, s->q, s->scale, s->zero);
    const tp_q4_host h = {s->q, s->scale, s->zero, it->group};
    b->matrix_upload_q4(b, *it->dst, &h, (int)it->out_rows, (int)item_out_cols(it));
}

void tp_model_load_weights(tp_model *m, const char *dir, int random, uint64_t seed) {
    tp_backend *b = m->b;
    char aerr[512];
    if (tp_arch_backend_ok(m->cfg.arch, b, aerr, sizeof aerr)) tp_die_all("%s", aerr);
    if (m->cfg.q4_group && !b->matrix_upload_q4) /* the job turns int4 on for these (launcher/job.c) */
        tp_die_all("internal: 4-bit layers on the %s backend without its int4 weights", b->name);
    load_list l = {0};
    build_list(m, &l);

    tp_ckpt *st = NULL;
    if (!random) {
        char err[1024];
        double t_open = tp_now_seconds();
        st = tp_ckpt_open(dir, err, sizeof err);
        if (!st) tp_die_all("%s", err);
        tp_log0("checkpoint: %s, opened in %.1f ms\n", tp_ckpt_describe(st), 1e3 * (tp_now_seconds() - t_open));
        for (int i = 0; i < l.n; i++) check_item(st, dir, &m->cfg, &l.items[i]);
    }

    /* Size table, then one arena. */
    size_t total = 0, staging_max = 0, matrices = 0, matrices_read = 0, q_max = 0, g_max = 0, c_max = 0;
    q4_staging q4s = {0};
    for (int i = 0; i < l.n; i++) {
        load_item *it = &l.items[i];
        it->offset = total;
        size_t bytes = item_bytes(b, it);
        total += (bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
        if (it->is_matrix) {
            matrices += bytes;
            matrices_read += it->q4 ? tp_q4_read_bytes(it->out_rows, item_out_cols(it), it->group)
                                    : tp_matrix_read_bytes(b, (int)it->out_rows, (int)item_out_cols(it));
        }
        if (it->q4 && !random) q4_staging_grow(&q4s, it, &q_max, &g_max, &c_max);
        if (!random && !it->q4_src) {
            size_t sb = (size_t)(it->out_rows * item_out_cols(it)) * tp_dtype_size(it->part[0].t->dtype);
            if (sb > staging_max) staging_max = sb;
        }
    }
    m->w.arena = b->alloc(b, total, "weights");
    m->w.arena_bytes = total;
    m->w.matrix_bytes = matrices;
    m->w.matrix_read_bytes = matrices_read;
    for (int i = 0; i < l.n; i++) *l.items[i].dst = (char *)m->w.arena + l.items[i].offset;

    char kind[200] = "", group[32] = "a row";
    if (m->cfg.q4_group > 0) snprintf(group, sizeof group, "%d", m->cfg.q4_group);
    if (m->cfg.q4_group) /* --weights int4, or a 4-bit checkpoint */
        snprintf(kind, sizeof kind, ", layers' GEMM weights 4-bit in groups of %s (%s), lm_head %s", group,
                 m->cfg.quant.method ? tp_quant_describe(&m->cfg.quant) : "--weights int4, round-to-nearest",
                 m->cfg.q4_lm_head ? "4-bit too (--lm-head int4)" : "int8");
    else if (b->weights) snprintf(kind, sizeof kind, ", GEMM weights %s", b->weights);
    tp_log0("loading %s weights: %.1f MiB per rank (%s, TP=%d%s)\n", random ? "random" : "checkpoint",
            total / 1048576.0, b->name, m->sh.tp, kind);
    double t0 = tp_now_seconds(), last = t0;
    uint8_t *staging = staging_max ? b->host_alloc(b, staging_max, "weight staging buffer") : NULL;
    size_t done = 0;
    for (int i = 0; i < l.n; i++) {
        load_item *it = &l.items[i];
        if (random) random_item(b, it, seed + (uint64_t)i * 7919u + (uint64_t)m->sh.rank * 104729u);
        else if (it->q4) {
            if (!it->q4_src) stage_slice(it, &m->cfg, staging); /* float: quantized from its slice */
            upload_q4_item(b, &m->cfg, it, staging, &q4s);
        } else {
            stage_slice(it, &m->cfg, staging);
            upload_item(b, it, staging);
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
    free(q4s.q), free(q4s.zero), free(q4s.scale), free(q4s.row);
    free(l.items);
    if (st) tp_ckpt_close(st);
}
