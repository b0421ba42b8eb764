/* 4-bit layers: an AWQ / GPTQ checkpoint's packed tensors checked and unpacked into this rank's
 * canonical slice (kernels/common/tp_quant4.h), or a float slice quantized by round-to-nearest
 * (--weights int4). The slicing is the loader's own (tp_item_row_source, item_col0): rows of q,
 * scale and zero as rows of a float matrix, k columns of q, and their groups' columns of scale
 * and zero.
 *
 * The packings, as the reference code writes them (an Linear W [out, in], groups of Gs k):
 *   AWQ GEMM (AutoAWQ WQLinear_GEMM.from_linear; transformers reads it through GPTQModel):
 *     qweight [in, out/8] int32: q of (k, n) in word [k, n/8], nibble i holding column
 *       n = 8 (n/8) + [0, 2, 4, 6, 1, 3, 5, 7][i];
 *     qzeros [in/Gs, out/8] int32, the zero of (group, n) packed the same way;
 *     scales [in/Gs, out]; w = (q - zero) * scale.
 *   GPTQ (AutoGPTQ / GPTQModel pack):
 *     qweight [in/8, out] int32: q of (k, n) in word [k/8, n], nibble k % 8 (bits 4 (k % 8));
 *     qzeros [in/Gs, out/8] int32: zero of (group, n) in word [group, n/8], nibble n % 8;
 *       checkpoint_format "gptq" (v1) stored zero - 1: read back as GPTQModel's v1 -> v2
 *       conversion does, + 0x11111111 on the whole int32 (a borrow from the pack carries back);
 *     scales [in/Gs, out]; g_idx [in] = k / Gs (anything else: act-order, refused);
 *     w = (q - zero) * scale.
 * group_size -1: Gs = in, one group per row; a rank's slice of a row-parallel matrix is then one
 * group of its own (tp_config_q4_ok), with the row's scale and zero. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "weights_items.h"

/* Column j of 8 is nibble AWQ_NIBBLE[j] of its word: the inverse of AutoAWQ's pack order
 * [0, 2, 4, 6, 1, 3, 5, 7]. */
static const int AWQ_NIBBLE[8] = {0, 4, 1, 5, 2, 6, 3, 7};

static uint32_t ld_u32(const tp_st_tensor *t, int64_t i) {
    uint32_t v;
    memcpy(&v, t->data + 4 * (size_t)i, 4); /* little-endian files on a little-endian host */
    return v;
}

static int64_t src_group(const tp_config *c, const load_part *p) { return c->quant.group > 0 ? c->quant.group : p->cols; }

/* q of (n, k) of the Linear whose tensors p->q holds ([out, in] = [p->rows, p->cols]). */
static int q_at(const tp_config *c, const load_part *p, int64_t n, int64_t k) {
    if (c->quant.method == TP_QUANT_AWQ)
        return (int)(ld_u32(p->q.qweight, k * (p->rows / 8) + n / 8) >> (4 * AWQ_NIBBLE[n % 8])) & 15;
    return (int)(ld_u32(p->q.qweight, (k / 8) * p->rows + n) >> (4 * (k % 8))) & 15;
}

/* The zero of (n, group g). */
static int zero_at(const tp_config *c, const load_part *p, int64_t n, int64_t g) {
    uint32_t w = ld_u32(p->q.qzeros, g * (p->rows / 8) + n / 8);
    if (c->quant.method == TP_QUANT_AWQ) return (int)(w >> (4 * AWQ_NIBBLE[n % 8])) & 15;
    if (c->quant.gptq_v1) w += 0x11111111u; /* GPTQModel convert_gptq_v1_to_v2_format: zero - 1 stored */
    return (int)(w >> (4 * (n % 8))) & 15;
}

static float scale_at(const load_part *p, int64_t n, int64_t g) {
    const tp_st_tensor *t = p->q.scales;
    float v;
    tp_convert_to_f32(&v, t->data + (size_t)(g * p->rows + n) * tp_dtype_size(t->dtype), t->dtype, 1);
    return v;
}

static const char *shape_text(const tp_st_tensor *t, char *buf, size_t size) {
    return tp_st_shape_str(t->shape, t->ndim, buf, size);
}

/* One of the module's tensors, present, of the right kind and shape; dies naming it otherwise. */
static const tp_st_tensor *need(const tp_ckpt *st, const char *dir, const tp_config *c, const char *module,
                                const char *what, int int32, int64_t d0, int64_t d1, int optional) {
    char name[160], sh[96], want[96];
    snprintf(name, sizeof name, "%s.%s", module, what);
    const tp_st_tensor *t = tp_ckpt_find(st, name);
    if (!t && optional) return NULL;
    if (!t)
        tp_die_all("missing tensor %s in the checkpoint %s (config.json quantization_config: %s, which stores "
                   "%s.qweight, .qzeros and .scales)", name, dir, tp_quant_describe(&c->quant), module);
    if (t->int32 != int32)
        tp_die_all("tensor %s in %s is %s; %s stores it as %s", name, t->file, t->int32 ? "I32" : tp_dtype_name(t->dtype),
                   c->quant.method == TP_QUANT_AWQ ? "AWQ" : "GPTQ", int32 ? "I32" : "F16, BF16 or F32");
    const int nd = d1 < 0 ? 1 : 2;
    if (t->ndim != nd || t->shape[0] != d0 || (nd == 2 && t->shape[1] != d1)) {
        const int64_t w[2] = {d0, d1};
        tp_die_all("tensor %s in %s has shape %s, expected %s (from config.json and its quantization_config: %s)",
                   name, t->file, shape_text(t, sh, sizeof sh), tp_st_shape_str(w, nd, want, sizeof want),
                   tp_quant_describe(&c->quant));
    }
    return t;
}

