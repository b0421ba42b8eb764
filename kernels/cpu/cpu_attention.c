/* Rotary embedding + KV cache write, and attention over the paged KV cache.
 *
 * qkv [T, 3, Hl, D]: token t's q heads at qkv + (t*3 + 0)*Hl*D + h*D, k heads at (t*3 + 1)*Hl*D,
 * v heads at (t*3 + 2)*Hl*D. The caches are [n_blocks, bs, Hl, D]: token position p of sequence
 * s sits in slot block_table[s*max_blocks + p/bs]*bs + p%bs, and a slot holds all Hl heads.
 *
 * Numerics follow HF CodeGen in f32: the rotary angles and the pair rotation are
 * kernels/common/tp_rotary.h (shared with the CUDA backend); scores divided (not multiplied) by
 * sqrtf(D); softmax with the max subtracted. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "kernels/common/tp_rotary.h"
#include "kernels/cpu/cpu_internal.h"

static inline size_t cache_slot(const tp_step *st, int seq, int pos) {
    const int32_t blk = st->block_table[(size_t)seq * st->max_blocks + pos / st->block_size];
    return (size_t)blk * st->block_size + (size_t)(pos % st->block_size);
}

/* x[2i], x[2i+1] for i < R/2 rotated by the angle whose cos/sin are cs[i], sn[i]. */
static inline void rotate_every_two(float *x, const float *cs, const float *sn, int half) {
    for (int i = 0; i < half; i++) tp_rope_rotate(&x[2 * i], &x[2 * i + 1], cs[i], sn[i]);
}

