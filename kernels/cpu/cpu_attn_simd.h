/* The vector attention kernels (kernels/cpu/cpu_attn.h), written once for ATT_W lanes and
 * included by cpu_attn_kernels.c per build: ATT_W (8 or 16), ATT_TGT (the target attribute),
 * ATT_SFX (a name suffix). Helpers are always_inline functions of the same target, so vector
 * arguments never cross an ABI boundary.
 *
 * Scratch (floats, cpu_attn_scratch_floats): per tile of the group qT [D][2W] (lane i = query i)
 * and acc [2W][D]; then S [bs][2W] (scores, then weights), Kf, Vf [bs][D] (a bf16 block
 * widened). dot: q [D], S [bs], acc [D] in the same space (it reads K and V in place). */
#define ATT_CAT2(a, b) a##_##b
#define ATT_CAT(a, b) ATT_CAT2(a, b)
#define AF(name) ATT_CAT(name, ATT_SFX)
#define AI static inline ATT_TGT __attribute__((always_inline))

#define ATT_Q (2 * ATT_W) /* queries per tile */
typedef float AF(vf) __attribute__((vector_size(ATT_W * 4)));
typedef float AF(vfu) __attribute__((vector_size(ATT_W * 4), aligned(4), may_alias));
typedef int32_t AF(vi) __attribute__((vector_size(ATT_W * 4)));
typedef uint32_t AF(vu) __attribute__((vector_size(ATT_W * 4)));
typedef uint16_t AF(vh) __attribute__((vector_size(ATT_W * 2), aligned(2), may_alias));
#define VF AF(vf)
#define VI AF(vi)
#define LD(p) (*(const AF(vfu) *)(p))
#define ST(p, v) (*(AF(vfu) *)(p) = (v))

AI VF AF(splat)(float x) { return (VF){0} + x; }
AI VF AF(blend)(VI m, VF a, VF b) { return (VF)((m & (VI)a) | (~m & (VI)b)); } /* m ? a : b */
AI VF AF(vmax)(VF a, VF b) { return AF(blend)(a > b, a, b); }
AI float AF(hsum)(VF v) {
    float s = 0.0f;
    for (int i = 0; i < ATT_W; i++) s += v[i];
    return s;
}
/* Lane sums of W vectors at once, vector k's sum in lane k: log2(W) levels of a transpose-and-add
 * (ATT_FOLDB: two shuffles and an add fold each B-lane segment of two vectors into halves side by
 * side; pairing vector i with i + m/2 of the m left keeps the keys in order), about 3 instructions
 * a key where W horizontal sums take W each. v[0..W) is overwritten. */
#if ATT_W == 16
#define ATT_FOLD16(x, y) \
    (__builtin_shufflevector(x, y, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) \
    + __builtin_shufflevector(x, y, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31))
#define ATT_FOLD8(x, y) \
    (__builtin_shufflevector(x, y, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27) \
    + __builtin_shufflevector(x, y, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31))
#define ATT_FOLD4(x, y) \
    (__builtin_shufflevector(x, y, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29) \
    + __builtin_shufflevector(x, y, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31))
#define ATT_FOLD2(x, y) \
    (__builtin_shufflevector(x, y, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30) \
    + __builtin_shufflevector(x, y, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31))
#elif ATT_W == 8
#define ATT_FOLD8(x, y) \
    (__builtin_shufflevector(x, y, 0, 1, 2, 3, 8, 9, 10, 11) \
    + __builtin_shufflevector(x, y, 4, 5, 6, 7, 12, 13, 14, 15))
#define ATT_FOLD4(x, y) \
    (__builtin_shufflevector(x, y, 0, 1, 8, 9, 4, 5, 12, 13) \
    + __builtin_shufflevector(x, y, 2, 3, 10, 11, 6, 7, 14, 15))
#define ATT_FOLD2(x, y) \
    (__builtin_shufflevector(x, y, 0, 8, 2, 10, 4, 12, 6, 14) \
    + __builtin_shufflevector(x, y, 1, 9, 3, 11, 5, 13, 7, 15))
