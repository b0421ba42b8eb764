/* Attention kernels (kernels/cpu/cpu_attn.h): the plain-C reference twin, and the AVX2 + FMA and
 * AVX-512 builds of cpu_attn_simd.h (which one runs: cpu_attn_pick.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "kernels/common/tp_kv.h"
#include "kernels/common/tp_round.h"
#include "kernels/cpu/cpu_attn.h"

/* q of token tok, head h, as f32 into q [D]. */
static inline void att_load_q(const att_args *a, int tok, int h, float *q) {
    const size_t off = (size_t)tok * (a->Hl + 2 * a->Hkl) * a->D + (size_t)h * a->D;
    if (a->act_bf16)
        for (int d = 0; d < a->D; d++) q[d] = tp_bf16_to_f32(((const uint16_t *)a->qkv)[off + d]);
    else memcpy(q, (const float *)a->qkv + off, (size_t)a->D * sizeof(float));
}

/* K/V element (pos p of the sequence whose block-table row is bt, KV head g, dim d) as f32. */
static inline float att_kv(const att_args *a, const void *cache, const int32_t *bt, int p, int g, int d) {
    const size_t i = tp_kv_pos_row(bt, p, g, a->Hkl, a->st->block_size, a->D) + (size_t)d;
    return a->kv_bf16 ? tp_bf16_to_f32(((const uint16_t *)cache)[i]) : ((const float *)cache)[i];
}

/* ---- the plain-C twin: the same blocked online softmax, one query at a time, scalar loops.
 * scr: q [D], s [bs], acc [D]. */
static void att_item_c(const att_args *a, const int *toks, int nq, int h, float *scr) {
    const int D = a->D, bs = a->st->block_size, g = att_kv_head(a, h);
    const float scale = sqrtf((float)D);
    float *q = scr, *s = q + D, *acc = s + bs;
    for (int i = 0; i < nq; i++) {
        const int tok = toks[i], P = a->st->pos[tok] + 1;
        const int32_t *bt = a->st->block_table + (size_t)a->st->seq[tok] * a->st->max_blocks;
        att_load_q(a, tok, h, q);
        for (int d = 0; d < D; d++) acc[d] = 0.0f;
        float m = -INFINITY, l = 0.0f;
        for (int p0 = 0; p0 < P; p0 += bs) {
            const int n = P - p0 < bs ? P - p0 : bs;
            float mb = -INFINITY;
            for (int j = 0; j < n; j++) {
                float dot = 0.0f;
                for (int d = 0; d < D; d++) dot += q[d] * att_kv(a, a->kc, bt, p0 + j, g, d);
                s[j] = dot / scale;
                mb = s[j] > mb ? s[j] : mb;
            }
            const float mn = m > mb ? m : mb, corr = expf(m - mn); /* 0 on the first block */
            float sum = 0.0f;
            for (int j = 0; j < n; j++) sum += s[j] = expf(s[j] - mn);
            l = l * corr + sum;
            m = mn;
            for (int d = 0; d < D; d++) {
                float o = acc[d] * corr;
                for (int j = 0; j < n; j++) o += s[j] * att_kv(a, a->vc, bt, p0 + j, g, d);
                acc[d] = o;
            }
        }
        const size_t off = (size_t)tok * a->Hl * D + (size_t)h * D;
        for (int d = 0; d < D; d++) {
            const float o = acc[d] / l;
            if (a->act_bf16) ((uint16_t *)a->out)[off + d] = tp_f32_to_bf16(o);
            else ((float *)a->out)[off + d] = o;
        }
    }
}

#if defined(__x86_64__)
#define ATT_W 8
#define ATT_TGT __attribute__((target("avx2,fma")))
#define ATT_SFX avx2
#define ATT_GROUP CPU_ATTN_GROUP
#include "kernels/cpu/cpu_attn_simd.h"
#undef ATT_W
#undef ATT_TGT
#undef ATT_SFX
#define ATT_W 16
#define ATT_TGT __attribute__((target("avx512f,avx2,fma")))
#define ATT_SFX avx512
#include "kernels/cpu/cpu_attn_simd.h"
#undef ATT_W
#undef ATT_TGT
#undef ATT_SFX
#define ATT_HAVE_SIMD 1
#else
#define ATT_HAVE_SIMD 0
#endif

int cpu_attn_isa_supported(att_isa isa) {
    if (isa == ATT_ISA_C) return 1;
#if ATT_HAVE_SIMD
    __builtin_cpu_init();
    const int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (isa == ATT_ISA_AVX2) return avx2;
    if (isa == ATT_ISA_AVX512) return avx2 && __builtin_cpu_supports("avx512f");
#endif
    return 0;
}

const char *cpu_attn_isa_name(att_isa isa) {
    return isa == ATT_ISA_AVX512 ? "avx512" : isa == ATT_ISA_AVX2 ? "avx2" : "c";
}

int cpu_attn_tile(att_isa isa) { return isa == ATT_ISA_AVX512 ? 32 : isa == ATT_ISA_AVX2 ? 16 : 8; }

const char *cpu_attn_kernel_name(att_isa isa, int kv_bf16, int n) {
    static const char *names[2][2][3] = {
        {{"dot-f32-c", "dot-f32-avx2", "dot-f32-avx512"}, {"tile-f32-c", "tile-f32-avx2", "tile-f32-avx512"}},
        {{"dot-bf16-c", "dot-bf16-avx2", "dot-bf16-avx512"}, {"tile-bf16-c", "tile-bf16-avx2", "tile-bf16-avx512"}}};
    return names[kv_bf16 ? 1 : 0][n >= 3 ? 1 : 0][isa];
}

size_t cpu_attn_scratch_floats(att_isa isa, int D, int block_size) {
    const size_t W = (size_t)cpu_attn_tile(isa), bs = (size_t)block_size;
    if (isa == ATT_ISA_C) return 2 * (size_t)D + bs;
    /* per tile qT + acc, then S, Kf, Vf (W: queries per tile) */
    return CPU_ATTN_GROUP * 2 * (size_t)D * W + bs * W + 2 * bs * (size_t)D;
}

void cpu_attn_item(att_isa isa, const att_args *a, const int *toks, int nq, int h, float *scr) {
#if ATT_HAVE_SIMD
    if (isa == ATT_ISA_AVX512) { att_item_avx512(a, toks, nq, h, scr); return; }
    if (isa == ATT_ISA_AVX2) { att_item_avx2(a, toks, nq, h, scr); return; }
#endif
    att_item_c(a, toks, nq, h, scr);
}