void cpu_rotary_kv_write(tp_backend *b, void *qkv, void *k_cache, void *v_cache, const tp_step *st, int Hl,
                         int D, int R) {
    const int T = st->n_tokens, half = R / 2;
    const size_t HD = (size_t)Hl * D;
    float *base = (float *)qkv, *kc = (float *)k_cache, *vc = (float *)v_cache;
    float *inv_freq = tp_malloc((size_t)(half > 0 ? half : 1) * sizeof(float));
    for (int i = 0; i < half; i++) inv_freq[i] = tp_rope_inv_freq(i, R);

    #pragma omp parallel num_threads(cpu_threads(b)) if ((size_t)T * HD >= CPU_PAR_MIN)
    {
        float *cs = tp_malloc((size_t)(half > 0 ? half : 1) * 2 * sizeof(float)), *sn = cs + (half > 0 ? half : 1);
        #pragma omp for schedule(static)
        for (int t = 0; t < T; t++) {
            const int pos = st->pos[t];
            for (int i = 0; i < half; i++) {
                tp_rope_sincos(tp_rope_angle(pos, inv_freq[i]), &sn[i], &cs[i]);
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

/* ---- attention ----
 * Tokens are grouped into tiles: up to QT tokens of one sequence (sorted by position), so each
 * K and V row read from the cache serves every query of the tile. Work items (a tile and one
 * head, or a single token and a group of heads) run in parallel; items of one head are adjacent
 * (their K/V rows are then still in this core's L2), longest context first. Three kernels:
 *  - attend_tile (3+ queries, D % 8 == 0): q transposed into lanes [D][QT], so a score for 8
 *    queries against one key is D broadcast FMAs (no horizontal sums); 8 keys at a time.
 *  - attend_dot (1-2 queries, the decode case, D % 8 == 0): one query against a group of heads,
 *    whose slices of a cache row are contiguous, so the cache streams in order.
 *  - attend_scalar: any D.
 * Scores are divided by sqrtf(D) as HF does; the softmax subtracts the max, and the weighted V
 * sum is divided by the sum of exps at the end. */
#define QT 8
#define ATT_GROUP_FLOATS 2048 /* at most this many floats of a cache row per decode item (8 KiB) */

typedef struct {
    const float *qkv, *kc, *vc;
    float *out;
    const tp_step *st;
    int Hl, D;
    size_t HD;
    float scale;
} att_args;

/* Pointer to the cache row of position p of the sequence whose block-table row is bt. */
static inline const float *cache_row(const float *cache, const int32_t *bt, int bs, int p, size_t HD, size_t hoff) {
    return cache + ((size_t)bt[p / bs] * bs + (size_t)(p % bs)) * HD + hoff;
}

/* A block's rows of one head are HD floats apart (a page apart for typical HD), which the
 * hardware prefetcher does not follow: ask for the next block (into L2: a block of a head group
 * can be larger than L1) while this one is computed. always_inline: as a call, GCC finds it
 * side-effect free and deletes it. */
static inline __attribute__((always_inline)) void prefetch_block(const float *cache, const int32_t *bt, int bs,
                                                                 int p0, int P, size_t HD, size_t hoff, int D) {
    if (p0 >= P) return;
    const float *base = cache + (size_t)bt[p0 / bs] * bs * HD + hoff;
    const int n = P - p0 < bs ? P - p0 : bs;
    for (int j = 0; j < n; j++)
        for (int d = 0; d < D; d += 16) __builtin_prefetch(base + (size_t)j * HD + d, 0, 2);
}

static void attend_scalar(const att_args *a, int tok, int h, float *sc) {
    const int D = a->D, P = a->st->pos[tok] + 1;
    const size_t hoff = (size_t)h * D;
    const int32_t *bt = a->st->block_table + (size_t)a->st->seq[tok] * a->st->max_blocks;
    const float *q = a->qkv + (size_t)tok * 3 * a->HD + hoff;
    float *o = a->out + (size_t)tok * a->HD + hoff;
    float mx = -INFINITY;
    for (int p = 0; p < P; p++) {
        const float *k = cache_row(a->kc, bt, a->st->block_size, p, a->HD, hoff);
        float s = 0.0f;
        for (int d = 0; d < D; d++) s += q[d] * k[d];
        sc[p] = s / a->scale;
        mx = sc[p] > mx ? sc[p] : mx;
    }
    float sum = 0.0f;
    for (int p = 0; p < P; p++) sum += sc[p] = expf(sc[p] - mx);
    for (int d = 0; d < D; d++) o[d] = 0.0f;
    for (int p = 0; p < P; p++) {
        const float *v = cache_row(a->vc, bt, a->st->block_size, p, a->HD, hoff);
        for (int d = 0; d < D; d++) o[d] += sc[p] * v[d];
    }
    for (int d = 0; d < D; d++) o[d] /= sum;
}

/* One query, heads [h0, h0 + nh), D % 8 == 0: a cache row's nh heads are contiguous, so the
 * rows stream in order. sc: [nh][P] scratch, acc: [nh][D] scratch. */
CPU_SIMD_CLONES
static void attend_dot(const att_args *a, int tok, int h0, int nh, float *sc, float *acc) {
    const int D = a->D, P = a->st->pos[tok] + 1, bs = a->st->block_size;
    const size_t hoff = (size_t)h0 * D, HD = a->HD, GD = (size_t)nh * D;
    const int32_t *bt = a->st->block_table + (size_t)a->st->seq[tok] * a->st->max_blocks;
    const float *q = a->qkv + (size_t)tok * 3 * HD + hoff;
    for (int p0 = 0; p0 < P; p0 += bs) { /* one block: rows p0.. are HD apart */
        const float *kb = a->kc + (size_t)bt[p0 / bs] * bs * HD + hoff;
        const int n = P - p0 < bs ? P - p0 : bs;
        prefetch_block(a->kc, bt, bs, p0 + bs, P, HD, hoff, (int)GD);
        for (int j = 0; j < n; j++) {
            const float *kr = kb + (size_t)j * HD;
            int g = 0;
            for (; g + 2 <= nh; g += 2) { /* two heads at a time: two independent FMA chains */
                const float *k0 = kr + (size_t)g * D, *q0 = q + (size_t)g * D;
                v8f s0 = v8_splat(0), s1 = s0;
                for (int d = 0; d < D; d += 8) {
                    s0 += v8_load(q0 + d) * v8_load(k0 + d);
                    s1 += v8_load(q0 + D + d) * v8_load(k0 + D + d);
                }
                sc[(size_t)g * P + p0 + j] = v8_sum(s0) / a->scale;
                sc[(size_t)(g + 1) * P + p0 + j] = v8_sum(s1) / a->scale;
            }
            for (; g < nh; g++) {
                const float *k0 = kr + (size_t)g * D, *q0 = q + (size_t)g * D;
                v8f s0 = v8_splat(0);
                for (int d = 0; d < D; d += 8) s0 += v8_load(q0 + d) * v8_load(k0 + d);
                sc[(size_t)g * P + p0 + j] = v8_sum(s0) / a->scale;
            }
        }
    }
    float sum[nh];
    for (int g = 0; g < nh; g++) {
        float *s = sc + (size_t)g * P, mx = -INFINITY, sm = 0.0f;
        for (int p = 0; p < P; p++) mx = s[p] > mx ? s[p] : mx;
        for (int p = 0; p < P; p++) sm += s[p] = expf(s[p] - mx);
        sum[g] = sm;
    }
    for (size_t i = 0; i < GD; i += 8) v8_store(acc + i, v8_splat(0));
    for (int p0 = 0; p0 < P; p0 += bs) {
        const float *vb = a->vc + (size_t)bt[p0 / bs] * bs * HD + hoff;
        const int n = P - p0 < bs ? P - p0 : bs;
        prefetch_block(a->vc, bt, bs, p0 + bs, P, HD, hoff, (int)GD);
        for (int j = 0; j < n; j++) {
            const float *vr = vb + (size_t)j * HD;
            for (int g = 0; g < nh; g++) {
                const v8f w = v8_splat(sc[(size_t)g * P + p0 + j]);
                float *ag = acc + (size_t)g * D;
                const float *vg = vr + (size_t)g * D;
                for (int d = 0; d < D; d += 8) v8_store(ag + d, v8_load(ag + d) + w * v8_load(vg + d));
            }
        }
    }
    float *o = a->out + (size_t)tok * HD + hoff;
    for (int g = 0; g < nh; g++) {
        const v8f inv = v8_splat(1.0f / sum[g]);
        for (int d = 0; d < D; d += 8) v8_store(o + (size_t)g * D + d, v8_load(acc + (size_t)g * D + d) * inv);
    }
}

/* Up to QT queries of one sequence (toks sorted by position), D % 8 == 0.
 * qT: [D][QT], S: [P][QT] (scores, then exps), acc: [QT][D] scratch. Lane i is query toks[i]; lanes
 * past nq hold zeros and are never stored. */
CPU_SIMD_CLONES
static void attend_tile(const att_args *a, const int *toks, int nq, int h, float *qT, float *S, float *acc) {
    const int D = a->D, bs = a->st->block_size;
    const size_t hoff = (size_t)h * D, HD = a->HD;
    const int32_t *bt = a->st->block_table + (size_t)a->st->seq[toks[0]] * a->st->max_blocks;
    int pos[QT];
    for (int i = 0; i < QT; i++) pos[i] = i < nq ? a->st->pos[toks[i]] : -1;
    const int P = pos[nq - 1] + 1, p_min = pos[0];
    for (int d = 0; d < D; d++)
        for (int i = 0; i < QT; i++) qT[d * QT + i] = i < nq ? a->qkv[(size_t)toks[i] * 3 * HD + hoff + d] : 0.0f;

    const v8f scale = v8_splat(a->scale);
    for (int p0 = 0; p0 < P; p0 += bs) {
        const float *kb = a->kc + (size_t)bt[p0 / bs] * bs * HD + hoff;
        const int n = P - p0 < bs ? P - p0 : bs;
        prefetch_block(a->kc, bt, bs, p0 + bs, P, HD, hoff, D);
        int j = 0;
        for (; j + 8 <= n; j += 8) { /* 8 keys: 8 independent FMA chains */
            const float *k0 = kb + (size_t)j * HD;
            v8f s0 = v8_splat(0), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
            for (int d = 0; d < D; d++) {
                const v8f qv = v8_load(qT + d * QT);
                s0 += qv * k0[d];
                s1 += qv * k0[HD + d];
                s2 += qv * k0[2 * HD + d];
                s3 += qv * k0[3 * HD + d];
                s4 += qv * k0[4 * HD + d];
                s5 += qv * k0[5 * HD + d];
                s6 += qv * k0[6 * HD + d];
                s7 += qv * k0[7 * HD + d];
            }
            float *Sp = S + (size_t)(p0 + j) * QT;
            v8_store(Sp, s0 / scale);
            v8_store(Sp + QT, s1 / scale);
            v8_store(Sp + 2 * QT, s2 / scale);
            v8_store(Sp + 3 * QT, s3 / scale);
            v8_store(Sp + 4 * QT, s4 / scale);
            v8_store(Sp + 5 * QT, s5 / scale);
            v8_store(Sp + 6 * QT, s6 / scale);
            v8_store(Sp + 7 * QT, s7 / scale);
        }
        for (; j < n; j++) {
            const float *k0 = kb + (size_t)j * HD;
            v8f s0 = v8_splat(0);
            for (int d = 0; d < D; d++) s0 += v8_load(qT + d * QT) * k0[d];
            v8_store(S + (size_t)(p0 + j) * QT, s0 / scale);
        }
    }
    /* causal mask: query i sees positions <= pos[i] (padding lanes see none) */
    for (int p = p_min + 1; p < P; p++)
        for (int i = 0; i < QT; i++)
            if (p > pos[i]) S[(size_t)p * QT + i] = -INFINITY;
    float mx[QT], sum[QT];
    for (int i = 0; i < QT; i++) { mx[i] = -INFINITY; sum[i] = 0.0f; }
    for (int p = 0; p < P; p++)
        for (int i = 0; i < QT; i++) mx[i] = S[(size_t)p * QT + i] > mx[i] ? S[(size_t)p * QT + i] : mx[i];
    for (int p = 0; p < P; p++)
        for (int i = 0; i < nq; i++) sum[i] += S[(size_t)p * QT + i] = expf(S[(size_t)p * QT + i] - mx[i]);
    for (int i = nq; i < QT; i++) /* padding lanes: weight 0 */
        for (int p = 0; p < P; p++) S[(size_t)p * QT + i] = 0.0f;

    /* acc[i][:] = sum_p S[p][i] * V[p][:], one block of V rows at a time (rows stay in L1 while
     * every 8-wide column chunk passes over them), 8 accumulators per chunk. */
    for (size_t i = 0; i < (size_t)QT * D; i += 8) v8_store(acc + i, v8_splat(0));
    for (int p0 = 0; p0 < P; p0 += bs) {
        const float *vb = a->vc + (size_t)bt[p0 / bs] * bs * HD + hoff;
        const int n = P - p0 < bs ? P - p0 : bs;
        prefetch_block(a->vc, bt, bs, p0 + bs, P, HD, hoff, D);
        for (int c = 0; c < D; c += 8) {
            v8f o0 = v8_load(acc + c), o1 = v8_load(acc + D + c), o2 = v8_load(acc + 2 * D + c),
                o3 = v8_load(acc + 3 * D + c), o4 = v8_load(acc + 4 * D + c), o5 = v8_load(acc + 5 * D + c),
                o6 = v8_load(acc + 6 * D + c), o7 = v8_load(acc + 7 * D + c);
            for (int j = 0; j < n; j++) {
                const v8f v = v8_load(vb + (size_t)j * HD + c);
                const float *w = S + (size_t)(p0 + j) * QT;
                o0 += w[0] * v; o1 += w[1] * v; o2 += w[2] * v; o3 += w[3] * v;
                o4 += w[4] * v; o5 += w[5] * v; o6 += w[6] * v; o7 += w[7] * v;
            }
            v8_store(acc + c, o0); v8_store(acc + D + c, o1); v8_store(acc + 2 * D + c, o2);
            v8_store(acc + 3 * D + c, o3); v8_store(acc + 4 * D + c, o4); v8_store(acc + 5 * D + c, o5);
            v8_store(acc + 6 * D + c, o6); v8_store(acc + 7 * D + c, o7);
        }
    }
    for (int i = 0; i < nq; i++) {
        const v8f inv = v8_splat(1.0f / sum[i]);
        float *o = a->out + (size_t)toks[i] * HD + hoff;
        for (int c = 0; c < D; c += 8) v8_store(o + c, v8_load(acc + (size_t)i * D + c) * inv);
    }
}

/* The kernel a tile of n queries of one sequence takes (kernel_name names the same choice). */
typedef enum { ATT_SCALAR, ATT_DOT, ATT_TILE } att_kind;
static att_kind att_pick(int n, int D) { return D % 8 ? ATT_SCALAR : n >= 3 ? ATT_TILE : ATT_DOT; }

const char *cpu_attention_kernel(int T, int D) {
    const att_kind k = att_pick(T < QT ? T : QT, D); /* T queries: tiles of QT, the first names it */
    const int avx2 = strcmp(cpu_clone_isa(), "avx2") == 0;
    if (k == ATT_SCALAR) return "scalar-f32";
    if (k == ATT_TILE) return avx2 ? "tile-f32-avx2" : "tile-f32-c";
    return avx2 ? "dot-f32-avx2" : "dot-f32-c";
}

/* A work item: tokens order[first .. first+n) of one sequence, heads [h0, h0 + nh). */
typedef struct {
    int first, n, max_pos, h0, nh;
} att_item;

typedef struct {
    int32_t seq, pos, t;
} tok_key;
static int cmp_tok(const void *x, const void *y) {
    const tok_key *a = x, *b = y;
    if (a->seq != b->seq) return a->seq < b->seq ? -1 : 1;
    return a->pos < b->pos ? -1 : a->pos > b->pos;
}
/* Items of one head together (consecutive tiles of a head reread the same K/V rows, which then
 * come from this core's L2), longest context first within a head. */
static int cmp_item(const void *x, const void *y) {
    const att_item *a = x, *b = y;
    if (a->h0 != b->h0) return a->h0 < b->h0 ? -1 : 1;
    const long wa = (long)(a->max_pos + 1) * a->nh, wb = (long)(b->max_pos + 1) * b->nh;
    return wa > wb ? -1 : wa < wb;
}

void cpu_attention(tp_backend *b, void *out, const void *qkv, const void *k_cache, const void *v_cache,
                   const tp_step *st, int Hl, int D) {
    const int T = st->n_tokens, nt = cpu_threads(b);
    if (T <= 0 || Hl <= 0) return;
    att_args a = {.qkv = qkv, .kc = k_cache, .vc = v_cache, .out = out, .st = st, .Hl = Hl, .D = D,
                  .HD = (size_t)Hl * D, .scale = sqrtf((float)D)};
    const int vec = D % 8 == 0;

    /* tokens sorted by (sequence, position), cut into tiles of one sequence */
    int *order = tp_malloc((size_t)T * sizeof(int));
    tok_key *keys = tp_malloc((size_t)T * sizeof(tok_key));
    for (int t = 0; t < T; t++) keys[t] = (tok_key){st->seq[t], st->pos[t], t};
    qsort(keys, T, sizeof(tok_key), cmp_tok);
    for (int t = 0; t < T; t++) order[t] = keys[t].t;
    free(keys);
    /* Tiles of 3+ queries: one item per head. Single queries (decode): one item per head group,
     * as few groups as keep every thread busy (a group streams its heads' cache rows in order). */
    int n_single = 0, n_tiles = 0, max_pos = 0;
    for (int t = 0; t < T;) {
        int n = 1;
        while (t + n < T && n < QT && st->seq[order[t + n]] == st->seq[order[t]]) n++;
        if (att_pick(n, D) == ATT_TILE) n_tiles++;
        else n_single += n;
        max_pos = st->pos[order[t + n - 1]] > max_pos ? st->pos[order[t + n - 1]] : max_pos;
        t += n;
    }
    int groups = n_single >= 2 * nt ? 1 : (2 * nt + n_single - 1) / (n_single > 0 ? n_single : 1);
    /* and small enough that a group's accumulators ([nh][D] floats) stay in L1 */
    const int min_groups = (int)(((size_t)Hl * D + ATT_GROUP_FLOATS - 1) / ATT_GROUP_FLOATS);
    groups = groups < min_groups ? min_groups : groups;
    groups = groups > Hl ? Hl : groups;
    att_item *items = tp_malloc(((size_t)n_tiles * Hl + (size_t)n_single * groups) * sizeof(att_item));
    long n_items = 0;
    for (int t = 0; t < T;) {
        int n = 1;
        while (t + n < T && n < QT && st->seq[order[t + n]] == st->seq[order[t]]) n++;
        if (att_pick(n, D) == ATT_TILE) {
            for (int h = 0; h < Hl; h++) items[n_items++] = (att_item){t, n, st->pos[order[t + n - 1]], h, 1};
        } else {
            for (int i = 0; i < n; i++)
                for (int g = 0; g < groups; g++) {
                    const int h0 = g * Hl / groups, h1 = (g + 1) * Hl / groups;
                    items[n_items++] = (att_item){t + i, 1, st->pos[order[t + i]], h0, h1 - h0};
                }
        }
        t += n;
    }
    qsort(items, n_items, sizeof(att_item), cmp_item);
    const int gmax = (Hl + groups - 1) / groups;

    #pragma omp parallel num_threads(nt) if (n_items > 1)
    {
        /* per thread: S [P][max(QT, gmax)] scores, qT [D][QT], acc [max(QT, gmax)][D] */
        const size_t lanes = QT > gmax ? QT : gmax;
        float *S = tp_malloc(((size_t)(max_pos + 1) * lanes + (size_t)D * QT + lanes * D) * sizeof(float));
        float *qT = S + (size_t)(max_pos + 1) * lanes, *acc = qT + (size_t)D * QT;
        #pragma omp for schedule(dynamic, 1)
        for (long w = 0; w < n_items; w++) {
            const att_item *it = &items[w];
            if (it->n >= 3) attend_tile(&a, order + it->first, it->n, it->h0, qT, S, acc);
            else if (vec) attend_dot(&a, order[it->first], it->h0, it->nh, S, acc);
            else
                for (int h = it->h0; h < it->h0 + it->nh; h++) attend_scalar(&a, order[it->first], h, S);
        }
        free(S);
    }
    free(order);
    free(items);
}
