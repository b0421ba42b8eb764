/* Rotary + KV-cache write, and attention over the paged KV cache (layout in kernels/backend.h,
 * tp_attn_shape: qkv rows [Hl*D q | Hkl*D k | Hkl*D v]; caches [n_blocks, Hkl, bs, D], head-
 * contiguous: position p of sequence s, KV head g at tp_kv_pos_row(block_table[s], p, g, ...),
 * kernels/common/tp_kv.h, the CPU backend's index too; query head h reads KV head
 * h / (Hl / Hkl), so Hkl == Hl is CodeGen's multi-head attention and Hkl < Hl grouped-query).
 *
 * Numerics as HF in f32: the rotary table, angles and pair rotation (GPT-J pairs or LLaMA's
 * rotate-half) are kernels/common/tp_rotary.h, as on the CPU (inv_freq made on the host with the
 * shape's theta, accurate sincosf); scores q.k divided by sqrtf(D); softmax with the max
 * subtracted, in f32; P.V accumulated in f32. Every block works for one query head; with
 * Hkl < Hl the Hl / Hkl blocks of a KV head each read its K/V (the repeats mostly from L2).
 *
 * Two attention kernels, chosen per step by its shape:
 *  - decode (T <= 2 * n_seqs or T <= 8: mostly one new token per sequence): one block per
 *    (token, head, split) in the flash-decoding style. The context is cut into splits of `chunk`
 *    positions so a long context spreads over many multiprocessors; each block writes its partial
 *    (unnormalised output, max, sum of exps) and a combine kernel merges them. Lanes split D in
 *    16-byte vectors; a group of G lanes owns one position, so K and V rows stream coalesced.
 *  - prefill (longer chunks of one sequence): a block takes a tile of PF_QT consecutive tokens
 *    and one head, stages K and V in shared memory PF_KC positions at a time, and keeps an online
 *    softmax per query, so each K/V row read serves the whole tile. Tokens of several sequences in
 *    one tile (a mixed batch) are handled one sequence at a time.
 * Under graph capture the split count is sized for the block table's capacity (max_blocks * bs),
 * not this step's max_pos, so a captured decode step stays valid as the context grows. */
#include "kernels/cuda/cuda_internal.h"

#define ATT_THREADS 128
#define ATT_U 4 /* positions per group in flight */
#define PF_QT 16
#define PF_KC 32
#define PF_THREADS 128
#define PF_DMAX 256
#define ROT_MAX_HALF 128

/* ---- rotary + cache write ----
 * One block per token. The block takes sin/cos of its R/2 angles once into shared memory (the
 * same for every head), rotates the style's pairs of its Hl q heads and Hkl k heads in place (the
 * Hl + Hkl heads from the start of the row), and after a barrier copies the rotated k and the v of
 * its Hkl KV heads into the token's cache slot. */
struct rot_freq {
    float f[ROT_MAX_HALF];
};

template <typename T>
__global__ void rotary_kv_kernel(T *qkv, T *kc, T *vc, const int32_t *pos, const int32_t *seq, const int32_t *bt,
                                 int max_blocks, int bs, int Hl, int Hkl, int D, int R, int style, rot_freq inv) {
    __shared__ float s_cs[ROT_MAX_HALF], s_sn[ROT_MAX_HALF];
    const int t = blockIdx.x, p = pos[t], half = R / 2;
    const size_t QD = (size_t)Hl * D, KD = (size_t)Hkl * D;
    T *q = qkv + (size_t)t * (QD + 2 * KD), *k = q + QD, *v = k + KD;
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        float sn, cs;
        tp_rope_sincos(tp_rope_angle(p, inv.f[i]), &sn, &cs);
        s_sn[i] = sn;
        s_cs[i] = cs;
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < (Hl + Hkl) * half; idx += blockDim.x) {
        const int h = idx / half, i = idx % half;
        T *x = q + (size_t)h * D; /* h < Hl: a q head; else k head h - Hl */
        const int a = tp_rope_pair_a(style, i), b = tp_rope_pair_b(style, i, R);
        float x0 = tpc_f(x[a]), x1 = tpc_f(x[b]);
        tp_rope_rotate(&x0, &x1, s_cs[i], s_sn[i]);
        x[a] = tpc_from<T>(x0);
        x[b] = tpc_from<T>(x1);
    }
    __syncthreads(); /* k rotated by other threads of the block, now visible */
    const int32_t *btr = bt + (size_t)seq[t] * max_blocks;
    for (size_t e = threadIdx.x; e < KD; e += blockDim.x) {
        const size_t at = tp_kv_pos_row(btr, p, (int)(e / D), Hkl, bs, D) + e % D;
        kc[at] = k[e];
        vc[at] = v[e];
    }
}