#endif
AI VF AF(lanesum)(VF *v) {
#if ATT_W == 16
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) v[i] = ATT_FOLD16(v[i], v[i + 8]);
#endif
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) v[i] = ATT_FOLD8(v[i], v[i + 4]);
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++) v[i] = ATT_FOLD4(v[i], v[i + 2]);
    return ATT_FOLD2(v[0], v[1]);
}
#undef ATT_FOLD16
#undef ATT_FOLD8
#undef ATT_FOLD4
#undef ATT_FOLD2

/* W bf16 at p -> f32 (a shift into the high half: exact) */
AI VF AF(widen)(const uint16_t *p) { return (VF)(__builtin_convertvector(*(const AF(vh) *)p, AF(vu)) << 16); }

/* exp(x) for x <= 88 (x below -87 gives 2^-126, not 0: callers mask what must be 0). Cephes
 * expf: x = n ln2 + r, |r| <= ln2/2, a degree-7 polynomial in r, 2^n in the exponent bits;
 * within 2 ulp of expf. */
AI VF AF(vexp)(VF x) {
    x = AF(vmax)(x, AF(splat)(-87.0f));
    x = AF(blend)(x > 88.0f, AF(splat)(88.0f), x);
    const VF t = x * 1.44269504088896341f + 12582912.0f; /* + 1.5 * 2^23: round to nearest */
    const VF n = t - 12582912.0f;
    const VI ni = (VI)t - 0x4B400000;
    VF r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    VF y = 1.9875691500E-4f * r + 1.3981999507E-3f;
    y = y * r + 8.3334519073E-3f;
    y = y * r + 4.1665795894E-2f;
    y = y * r + 1.6666665459E-1f;
    y = y * r + 5.0000001201E-1f;
    y = y * (r * r) + r + 1.0f;
    return y * (VF)((ni + 127) << 23);
}

/* Rows of a block of KV head h as f32, stride D: the cache itself (f32: the head's bs rows are
 * contiguous, kernels/common/tp_kv.h) or Kf/Vf (bf16 widened). */
AI const float *AF(stage)(const att_args *a, const void *cache, int blk, int n, int h, float *dst) {
    const int D = a->D;
    const size_t at = tp_kv_row(blk, h, 0, a->Hkl, a->st->block_size, D);
    if (!a->kv_bf16) return (const float *)cache + at;
    const uint16_t *src = (const uint16_t *)cache + at;
    const size_t nD = (size_t)n * D;
    size_t c = 0;
    for (; c + ATT_W <= nD; c += ATT_W) ST(dst + c, AF(widen)(src + c));
    for (; c < nD; c++) dst[c] = tp_bf16_to_f32(src[c]);
    return dst;
}

/* The next block's rows of KV head h (K and V: one contiguous run each) into L2 while this one
 * is computed: the blocks of a sequence are scattered, so the hardware prefetcher cannot guess
 * the next one. */
AI void AF(prefetch)(const att_args *a, const int32_t *bt, int p0, int P, int h) {
    const int bs = a->st->block_size;
    if (p0 >= P) return;
    const size_t es = a->kv_bf16 ? 2 : 4, at = tp_kv_pos_row(bt, p0, h, a->Hkl, bs, a->D) * es;
    const int n = P - p0 < bs ? P - p0 : bs;
    const size_t bytes = (size_t)n * a->D * es;
    const char *kb = (const char *)a->kc + at, *vb = (const char *)a->vc + at;
    for (size_t o = 0; o < bytes; o += 64) {
        __builtin_prefetch(kb + o, 0, 2);
        __builtin_prefetch(vb + o, 0, 2);
    }
}

