/* Rotary embedding + KV cache write, and attention over the paged KV cache.
 *
 * qkv [T, (Hl + 2 Hkl) D] (tp_attn_shape, kernels/backend.h): token t's q heads at
 * qkv + t*(Hl + 2 Hkl)*D + h*D, its k heads after the Hl*D q values, its v heads after the k. The
 * caches are [n_blocks, Hkl, bs, D] (head-contiguous, kernels/common/tp_kv.h): token position p of
 * sequence s, KV head g, sits at tp_kv_pos_row(block_table + s*max_blocks, p, g, ...).
 *
 * Numerics follow HF CodeGen in f32: the rotary angles and the pair rotation are
 * kernels/common/tp_rotary.h (shared with the CUDA backend); scores divided (not multiplied) by
 * sqrtf(D); softmax with the max subtracted. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "kernels/common/tp_kv.h"
#include "kernels/common/tp_rotary.h"
#include "kernels/cpu/cpu_attn.h"
#include "kernels/cpu/cpu_internal.h"

void cpu_kv_store(void *kc, void *vc, const void *k, const void *v, const tp_step *st, int t, int Hkl, int D,
                  size_t es) {
    const int32_t *bt = st->block_table + (size_t)st->seq[t] * st->max_blocks;
    const size_t row = (size_t)D * es;
    for (int g = 0; g < Hkl; g++) {
        const size_t at = tp_kv_pos_row(bt, st->pos[t], g, Hkl, st->block_size, D) * es;
        memcpy((char *)kc + at, (const char *)k + (size_t)g * row, row);
        memcpy((char *)vc + at, (const char *)v + (size_t)g * row, row);
    }
}

/* The pairs i < R/2 of one head (the style's, tp_rotary.h) rotated by the angles whose cos/sin are
 * cs[i], sn[i]. */
static inline void rotate_head(float *x, const float *cs, const float *sn, int R, int style) {
    for (int i = 0; i < R / 2; i++)
        tp_rope_rotate(&x[tp_rope_pair_a(style, i)], &x[tp_rope_pair_b(style, i, R)], cs[i], sn[i]);
}

void cpu_rotary_kv_write(tp_backend *b, void *qkv, void *k_cache, void *v_cache, const tp_step *st,
                         const tp_attn_shape *as) {
    const int T = st->n_tokens, Hl = as->n_heads, Hkl = as->n_kv_heads, D = as->head_dim, R = as->rotary_dim;
    const int half = R / 2;
    const size_t QD = (size_t)Hl * D, KD = (size_t)Hkl * D, row = QD + 2 * KD;
    float *base = (float *)qkv;
    float *inv_freq = tp_malloc((size_t)(half > 0 ? half : 1) * sizeof(float));
    for (int i = 0; i < half; i++) inv_freq[i] = tp_rope_inv_freq(i, R, as->rope_theta);

    #pragma omp parallel num_threads(cpu_threads(b)) if ((size_t)T * row >= CPU_PAR_MIN)
    {
        float *cs = tp_malloc((size_t)(half > 0 ? half : 1) * 2 * sizeof(float)), *sn = cs + (half > 0 ? half : 1);
        #pragma omp for schedule(static)
        for (int t = 0; t < T; t++) {
            const int pos = st->pos[t];
            for (int i = 0; i < half; i++) {
                tp_rope_sincos(tp_rope_angle(pos, inv_freq[i]), &sn[i], &cs[i]);
            }
            float *q = base + (size_t)t * row, *k = q + QD, *v = k + KD;
            for (int h = 0; h < Hl + Hkl; h++) rotate_head(q + (size_t)h * D, cs, sn, R, as->rope_style); /* q, then k */
            cpu_kv_store(k_cache, v_cache, k, v, st, t, Hkl, D, sizeof(float));
        }
        free(cs);
    }
    free(inv_freq);
}

/* ---- attention: the schedule (kernels in cpu_attn_kernels.c, cpu_attn.h) ----
 * Tokens sorted by (sequence, position) and cut into tiles of up to cpu_attn_tile(isa) tokens of
 * one sequence, so each K and V block read serves every query of the tile. A work item is a
 * group of tiles of one sequence and one query head (decode: one token and one head); items of
 * one KV head are adjacent (their K/V rows are then still in this core's L2), longest context
 * first, and under grouped-query attention the query heads of one KV head on the same tokens
 * follow each other (they read the same K/V rows). */
typedef struct {
    int first, n, max_pos, h, g; /* g: the KV head query head h reads */
} att_item;