/* The head geometry every kernel here needs, checked once (tp_attn_shape, kernels/backend.h). */
static void check_heads(const char *op, const tp_attn_shape *as) {
    if (as->n_heads <= 0 || as->n_kv_heads <= 0 || as->n_heads % as->n_kv_heads != 0)
        tp_die("cuda %s: %d query heads over %d KV heads: the KV heads must divide the query heads", op,
               as->n_heads, as->n_kv_heads);
    if (as->rope_style != TP_ROPE_GPTJ && as->rope_style != TP_ROPE_NEOX)
        tp_die("cuda %s: unknown rotary style %d", op, (int)as->rope_style);
}

void tpc_rotary_kv_write(tp_backend *b, void *qkv, void *k_cache, void *v_cache, const tp_step *st,
                         const tp_attn_shape *as) {
    const int Hl = as->n_heads, Hkl = as->n_kv_heads, D = as->head_dim, R = as->rotary_dim;
    tp_cuda *c = tpc(b);
    const int T = st->n_tokens;
    if (T <= 0 || Hl <= 0 || D <= 0) return;
    check_heads("rotary", as);
    if (R > D || R < 0 || R % 2 != 0 || R / 2 > ROT_MAX_HALF)
        tp_die("cuda rotary: rotary_dim %d must be even and in 0..min(head_dim %d, %d)", R, D, 2 * ROT_MAX_HALF);
    rot_freq inv;
    for (int i = 0; i < R / 2; i++) inv.f[i] = tp_rope_inv_freq(i, R, as->rope_theta);
    const int work = (Hl + Hkl) * (R / 2) > Hkl * D ? (Hl + Hkl) * (R / 2) : Hkl * D;
    const int threads = work >= 256 ? 256 : 128;
    if (b->act == TP_F16)
        rotary_kv_kernel<__half><<<T, threads, 0, c->stream>>>((__half *)qkv, (__half *)k_cache, (__half *)v_cache,
                                                               st->pos, st->seq, st->block_table, st->max_blocks,
                                                               st->block_size, Hl, Hkl, D, R, (int)as->rope_style, inv);
    else
        rotary_kv_kernel<__nv_bfloat16><<<T, threads, 0, c->stream>>>(
            (__nv_bfloat16 *)qkv, (__nv_bfloat16 *)k_cache, (__nv_bfloat16 *)v_cache, st->pos, st->seq,
            st->block_table, st->max_blocks, st->block_size, Hl, Hkl, D, R, (int)as->rope_style, inv);
    CUDA_CHECK_LAUNCH();
}

/* ---- decode attention ---- */