/* Output row: acc / l, f32 or rounded once to bf16. */
AI void AF(store_out)(const att_args *a, int tok, int h, const float *acc, float l) {
    const size_t off = (size_t)tok * a->Hl * a->D + (size_t)h * a->D;
    const float inv = 1.0f / l;
    if (a->act_bf16)
        for (int d = 0; d < a->D; d++) ((uint16_t *)a->out)[off + d] = tp_f32_to_bf16(acc[d] * inv);
    else
        for (int d = 0; d < a->D; d++) ((float *)a->out)[off + d] = acc[d] * inv;
}

/* K/V element i of a block's rows as f32: W of them (bf16 widened in registers), or one. */
AI VF AF(ldkv)(const void *p, size_t i, const int bf) {
    if (bf) return AF(widen)((const uint16_t *)p + i);
    return LD((const float *)p + i);
}
AI float AF(kv1)(const void *p, size_t i, const int bf) {
    return bf ? tp_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

/* One query (decode): lanes along D. K and V are read in place (a head's rows of a block are one
 * run, kernels/common/tp_kv.h; bf16 widened in registers, bf a constant after inlining): scores of
 * W keys at a time into W accumulators and one lanesum, the rest one key at a time. */
AI void AF(dot_kv)(const att_args *a, int tok, int h, float *scr, const int bf) {
    const int D = a->D, bs = a->st->block_size, P = a->st->pos[tok] + 1, g = att_kv_head(a, h);
    const float scale = sqrtf((float)D);
    const size_t es = bf ? 2 : 4;
    const int32_t *bt = a->st->block_table + (size_t)a->st->seq[tok] * a->st->max_blocks;
    float *q = scr, *S = q + (size_t)D * ATT_Q, *acc = S + (size_t)bs * ATT_Q;
    att_load_q(a, tok, h, q);
    for (int d = 0; d < D; d++) acc[d] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int p0 = 0; p0 < P; p0 += bs) {
        const int n = P - p0 < bs ? P - p0 : bs;
        AF(prefetch)(a, bt, p0 + bs, P, g);
        const size_t at = tp_kv_row(bt[p0 / bs], g, 0, a->Hkl, bs, D) * es; /* bytes: the block's rows of head g */
        const void *K = (const char *)a->kc + at, *V = (const char *)a->vc + at;
        float mb = -INFINITY;
        int j = 0;
        for (; j + ATT_W <= n; j += ATT_W) { /* W keys: W accumulators along D, one lanesum */
            VF s[ATT_W];
#pragma GCC unroll 16
            for (int u = 0; u < ATT_W; u++) s[u] = AF(splat)(0.0f);
            int c = 0;
            for (; c + ATT_W <= D; c += ATT_W) {
                const VF qv = LD(q + c);
#pragma GCC unroll 16
                for (int u = 0; u < ATT_W; u++) s[u] += qv * AF(ldkv)(K, (size_t)(j + u) * D + c, bf);
            }
            VF sv = AF(lanesum)(s);
            for (int u = 0; c < D && u < ATT_W; u++) { /* D not a multiple of W: the last columns */
                float t = 0.0f;
                for (int d = c; d < D; d++) t += q[d] * AF(kv1)(K, (size_t)(j + u) * D + d, bf);
                sv[u] += t;
            }
            sv = sv / scale;
            ST(S + j, sv);
            for (int u = 0; u < ATT_W; u++) mb = sv[u] > mb ? sv[u] : mb;
        }
        for (; j < n; j++) {
            VF s0 = AF(splat)(0.0f), s1 = s0;
            int c = 0;
            for (; c + 2 * ATT_W <= D; c += 2 * ATT_W) { /* two independent FMA chains */
                s0 += LD(q + c) * AF(ldkv)(K, (size_t)j * D + c, bf);
                s1 += LD(q + c + ATT_W) * AF(ldkv)(K, (size_t)j * D + c + ATT_W, bf);
            }
            for (; c + ATT_W <= D; c += ATT_W) s0 += LD(q + c) * AF(ldkv)(K, (size_t)j * D + c, bf);
            float sc = AF(hsum)(s0 + s1);
            for (; c < D; c++) sc += q[c] * AF(kv1)(K, (size_t)j * D + c, bf);
            S[j] = sc / scale;
            mb = S[j] > mb ? S[j] : mb;
        }
        const float mn = m > mb ? m : mb, corr = expf(m - mn); /* exp(-inf) = 0 on the first block */
        VF sumv = AF(splat)(0.0f);
        j = 0;
        for (; j + ATT_W <= n; j += ATT_W) {
            const VF w = AF(vexp)(LD(S + j) - mn);
            ST(S + j, w);
            sumv += w;
        }
        float sum = AF(hsum)(sumv);
        for (; j < n; j++) sum += S[j] = expf(S[j] - mn);
        l = l * corr + sum;
        m = mn;
        int c = 0; /* acc = acc * corr + sum_j S[j] v_j */
        for (; c + ATT_W <= D; c += ATT_W) {
            VF o = LD(acc + c) * corr;
            for (int jj = 0; jj < n; jj++) o += S[jj] * AF(ldkv)(V, (size_t)jj * D + c, bf);
            ST(acc + c, o);
        }
        for (; c < D; c++) {
            float o = acc[c] * corr;
            for (int jj = 0; jj < n; jj++) o += S[jj] * AF(kv1)(V, (size_t)jj * D + c, bf);
            acc[c] = o;
        }
    }
    AF(store_out)(a, tok, h, acc, l);
}
AI void AF(dot)(const att_args *a, int tok, int h, float *scr) {
    if (a->kv_bf16) AF(dot_kv)(a, tok, h, scr, 1);
    else AF(dot_kv)(a, tok, h, scr, 0);
}

