/* Rotary embedding + KV cache write, and attention over the paged KV cache.
 *
 * qkv [T, 3, Hl, D]: token t's q heads at qkv + (t*3 + 0)*Hl*D + h*D, k heads at (t*3 + 1)*Hl*D,
 * v heads at (t*3 + 2)*Hl*D. The caches are [n_blocks, bs, Hl, D]: token position p of sequence
 * s sits in slot block_table[s*max_blocks + p/bs]*bs + p%bs, and a slot holds all Hl heads.
 *
 * Numerics follow HF CodeGen in f32: inv_freq = 1 / 10000^((2i)/R) and angle = (float)pos *
 * inv_freq in f32 (as its sinusoid table), then sinf/cosf; scores divided (not multiplied) by
 * sqrtf(D); softmax with the max subtracted. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/log.h"
#include "kernels/cpu/cpu_internal.h"

static inline size_t cache_slot(const tp_step *st, int seq, int pos) {
    const int32_t blk = st->block_table[(size_t)seq * st->max_blocks + pos / st->block_size];
    return (size_t)blk * st->block_size + (size_t)(pos % st->block_size);
}

/* x[2i], x[2i+1] for i < R/2 rotated by the angle whose cos/sin are cs[i], sn[i]. */
static inline void rotate_every_two(float *x, const float *cs, const float *sn, int half) {
    for (int i = 0; i < half; i++) {
        const float a = x[2 * i], c = x[2 * i + 1];
        x[2 * i] = a * cs[i] - c * sn[i];
        x[2 * i + 1] = c * cs[i] + a * sn[i];
    }
}

void cpu_rotary_kv_write(tp_backend *b, void *qkv, void *k_cache, void *v_cache, const tp_step *st, int Hl,
                         int D, int R) {
    const int T = st->n_tokens, half = R / 2;
    const size_t HD = (size_t)Hl * D;
    float *base = (float *)qkv, *kc = (float *)k_cache, *vc = (float *)v_cache;
    float *inv_freq = tp_malloc((size_t)(half > 0 ? half : 1) * sizeof(float));
    for (int i = 0; i < half; i++) inv_freq[i] = 1.0f / powf(10000.0f, (float)(2 * i) / (float)R);

    #pragma omp parallel num_threads(cpu_threads(b)) if ((size_t)T * HD >= CPU_PAR_MIN)
    {
        float *cs = tp_malloc((size_t)(half > 0 ? half : 1) * 2 * sizeof(float)), *sn = cs + (half > 0 ? half : 1);
        #pragma omp for schedule(static)
        for (int t = 0; t < T; t++) {
            const int pos = st->pos[t];
            for (int i = 0; i < half; i++) {
                const float ang = (float)pos * inv_freq[i];
                cs[i] = cosf(ang);
                sn[i] = sinf(ang);
            }
            float *q = base + (size_t)t * 3 * HD, *k = q + HD, *v = k + HD;
            for (int h = 0; h < Hl; h++) {
                rotate_every_two(q + (size_t)h * D, cs, sn, half);
                rotate_every_two(k + (size_t)h * D, cs, sn, half);
            }
            const size_t slot = cache_slot(st, st->seq[t], pos);
            memcpy(kc + slot * HD, k, HD * sizeof(float));
            memcpy(vc + slot * HD, v, HD * sizeof(float));
        }
        free(cs);
    }
    free(inv_freq);
}

static inline float dot_f32(const float *a, const float *b, int n) {
    float s = 0.0f;
    #pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static inline void axpy_f32(float *y, float a, const float *x, int n) {
    #pragma omp simd
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

/* One (token, head): scores over positions 0..P-1 of sequence `seq`, softmax, weighted V sum. */
static void attend_one(float *o, const float *q, const float *kc, const float *vc, const tp_step *st, int seq,
                       int P, size_t HD, size_t hoff, int D, float scale, float *sc) {
    float mx = -INFINITY;
    for (int p = 0; p < P; p++) {
        const float s = dot_f32(q, kc + cache_slot(st, seq, p) * HD + hoff, D) / scale;
        sc[p] = s;
        mx = s > mx ? s : mx;
    }
    float sum = 0.0f;
    for (int p = 0; p < P; p++) {
        sc[p] = expf(sc[p] - mx);
        sum += sc[p];
    }
    const float inv = 1.0f / sum;
    memset(o, 0, (size_t)D * sizeof(float));
    for (int p = 0; p < P; p++) axpy_f32(o, sc[p] * inv, vc + cache_slot(st, seq, p) * HD + hoff, D);
}

void cpu_attention(tp_backend *b, void *out, const void *qkv, const void *k_cache, const void *v_cache,
                   const tp_step *st, int Hl, int D) {
    const int T = st->n_tokens;
    const size_t HD = (size_t)Hl * D;
    const float scale = sqrtf((float)D);
    const float *qb = (const float *)qkv, *kc = (const float *)k_cache, *vc = (const float *)v_cache;
    float *ob = (float *)out;
    int max_pos = 0; /* from pos itself (host memory here), not the caller's bound: never overrun sc */
    for (int t = 0; t < T; t++) max_pos = st->pos[t] > max_pos ? st->pos[t] : max_pos;
    #pragma omp parallel num_threads(cpu_threads(b)) if ((size_t)T * Hl > 1)
    {
        float *sc = tp_malloc((size_t)(max_pos + 1) * sizeof(float));
        #pragma omp for collapse(2) schedule(dynamic, 1)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < Hl; h++)
                attend_one(ob + (size_t)t * HD + (size_t)h * D, qb + (size_t)t * 3 * HD + (size_t)h * D, kc, vc, st,
                           st->seq[t], st->pos[t] + 1, HD, (size_t)h * D, D, scale, sc);
        free(sc);
    }
}