/* VEC elements at p -> f32. VEC 8: one 16-byte load; VEC 2: one 4-byte load. */
template <int VEC, typename T> struct vecld;
template <typename T> struct vecld<8, T> {
    typedef uint4 raw;
    static __device__ __forceinline__ raw load(const T *p) { return *reinterpret_cast<const uint4 *>(p); }
    static __device__ __forceinline__ raw zero() { return make_uint4(0, 0, 0, 0); }
    static __device__ __forceinline__ void unpack(const raw &r, float *f) { tpc_unpack8(r, f, T()); }
};
template <typename T> struct vecld<2, T> {
    typedef uint32_t raw;
    static __device__ __forceinline__ raw load(const T *p) { return *reinterpret_cast<const uint32_t *>(p); }
    static __device__ __forceinline__ raw zero() { return 0u; }
    static __device__ __forceinline__ void unpack(const raw &r, float *f) {
        const T *h = reinterpret_cast<const T *>(&r);
        f[0] = tpc_f(h[0]);
        f[1] = tpc_f(h[1]);
    }
};

/* grid (n_splits, Hl, T), ATT_THREADS threads; G lanes per position (a power of two <= 32), NG =
 * ATT_THREADS / G positions at a time. Lane li of a group owns the vectors li + v*G, v < NV.
 * Dynamic shared memory: chunk scores + 64 reduction slots + NG * D partial outputs.
 * Block (s, h, t) is query head h; it reads KV head h / (Hl / Hkl). Its partials and output are
 * per query head ([T, Hl, ...]), so the combine kernel knows nothing of KV heads. */