/* Scores of a block for G (1 or 2, a constant after inlining) vectors of W queries:
 * S[j][g W + i] = q_{g W + i} . k_j / scale. 4 keys x G vectors: 4 G independent FMA chains, and
 * each k element broadcast serves G W queries. The g and u loops are unrolled (G is a constant
 * at each call) so the 4 G sums stay in registers. */
AI void AF(scores)(const float *qT, const float *K, int n, int D, float scale, float *S, const int G) {
    int j = 0;
    for (; j + 4 <= n; j += 4) {
        const float *k0 = K + (size_t)j * D, *k1 = k0 + D, *k2 = k1 + D, *k3 = k2 + D;
        VF s[2][4];
#pragma GCC unroll 4
        for (int g = 0; g < G; g++)
#pragma GCC unroll 4
            for (int u = 0; u < 4; u++) s[g][u] = AF(splat)(0.0f);
        for (int d = 0; d < D; d++) {
            const float kd0 = k0[d], kd1 = k1[d], kd2 = k2[d], kd3 = k3[d];
#pragma GCC unroll 4
            for (int g = 0; g < G; g++) {
                const VF qv = LD(qT + (size_t)d * ATT_Q + g * ATT_W);
                s[g][0] += qv * kd0;
                s[g][1] += qv * kd1;
                s[g][2] += qv * kd2;
                s[g][3] += qv * kd3;
            }
        }
#pragma GCC unroll 4
        for (int g = 0; g < G; g++)
#pragma GCC unroll 4
            for (int u = 0; u < 4; u++) ST(S + (size_t)(j + u) * ATT_Q + g * ATT_W, s[g][u] / scale);
    }
    for (; j < n; j++) {
        const float *k0 = K + (size_t)j * D;
        VF s[2];
#pragma GCC unroll 4
        for (int g = 0; g < G; g++) s[g] = AF(splat)(0.0f);
        for (int d = 0; d < D; d++)
#pragma GCC unroll 4
            for (int g = 0; g < G; g++) s[g] += LD(qT + (size_t)d * ATT_Q + g * ATT_W) * k0[d];
#pragma GCC unroll 4
        for (int g = 0; g < G; g++) ST(S + (size_t)j * ATT_Q + g * ATT_W, s[g] / scale);
    }
}