typedef struct {
    int32_t seq, pos, t;
} tok_key;
static int cmp_tok(const void *x, const void *y) {
    const tok_key *a = x, *b = y;
    if (a->seq != b->seq) return a->seq < b->seq ? -1 : 1;
    return a->pos < b->pos ? -1 : a->pos > b->pos;
}
static int cmp_item(const void *x, const void *y) {
    const att_item *a = x, *b = y;
    if (a->g != b->g) return a->g < b->g ? -1 : 1;
    if (a->max_pos != b->max_pos) return a->max_pos > b->max_pos ? -1 : 1;
    if (a->first != b->first) return a->first < b->first ? -1 : 1;
    return a->h < b->h ? -1 : a->h > b->h;
}

void cpu_attn_run(att_isa isa, const att_args *a, int n_threads) {
    const tp_step *st = a->st;
    const int T = st->n_tokens, Hl = a->Hl, qt = cpu_attn_tile(isa);
    if (T <= 0 || Hl <= 0) return;
    int *order = tp_malloc((size_t)T * sizeof(int));
    tok_key *keys = tp_malloc((size_t)T * sizeof(tok_key));
    for (int t = 0; t < T; t++) keys[t] = (tok_key){st->seq[t], st->pos[t], t};
    qsort(keys, T, sizeof(tok_key), cmp_tok);
    for (int t = 0; t < T; t++) order[t] = keys[t].t;
    free(keys);
    /* Tiles (3+ queries) grouped by up to CPU_ATTN_GROUP per item in the vector builds (a K/V
     * block then serves the whole group from L1), fewer when that would leave under 4 items per
     * thread. */
    long tiles = 0;
    for (int t = 0; t < T;) {
        int n = 1;
        while (t + n < T && n < qt && st->seq[order[t + n]] == st->seq[order[t]]) n++;
        tiles += n >= 3;
        t += n;
    }
    long per = isa == ATT_ISA_C ? 1 : tiles * Hl / (4L * n_threads);
    per = per < 1 ? 1 : per > CPU_ATTN_GROUP ? CPU_ATTN_GROUP : per;
    const int max_q = qt * (int)per;
    att_item *items = tp_malloc((size_t)T * Hl * sizeof(att_item));
    long n_items = 0;
    for (int t = 0; t < T;) {
        int n = 1;
        while (t + n < T && n < max_q && st->seq[order[t + n]] == st->seq[order[t]]) n++;
        if (n < 3) n = 1; /* 1-2 queries: one item each (the dot kernel) */
        for (int h = 0; h < Hl; h++)
            items[n_items++] = (att_item){t, n, st->pos[order[t + n - 1]], h, att_kv_head(a, h)};
        t += n;
    }
    qsort(items, n_items, sizeof(att_item), cmp_item);
    const size_t scratch = cpu_attn_scratch_floats(isa, a->D, st->block_size);

    #pragma omp parallel num_threads(n_threads) if (n_items > 1)
    {
        float *scr = tp_malloc(scratch * sizeof(float));
        #pragma omp for schedule(dynamic, 1)
        for (long w = 0; w < n_items; w++) cpu_attn_item(isa, a, order + items[w].first, items[w].n, items[w].h, scr);
        free(scr);
    }
    free(order);
    free(items);
}

/* Both CPU backends' attention_tune (the bf16 backend's K/V are bf16, b->act). */
void cpu_attention_tune(tp_backend *b, const tp_attn_shape *as, int block_size, int verbose) {
    const att_isa isa = cpu_attn_isa_tune(as->n_heads, as->n_kv_heads, as->head_dim, block_size, b->act == TP_BF16);
    if (verbose) tp_log0("cpu attention: %s: %s\n", cpu_attn_isa_name(isa), cpu_attn_isa_why());
}

const char *cpu_attention_kernel(int T, int D) {
    (void)D;
    const att_isa isa = cpu_attn_isa_pick();
    return cpu_attn_kernel_name(isa, 0, T < cpu_attn_tile(isa) ? T : cpu_attn_tile(isa));
}

void cpu_attention(tp_backend *b, void *out, const void *qkv, const void *k_cache, const void *v_cache,
                   const tp_step *st, const tp_attn_shape *as) {
    const int Hl = as->n_heads, Hkl = as->n_kv_heads, D = as->head_dim;
    if (Hkl < 1 || Hl % Hkl) tp_die("cpu attention: %d query heads are not a multiple of %d KV heads", Hl, Hkl);
    const att_args a = {.qkv = qkv, .kc = k_cache, .vc = v_cache, .out = out, .st = st, .Hl = Hl, .Hkl = Hkl, .D = D,
                        .kv_bf16 = 0};
    cpu_attn_run(cpu_attn_isa_pick(), &a, cpu_threads(b));
}