void tp_q4_check_item(const tp_ckpt *st, const char *dir, const tp_config *c, load_item *it) {
    const int awq = c->quant.method == TP_QUANT_AWQ;
    for (int i = 0; i < it->n_parts; i++) {
        load_part *p = &it->part[i];
        const int64_t out = p->rows, in = p->cols, Gs = src_group(c, p);
        if (out % 8)
            tp_die_all("%s: %lld output features are not a multiple of 8 (AWQ and GPTQ pack 8 per int32)", p->module,
                       (long long)out);
        if (in % Gs) /* tp_config_q4_ok has checked every k against the group */
            tp_die("internal: %s: %lld input features in groups of %lld", p->module, (long long)in, (long long)Gs);
        p->q.qweight = awq ? need(st, dir, c, p->module, "qweight", 1, in, out / 8, 0)
                           : need(st, dir, c, p->module, "qweight", 1, in / 8, out, 0);
        p->q.qzeros = need(st, dir, c, p->module, "qzeros", 1, in / Gs, out / 8, 0);
        p->q.scales = need(st, dir, c, p->module, "scales", 0, in / Gs, out, 0);
        p->q.g_idx = awq ? NULL : need(st, dir, c, p->module, "g_idx", 1, in, -1, 1);
        for (int64_t k = 0; p->q.g_idx && k < in; k++) {
            const int32_t g = (int32_t)ld_u32(p->q.g_idx, k);
            if (g != k / Gs)
                tp_die_all("tensor %s.g_idx in %s: g_idx[%lld] = %d, not k / group_size = %lld: the checkpoint was "
                           "quantized with desc_act (act-order) and its groups are not consecutive k; tpgen reads "
                           "groups of consecutive k only (quantize with desc_act false)", p->module,
                           p->q.g_idx->file, (long long)k, (int)g, (long long)(k / Gs));
        }
        char act[160]; /* AutoAWQ's ScaledActivation (GELU MLPs): an input scale tpgen would not apply */
        const char *dot = strrchr(p->module, '.');
        snprintf(act, sizeof act, "%.*s.act.scales", dot ? (int)(dot - p->module) : 0, p->module);
        if (dot && tp_ckpt_find(st, act))
            tp_die_all("tensor %s in the checkpoint %s: AWQ's scaled activation (the MLP input of %s divided by "
                       "it) is not supported", act, dir, p->module);
    }
}

/* --weights int4: every row of the float slice, round-to-nearest per group. */
static void quantize_rows(const load_item *it, const uint8_t *staging, float *row, uint8_t *q, float *scale,
                          uint8_t *zero) {
    const int64_t oc = item_out_cols(it), G = it->group, ng = oc / G;
    const tp_dtype dt = it->part[0].t->dtype;
    const size_t es = tp_dtype_size(dt);
    for (int64_t r = 0; r < it->out_rows; r++) {
        tp_convert_to_f32(row, staging + (size_t)(r * oc) * es, dt, (size_t)oc);
        for (int64_t g = 0; g < ng; g++)
            tp_q4_quantize_group(row + g * G, (int)G, q + r * oc + g * G, &scale[r * ng + g], &zero[r * ng + g]);
    }
}

void tp_q4_stage(const load_item *it, const tp_config *c, const uint8_t *staging, float *row, uint8_t *q,
                 float *scale, uint8_t *zero) {
    if (!it->q4_src) {
        quantize_rows(it, staging, row, q, scale, zero);
        return;
    }
    const int64_t R = it->out_rows, oc = item_out_cols(it), c0 = item_col0(it), G = it->group, ng = oc / G;
    int *part = tp_malloc((size_t)R * sizeof *part);
    int64_t *n = tp_malloc((size_t)R * sizeof *n);
    for (int64_t r = 0; r < R; r++) {
        tp_item_row_source(it, c, r, &part[r], &n[r]);
        if (part[r] < 0) tp_die("internal: a 4-bit matrix with padding rows (%s)", it->part[0].module);
        const load_part *p = &it->part[part[r]];
        const int64_t Gs = src_group(c, p);
        for (int64_t j = 0; j < ng; j++) { /* this slice's group j is the file's group (c0 + j G) / Gs */
            const int64_t g = (c0 + j * G) / Gs;
            scale[r * ng + j] = scale_at(p, n[r], g);
            zero[r * ng + j] = (uint8_t)zero_at(c, p, n[r], g);
        }
    }
    enum { KB = 32 }; /* k in blocks: the packed rows of a block stay in cache across the item's rows */
    for (int64_t kb = 0; kb < oc; kb += KB) {
        const int64_t ke = kb + KB < oc ? kb + KB : oc;
        for (int64_t r = 0; r < R; r++) {
            const load_part *p = &it->part[part[r]];
            for (int64_t k = kb; k < ke; k++) q[r * oc + k] = (uint8_t)q_at(c, p, n[r], c0 + k);
        }
    }
    free(part);
    free(n);
}