template <typename T, int VEC, int NV>
__global__ void __launch_bounds__(ATT_THREADS)
attn_decode_kernel(T *out, float *part, const T *qkv, const T *kc, const T *vc, const int32_t *pos,
                   const int32_t *seq, const int32_t *bt, int max_blocks, int bs, int Hl, int Hkl, int D, int G,
                   int chunk, int n_splits, float scale) {
    typedef vecld<VEC, T> L;
    extern __shared__ float sm[];
    float *s_p = sm, *red = sm + chunk, *s_o = red + 64;
    const int s = blockIdx.x, h = blockIdx.y, t = blockIdx.z;
    const int P = pos[t] + 1, start = s * chunk;
    const size_t HD = (size_t)Hl * D, KD = (size_t)Hkl * D, QROW = HD + 2 * KD;
    float *pp = part + (((size_t)t * Hl + h) * n_splits + s) * (size_t)(D + 2);
    if (start >= P) { /* this split is past the token's context */
        if (threadIdx.x == 0) {
            pp[D] = -INFINITY;
            pp[D + 1] = 0.0f;
        }
        return;
    }
    const int end = min(start + chunk, P), n = end - start;
    const int NG = ATT_THREADS / G, g = threadIdx.x / G, li = threadIdx.x % G, nvec = D / VEC;
    const int32_t *btr = bt + (size_t)seq[t] * max_blocks;
    const size_t hoff = (size_t)h * D;
    const int kvh = h / (Hl / Hkl);

    float q[NV][VEC];
    const T *qp = qkv + (size_t)t * QROW + hoff;
#pragma unroll
    for (int v = 0; v < NV; v++) {
        const int vi = li + v * G;
        typename L::raw r = vi < nvec ? L::load(qp + vi * VEC) : L::zero();
        L::unpack(r, q[v]);
    }

    /* scores: positions p0 + u*NG + g; loop bounds are uniform over the block (shuffles inside) */
    for (int p0 = start; p0 < end; p0 += NG * ATT_U) {
        typename L::raw kr[ATT_U][NV];
#pragma unroll
        for (int u = 0; u < ATT_U; u++) {
            const int p = p0 + u * NG + g;
            const T *kp = NULL;
            if (p < end) kp = kc + tp_kv_pos_row(btr, p, kvh, Hkl, bs, D);
#pragma unroll
            for (int v = 0; v < NV; v++) {
                const int vi = li + v * G;
                kr[u][v] = (p < end && vi < nvec) ? L::load(kp + vi * VEC) : L::zero();
            }
        }
#pragma unroll
        for (int u = 0; u < ATT_U; u++) {
            float d = 0.0f;
#pragma unroll
            for (int v = 0; v < NV; v++) {
                float kf[VEC];
                L::unpack(kr[u][v], kf);
#pragma unroll
                for (int j = 0; j < VEC; j++) d = fmaf(q[v][j], kf[j], d);
            }
            for (int o = G >> 1; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
            const int p = p0 + u * NG + g;
            if (li == 0 && p < end) s_p[p - start] = d / scale;
        }
    }
    __syncthreads();
    float m = -INFINITY;
    for (int i = threadIdx.x; i < n; i += ATT_THREADS) m = fmaxf(m, s_p[i]);
    m = tpc_block_max(m, red);
    float l = 0.0f;
    for (int i = threadIdx.x; i < n; i += ATT_THREADS) {
        const float e = expf(s_p[i] - m);
        s_p[i] = e;
        l += e;
    }
    l = tpc_block_sum(l, red); /* its barriers also publish the exps */

    float acc[NV][VEC];
#pragma unroll
    for (int v = 0; v < NV; v++)
#pragma unroll
        for (int j = 0; j < VEC; j++) acc[v][j] = 0.0f;
    for (int p0 = start; p0 < end; p0 += NG * ATT_U) {
        typename L::raw vr[ATT_U][NV];
#pragma unroll
        for (int u = 0; u < ATT_U; u++) {
            const int p = p0 + u * NG + g;
            const T *vp = NULL;
            if (p < end) vp = vc + tp_kv_pos_row(btr, p, kvh, Hkl, bs, D);
#pragma unroll
            for (int v = 0; v < NV; v++) {
                const int vi = li + v * G;
                vr[u][v] = (p < end && vi < nvec) ? L::load(vp + vi * VEC) : L::zero();
            }
        }
#pragma unroll
        for (int u = 0; u < ATT_U; u++) {
            const int p = p0 + u * NG + g;
            const float w = p < end ? s_p[p - start] : 0.0f;
#pragma unroll
            for (int v = 0; v < NV; v++) {
                float vf[VEC];
                L::unpack(vr[u][v], vf);
#pragma unroll
                for (int j = 0; j < VEC; j++) acc[v][j] = fmaf(w, vf[j], acc[v][j]);
            }
        }
    }
#pragma unroll
    for (int v = 0; v < NV; v++) {
        const int vi = li + v * G;
        if (vi < nvec)
#pragma unroll
            for (int j = 0; j < VEC; j++) s_o[g * D + vi * VEC + j] = acc[v][j];
    }
    __syncthreads();
    for (int e = threadIdx.x; e < D; e += ATT_THREADS) {
        float o = 0.0f;
        for (int gg = 0; gg < NG; gg++) o += s_o[gg * D + e];
        if (n_splits == 1) out[(size_t)t * HD + hoff + e] = tpc_from<T>(o / l);
        else pp[e] = o;
    }
    if (n_splits > 1 && threadIdx.x == 0) {
        pp[D] = m;
        pp[D + 1] = l;
    }
}

/* grid (Hl, T): out = sum_s e^(m_s - M) o_s / sum_s e^(m_s - M) l_s. Split 0 is never empty. */
template <typename T>
__global__ void attn_combine_kernel(T *out, const float *part, int Hl, int D, int n_splits) {
    const int h = blockIdx.x, t = blockIdx.y;
    const float *pp = part + ((size_t)t * Hl + h) * n_splits * (size_t)(D + 2);
    float M = -INFINITY;
    for (int s = 0; s < n_splits; s++) M = fmaxf(M, pp[(size_t)s * (D + 2) + D]);
    float L = 0.0f;
    for (int s = 0; s < n_splits; s++) {
        const float *ps = pp + (size_t)s * (D + 2);
        L += ps[D + 1] == 0.0f ? 0.0f : expf(ps[D] - M) * ps[D + 1];
    }
    for (int e = threadIdx.x; e < D; e += blockDim.x) {
        float o = 0.0f;
        for (int s = 0; s < n_splits; s++) {
            const float *ps = pp + (size_t)s * (D + 2);
            if (ps[D + 1] != 0.0f) o += expf(ps[D] - M) * ps[e];
        }
        out[((size_t)t * Hl + h) * D + e] = tpc_from<T>(o / L);
    }
}

/* ---- prefill attention ----
 * grid (ceil(T / PF_QT), Hl), PF_THREADS threads; block (x, h) is query head h and reads KV head
 * h / (Hl / Hkl). Shared: q [QT][D], K or V chunk [KC][D+1]
 * (odd row stride: lanes reading 32 different rows hit 32 banks), probabilities [QT][KC+1].
 * Thread (oq = tid/8, od = tid%8) owns output dims od + 8j, j < NJ, of query oq (D <= 8 NJ). */
template <typename T, int NJ>
__global__ void __launch_bounds__(PF_THREADS)
attn_prefill_kernel(T *out, const T *qkv, const T *kc, const T *vc, const int32_t *pos, const int32_t *seq,
                    const int32_t *bt, int max_blocks, int bs, int Hl, int Hkl, int D, int T_, float scale) {
    extern __shared__ float sm[];
    const int Dp = D + 1, SP = PF_KC + 1;
    float *q_s = sm, *kv_s = q_s + PF_QT * D, *s_s = kv_s + PF_KC * Dp;
    __shared__ int t_pos[PF_QT], t_seq[PF_QT], t_done[PF_QT];
    __shared__ float m_s[PF_QT], l_s[PF_QT], corr_s[PF_QT];
    __shared__ int cur_seq, cur_max;
    const int t0 = blockIdx.x * PF_QT, h = blockIdx.y, tid = threadIdx.x;
    const size_t HD = (size_t)Hl * D, KD = (size_t)Hkl * D, QROW = HD + 2 * KD;
    const size_t hoff = (size_t)h * D;
    const int kvh = h / (Hl / Hkl);

    if (tid < PF_QT) {
        const int t = t0 + tid;
        t_pos[tid] = t < T_ ? pos[t] : -1;
        t_seq[tid] = t < T_ ? seq[t] : -1;
        t_done[tid] = t >= T_;
        m_s[tid] = -INFINITY;
        l_s[tid] = 0.0f;
    }
    for (int i = tid; i < PF_QT * D; i += PF_THREADS) {
        const int qi = i / D, d = i % D, t = t0 + qi;
        q_s[i] = t < T_ ? tpc_f(qkv[(size_t)t * QROW + hoff + d]) : 0.0f;
    }
    const int oq = tid >> 3, od = tid & 7, w = tid >> 5, lane = tid & 31;
    float o[NJ];
#pragma unroll
    for (int j = 0; j < NJ; j++) o[j] = 0.0f;
    __syncthreads();

    for (;;) {
        if (tid == 0) { /* next sequence with queries left in this tile */
            cur_seq = -1;
            cur_max = -1;
            for (int i = 0; i < PF_QT; i++)
                if (!t_done[i] && (cur_seq < 0 || t_seq[i] == cur_seq)) {
                    cur_seq = t_seq[i];
                    cur_max = max(cur_max, t_pos[i]);
                }
        }
        __syncthreads();
        if (cur_seq < 0) break;
        const int cs = cur_seq, cmax = cur_max;
        const int32_t *btr = bt + (size_t)cs * max_blocks;
        for (int kp0 = 0; kp0 <= cmax; kp0 += PF_KC) {
            /* K chunk -> kv_s (rows past cmax are zero; they are masked) */
            for (int r = 0; r < PF_KC; r++) {
                const int p = kp0 + r;
                const T *src = p <= cmax ? kc + tp_kv_pos_row(btr, p, kvh, Hkl, bs, D) : NULL;
                for (int d = tid; d < D; d += PF_THREADS) kv_s[r * Dp + d] = src ? tpc_f(src[d]) : 0.0f;
            }
            __syncthreads();
            /* scores: warp w owns queries 4w..4w+3, lane = key */
            float sc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int d = 0; d < D; d++) {
                const float kv = kv_s[lane * Dp + d];
#pragma unroll
                for (int r = 0; r < 4; r++) sc[r] = fmaf(q_s[(4 * w + r) * D + d], kv, sc[r]);
            }
            const int p = kp0 + lane;
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const int qi = 4 * w + r;
                const bool act = !t_done[qi] && t_seq[qi] == cs && p <= t_pos[qi];
                const float sv = act ? sc[r] / scale : -INFINITY;
                const float m_old = m_s[qi], m_new = fmaxf(m_old, tpc_warp_max(sv));
                const float e = act ? expf(sv - m_new) : 0.0f;
                const float rs = tpc_warp_sum(e);
                s_s[qi * SP + lane] = e;
                if (lane == 0) {
                    const float corr = m_new == -INFINITY ? 1.0f : expf(m_old - m_new);
                    corr_s[qi] = corr;
                    l_s[qi] = l_s[qi] * corr + rs;
                    m_s[qi] = m_new;
                }
            }
            __syncthreads();
            /* V chunk -> kv_s */
            for (int r = 0; r < PF_KC; r++) {
                const int pv = kp0 + r;
                const T *src = pv <= cmax ? vc + tp_kv_pos_row(btr, pv, kvh, Hkl, bs, D) : NULL;
                for (int d = tid; d < D; d += PF_THREADS) kv_s[r * Dp + d] = src ? tpc_f(src[d]) : 0.0f;
            }
            __syncthreads();
            const float corr = corr_s[oq];
#pragma unroll
            for (int j = 0; j < NJ; j++) o[j] *= corr;
            for (int r = 0; r < PF_KC; r++) {
                const float pr = s_s[oq * SP + r];
#pragma unroll
                for (int j = 0; j < NJ; j++) {
                    const int d = od + 8 * j;
                    if (d < D) o[j] = fmaf(pr, kv_s[r * Dp + d], o[j]);
                }
            }
            __syncthreads(); /* kv_s, s_s and corr_s are rewritten next chunk */
        }
        if (tid < PF_QT && !t_done[tid] && t_seq[tid] == cs) t_done[tid] = 1;
        __syncthreads();
    }
    const int t = t0 + oq;
    if (t < T_) {
        const float inv_l = 1.0f / l_s[oq];
#pragma unroll
        for (int j = 0; j < NJ; j++) {
            const int d = od + 8 * j;
            if (d < D) out[(size_t)t * HD + hoff + d] = tpc_from<T>(o[j] * inv_l);
        }
    }
}