/* One tile's state across the blocks: queries toks[0..nq) (G vectors of W lanes), their
 * positions by lane, running max m and sum l, and P (positions it attends: last pos + 1). */
typedef struct {
    VI posv[2];
    VF m[2], l[2];
    const int *toks;
    int nq, G, P;
} AF(tstate);

/* A tile's share of one block (rows K, V of n keys from p0, D apart): scores, causal mask,
 * online-softmax update, P.V into acc [G W][D]. S: [bs][ATT_Q] scratch. */
AI void AF(tile_block)(AF(tstate) *ts, const float *qT, float *acc, const float *K, const float *V, int p0, int n,
                        int D, float scale, float *S) {
    const int G = ts->G;
    if (G == 2) AF(scores)(qT, K, n, D, scale, S, 2);
    else AF(scores)(qT, K, n, D, scale, S, 1);
    float corr[ATT_Q];
    for (int g = 0; g < G; g++) {
        float *Sg = S + g * ATT_W;
        VF mb = AF(splat)(-INFINITY);
        for (int j = 0; j < n; j++) {
            const VI ok = (VI){0} + (p0 + j) <= ts->posv[g];
            const VF sv = AF(blend)(ok, LD(Sg + (size_t)j * ATT_Q), AF(splat)(-INFINITY));
            ST(Sg + (size_t)j * ATT_Q, sv);
            mb = AF(vmax)(mb, sv);
        }
        const VF mn = AF(vmax)(ts->m[g], mb); /* finite: every query sees position 0 */
        const VF cv = AF(blend)(ts->m[g] == -INFINITY, AF(splat)(0.0f), AF(vexp)(ts->m[g] - mn));
        VF sum = AF(splat)(0.0f);
        for (int j = 0; j < n; j++) { /* weights; masked: exactly 0 */
            const VI ok = (VI){0} + (p0 + j) <= ts->posv[g];
            const VF w = (VF)(ok & (VI)AF(vexp)(LD(Sg + (size_t)j * ATT_Q) - mn));
            ST(Sg + (size_t)j * ATT_Q, w);
            sum += w;
        }
        ts->l[g] = ts->l[g] * cv + sum;
        ts->m[g] = mn;
        for (int i = 0; i < ATT_W; i++) corr[g * ATT_W + i] = cv[i];
    }
    /* acc[i][:] = acc[i][:] * corr[i] + sum_j S[j][i] V[j][:]: per vector of W queries, a chunk
     * of W columns at a time (W accumulators), the block's V rows staying in L1 */
    for (int g = 0; g < G; g++) {
        float *ag = acc + (size_t)g * ATT_W * D;
        const float *cg = corr + g * ATT_W, *Sg = S + g * ATT_W;
        int c = 0;
        for (; c + ATT_W <= D; c += ATT_W) {
            VF o[ATT_W]; /* unrolled: W accumulators in registers */
#pragma GCC unroll 16
            for (int i = 0; i < ATT_W; i++) o[i] = LD(ag + (size_t)i * D + c) * cg[i];
            for (int j = 0; j < n; j++) {
                const VF v = LD(V + (size_t)j * D + c);
                const float *w = Sg + (size_t)j * ATT_Q;
#pragma GCC unroll 16
                for (int i = 0; i < ATT_W; i++) o[i] += w[i] * v;
            }
#pragma GCC unroll 16
            for (int i = 0; i < ATT_W; i++) ST(ag + (size_t)i * D + c, o[i]);
        }
        if (c < D) /* the columns past the last full chunk (D not a multiple of W) */
            for (int i = 0; i < ATT_W && g * ATT_W + i < ts->nq; i++) {
                float *ai = ag + (size_t)i * D;
                for (int d = c; d < D; d++) {
                    float o = ai[d] * cg[i];
                    for (int j = 0; j < n; j++) o += Sg[(size_t)j * ATT_Q + i] * V[(size_t)j * D + d];
                    ai[d] = o;
                }
            }
    }
}

