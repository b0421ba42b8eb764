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

/* n values of dtype act to dtype kv: copied, or f32 rounded (tp_convert_from_f32). */
static void kv_row(void *dst, tp_dtype kv, const void *src, tp_dtype act, int n) {
    if (act == kv) memcpy(dst, src, (size_t)n * tp_dtype_size(kv));
    else if (act == TP_F32) tp_convert_from_f32(dst, kv, src, (size_t)n);
    else tp_die("internal: %s activations into a %s KV cache", tp_dtype_name(act), tp_dtype_name(kv));
}

void cpu_kv_store(void *kc, void *vc, tp_dtype kv, const void *k, const void *v, tp_dtype act, const tp_step *st,
                  int t, int Hkl, int D) {
    const int32_t *bt = st->block_table + (size_t)st->seq[t] * st->max_blocks;
    const size_t es = tp_dtype_size(kv), src_row = (size_t)D * tp_dtype_size(act);
    for (int g = 0; g < Hkl; g++) {
        const size_t at = tp_kv_pos_row(bt, st->pos[t], g, Hkl, st->block_size, D) * es;
        kv_row((char *)kc + at, kv, (const char *)k + (size_t)g * src_row, act, D);
        kv_row((char *)vc + at, kv, (const char *)v + (size_t)g * src_row, act, D);
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
            cpu_kv_store(k_cache, v_cache, b->kv, k, v, TP_F32, st, t, Hkl, D);
        }
        free(cs);
    }
    free(inv_freq);
}

/* Both CPU backends' attention_tune (q in b->act, K/V in b->kv: f32, bf16, or f32 q over bf16 K/V). */
void cpu_attention_tune(tp_backend *b, const tp_attn_shape *as, int block_size, int verbose) {
    const att_isa isa = cpu_attn_isa_tune(as->n_heads, as->n_kv_heads, as->head_dim, block_size, b->act == TP_BF16,
                                          b->kv == TP_BF16);
    if (verbose) tp_log0("cpu attention: %s: %s\n", cpu_attn_isa_name(isa), cpu_attn_isa_why());
}

const char *cpu_attention_kernel(int T, int kv_bf16) {
    const att_isa isa = cpu_attn_isa_pick();
    return cpu_attn_kernel_name(isa, kv_bf16, T < cpu_attn_tile(isa) ? T : cpu_attn_tile(isa));
}

void cpu_attention(tp_backend *b, void *out, const void *qkv, const void *k_cache, const void *v_cache,
                   const tp_step *st, const tp_attn_shape *as) {
    const int Hl = as->n_heads, Hkl = as->n_kv_heads, D = as->head_dim;
    if (Hkl < 1 || Hl % Hkl) tp_die("cpu attention: %d query heads are not a multiple of %d KV heads", Hl, Hkl);
    const att_args a = {.qkv = qkv, .kc = k_cache, .vc = v_cache, .out = out, .st = st, .Hl = Hl, .Hkl = Hkl, .D = D,
                        .act_bf16 = 0, .kv_bf16 = b->kv == TP_BF16};
    cpu_attn_run(cpu_attn_isa_pick(), &a, cpu_threads(b));
}