static size_t prefill_smem(int D) {
    return ((size_t)PF_QT * D + (size_t)PF_KC * (D + 1) + (size_t)PF_QT * (PF_KC + 1)) * sizeof(float);
}

void tpc_attention_init(tp_cuda *c) {
    (void)c;
    const int bytes = (int)prefill_smem(PF_DMAX); /* ~51 KB at D = 256: above the 48 KB default */
    CUDA_CHECK(cudaFuncSetAttribute(attn_prefill_kernel<__half, 32>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    bytes));
    CUDA_CHECK(cudaFuncSetAttribute(attn_prefill_kernel<__nv_bfloat16, 32>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

static int pow2_at_least(int x) {
    int p = 1;
    while (p < x) p <<= 1;
    return p;
}

template <typename T>
static void attention_t(tp_cuda *c, T *out, const T *qkv, const T *kc, const T *vc, const tp_step *st, int Hl, int Hkl,
                        int D) {
    const int T_ = st->n_tokens;
    const float scale = sqrtf((float)D);
    const bool decode = tpc_attn_is_decode(T_, st->n_seqs); /* cuda_plan.c: the memory plan uses it too */
    if (!decode) {
        dim3 grid((T_ + PF_QT - 1) / PF_QT, Hl);
        const size_t smem = prefill_smem(D);
#define PREFILL(NJ)                                                                                              \
    attn_prefill_kernel<T, NJ><<<grid, PF_THREADS, smem, c->stream>>>(out, qkv, kc, vc, st->pos, st->seq,          \
                                                                       st->block_table, st->max_blocks,            \
                                                                       st->block_size, Hl, Hkl, D, T_, scale)
        if (D <= 32) PREFILL(4);
        else if (D <= 64) PREFILL(8);
        else if (D <= 128) PREFILL(16);
        else PREFILL(32);
#undef PREFILL
        CUDA_CHECK_LAUNCH();
        return;
    }
    /* context bound for sizing the splits: this step's, or the table's capacity under capture */
    const long ctx = c->capturing ? (long)st->max_blocks * st->block_size : (long)st->max_pos + 1;
    int chunk = 256;
    const int n_splits = tpc_attn_splits(ctx, T_, Hl, c->sm_count, &chunk);
    const uintptr_t al = (uintptr_t)qkv | (uintptr_t)kc | (uintptr_t)vc;
    if (al & 3u) tp_die("cuda attention: qkv and the KV caches must be 4-byte aligned");
    const bool vec8 = D % 8 == 0 && (al & 15u) == 0;
    const int nv = vec8 ? 1 : 4, nvec = vec8 ? D / 8 : D / 2;
    const int G = pow2_at_least((nvec + nv - 1) / nv);
    if (G > 32) tp_die("internal: attention G %d", G);
    float *part = n_splits > 1 ? tpc_attn_part(c, tpc_attn_part_bytes(T_, Hl, D, n_splits)) : NULL;
    const size_t smem = ((size_t)chunk + 64 + (size_t)(ATT_THREADS / G) * D) * sizeof(float);
    dim3 grid(n_splits, Hl, T_);
    if (vec8)
        attn_decode_kernel<T, 8, 1><<<grid, ATT_THREADS, smem, c->stream>>>(
            out, part, qkv, kc, vc, st->pos, st->seq, st->block_table, st->max_blocks, st->block_size, Hl, Hkl, D,
            G, chunk, n_splits, scale);
    else
        attn_decode_kernel<T, 2, 4><<<grid, ATT_THREADS, smem, c->stream>>>(
            out, part, qkv, kc, vc, st->pos, st->seq, st->block_table, st->max_blocks, st->block_size, Hl, Hkl, D,
            G, chunk, n_splits, scale);
    CUDA_CHECK_LAUNCH();
    if (n_splits > 1) {
        attn_combine_kernel<T><<<dim3(Hl, T_), 128, 0, c->stream>>>(out, part, Hl, D, n_splits);
        CUDA_CHECK_LAUNCH();
    }
}

void tpc_attention(tp_backend *b, void *out, const void *qkv, const void *k_cache, const void *v_cache,
                   const tp_step *st, const tp_attn_shape *as) {
    const int Hl = as->n_heads, Hkl = as->n_kv_heads, D = as->head_dim;
    if (st->n_tokens <= 0 || Hl <= 0) return;
    check_heads("attention", as);
    if (D <= 0 || D > PF_DMAX || D % 2 != 0)
        tp_die("cuda attention: head_dim %d is not supported (needs an even head_dim <= %d)", D, PF_DMAX);
    tp_cuda *c = tpc(b);
    if (b->act == TP_F16)
        attention_t<__half>(c, (__half *)out, (const __half *)qkv, (const __half *)k_cache, (const __half *)v_cache, st,
                            Hl, Hkl, D);
    else
        attention_t<__nv_bfloat16>(c, (__nv_bfloat16 *)out, (const __nv_bfloat16 *)qkv,
                                   (const __nv_bfloat16 *)k_cache, (const __nv_bfloat16 *)v_cache, st, Hl, Hkl, D);
}