/* nq >= 3 queries of one sequence (ascending positions), up to ATT_GROUP tiles of ATT_Q: each K/V
 * block is read (and widened) once and serves every tile of the group while it sits in L1; the
 * tiles' states (qT [D][ATT_Q], acc [ATT_Q][D] each) stay in L2. Padding lanes repeat a tile's
 * last query and are never stored. */
AI void AF(group)(const att_args *a, const int *toks, int nq, int h, float *scr) {
    const int D = a->D, bs = a->st->block_size, nt = (nq + ATT_Q - 1) / ATT_Q, kvh = att_kv_head(a, h);
    const float scale = sqrtf((float)D);
    const int32_t *bt = a->st->block_table + (size_t)a->st->seq[toks[0]] * a->st->max_blocks;
    const size_t tile_floats = 2 * (size_t)D * ATT_Q; /* qT then acc */
    float *S = scr + (size_t)nt * tile_floats, *Kf = S + (size_t)bs * ATT_Q, *Vf = Kf + (size_t)bs * D;
    AF(tstate) ts[ATT_GROUP];
    for (int t = 0; t < nt; t++) {
        AF(tstate) *x = &ts[t];
        x->toks = toks + t * ATT_Q;
        x->nq = nq - t * ATT_Q < ATT_Q ? nq - t * ATT_Q : ATT_Q;
        x->G = x->nq > ATT_W ? 2 : 1;
        x->P = a->st->pos[x->toks[x->nq - 1]] + 1;
        float *qT = scr + t * tile_floats, *acc = qT + (size_t)D * ATT_Q;
        for (int i = 0; i < x->G * ATT_W; i++) {
            const int tok = x->toks[i < x->nq ? i : x->nq - 1];
            x->posv[i / ATT_W][i % ATT_W] = a->st->pos[tok];
            att_load_q(a, tok, h, acc); /* acc as a staging row */
            for (int d = 0; d < D; d++) qT[(size_t)d * ATT_Q + i] = acc[d];
        }
        for (size_t i = 0; i < (size_t)x->G * ATT_W * D; i++) acc[i] = 0.0f;
        for (int g = 0; g < 2; g++) x->m[g] = AF(splat)(-INFINITY), x->l[g] = AF(splat)(0.0f);
    }
    const int P = ts[nt - 1].P;
    for (int p0 = 0; p0 < P; p0 += bs) {
        const int n = P - p0 < bs ? P - p0 : bs;
        AF(prefetch)(a, bt, p0 + bs, P, kvh);
        const float *K = AF(stage)(a, a->kc, bt[p0 / bs], n, kvh, Kf);
        const float *V = AF(stage)(a, a->vc, bt[p0 / bs], n, kvh, Vf);
        for (int t = 0; t < nt; t++) {
            if (ts[t].P <= p0) continue; /* an earlier tile: done */
            const int nt_keys = ts[t].P - p0 < n ? ts[t].P - p0 : n;
            float *qT = scr + t * tile_floats;
            AF(tile_block)(&ts[t], qT, qT + (size_t)D * ATT_Q, K, V, p0, nt_keys, D, scale, S);
        }
    }
    for (int t = 0; t < nt; t++) {
        const float *acc = scr + t * tile_floats + (size_t)D * ATT_Q;
        for (int i = 0; i < ts[t].nq; i++)
            AF(store_out)(a, ts[t].toks[i], h, acc + (size_t)i * D, ts[t].l[i / ATT_W][i % ATT_W]);
    }
}

ATT_TGT static void AF(att_item)(const att_args *a, const int *toks, int nq, int h, float *scr) {
    if (nq >= 3) AF(group)(a, toks, nq, h, scr);
    else
        for (int i = 0; i < nq; i++) AF(dot)(a, toks[i], h, scr);
}

#undef ATT_Q
#undef VF
#undef VI
#undef LD
#undef ST
#undef AI
#undef AF
#undef ATT_CAT
#undef ATT_CAT2
