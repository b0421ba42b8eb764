/* logits_stats on the device: per row of f32 logits [rows, ld], over columns < n_valid, the max,
 * the sum of exp(l - max), the top k (k <= 64; value descending, equal values to the lower
 * column) and the value at a target column. Only these rows * (3 + 2k) numbers cross to the
 * host, never the logits.
 *
 * One block per row. Top-k is a radix select: floats map to order-preserving 32-bit keys
 * (kernels/common/tp_logits.h: -0 folded onto +0, NaN below everything and never selected); four
 * 8-bit histogram passes find the key K* of the k-th largest value and how many elements equal
 * to K* are wanted; a last pass in column order takes every element above K* and the wanted
 * number of equal ones with the lowest columns (ballot prefix counts keep column order). The
 * k candidates are then ranked by (value desc, column asc). Rows are L2-resident across passes. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_internal.h"

#define LG_THREADS 512
#define LG_MAXK TPC_LG_MAXK

/* The key, the rank order and the NaN/inf rule are kernels/common/tp_logits.h (the CPU's). */
__device__ __forceinline__ uint32_t fkey(float f) { return tp_logit_key(f); }

/* res row: [mx, se, tgt, topv[k], topi[k] (int32 bits)] */
__global__ void __launch_bounds__(LG_THREADS)
logits_stats_kernel(const float *logits, int ld, int n_valid, int k, const int32_t *targets, float *res) {
    __shared__ float red[33];
    __shared__ uint32_t hist[256];
    __shared__ uint32_t s_prefix, s_kk;
    __shared__ float cv[LG_MAXK];
    __shared__ int ci[LG_MAXK];
    __shared__ int n_gt;
    __shared__ int wcount[LG_THREADS / 32];
    const int row = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const float *l = logits + (size_t)row * ld;
    float *out = res + (size_t)row * (3 + 2 * k);

    float m = -INFINITY, nn = 0.0f; /* max, count of non-NaN (exact in f32 below 2^24 columns) */
    for (int c = tid; c < n_valid; c += LG_THREADS) {
        const float v = l[c];
        if (v == v) {
            m = tp_logit_max(m, v);
            nn += 1.0f;
        }
    }
    m = tpc_block_max(m, red);
    nn = tpc_block_sum(nn, red);
    float se = 0.0f;
    for (int c = tid; c < n_valid; c += LG_THREADS) se += tp_logit_exp(l[c], m);
    se = tpc_block_sum(se, red);
    if (tid == 0) {
        out[0] = m;
        out[1] = se;
        const int tg = targets ? targets[row] : -1;
        out[2] = (tg >= 0 && tg < n_valid) ? l[tg] : __int_as_float(0x7fc00000);
    }
    const int k_eff = min(k, (int)nn);

    if (k_eff > 0) {
        uint32_t prefix = 0, mask = 0, kk = (uint32_t)k_eff;
        for (int shift = 24; shift >= 0; shift -= 8) {
            if (tid < 256) hist[tid] = 0;
            __syncthreads();
            for (int c0 = 0; c0 < n_valid; c0 += LG_THREADS) { /* uniform trip count: match_any below */
                const int c = c0 + tid;
                const uint32_t key = c < n_valid ? fkey(l[c]) : 0u;
                const bool ok = c < n_valid && (key & mask) == prefix;
                const uint32_t bin = (key >> shift) & 255u;
                const unsigned peers = __match_any_sync(0xffffffffu, ok ? bin : 0xffffffffu);
                if (ok && lane == __ffs(peers) - 1) atomicAdd(&hist[bin], (uint32_t)__popc(peers));
            }
            __syncthreads();
            if (warp == 0) { /* lane L holds bins 255-8L .. 248-8L; find the bin of the kk-th largest */
                uint32_t local = 0;
                for (int j = 0; j < 8; j++) local += hist[255 - 8 * lane - j];
                uint32_t cum = local;
                for (int o = 1; o < 32; o <<= 1) {
                    const uint32_t x = __shfl_up_sync(0xffffffffu, cum, o);
                    if (lane >= o) cum += x;
                }
                const unsigned hit = __ballot_sync(0xffffffffu, cum >= kk);
                if (lane == __ffs(hit) - 1) {
                    uint32_t before = cum - local;
                    for (int j = 0; j < 8; j++) {
                        const int bn = 255 - 8 * lane - j;
                        if (before + hist[bn] >= kk) {
                            s_prefix = prefix | ((uint32_t)bn << shift);
                            s_kk = kk - before;
                            break;
                        }
                        before += hist[bn];
                    }
                }
            }
            __syncthreads();
            prefix = s_prefix;
            kk = s_kk;
            mask |= 255u << shift;
        }
        /* prefix = K*, kk = number of elements equal to K* to take (lowest columns first) */
        const int n_above = k_eff - (int)kk;
        if (tid == 0) n_gt = 0;
        __syncthreads();
        int eq_base = 0;
        for (int c0 = 0; c0 < n_valid; c0 += LG_THREADS) {
            const int c = c0 + tid;
            const float v = c < n_valid ? l[c] : 0.0f;
            const uint32_t key = c < n_valid ? fkey(v) : 0u;
            if (c < n_valid && key > prefix) {
                const int slot = atomicAdd(&n_gt, 1);
                cv[slot] = v;
                ci[slot] = c;
            }
            const bool eq = c < n_valid && key == prefix;
            const unsigned bal = __ballot_sync(0xffffffffu, eq);
            if (lane == 0) wcount[warp] = __popc(bal);
            __syncthreads();
            const int gt_so_far = n_gt; /* every atomicAdd of this chunk happened before the barrier */
            int before = eq_base, total = 0;
            for (int w = 0; w < LG_THREADS / 32; w++) {
                if (w < warp) before += wcount[w];
                total += wcount[w];
            }
            const int rank = before + __popc(bal & ((1u << lane) - 1u));
            if (eq && rank < (int)kk) {
                cv[n_above + rank] = v;
                ci[n_above + rank] = c;
            }
            eq_base += total;
            __syncthreads(); /* wcount is rewritten next chunk */
            if (eq_base >= (int)kk && gt_so_far == n_above) break; /* same decision in every thread */
        }
        __syncthreads();
        if (tid < k_eff) { /* rank among the k candidates: value desc, column asc */
            const float v = cv[tid];
            const int c = ci[tid];
            int r = 0;
            for (int j = 0; j < k_eff; j++) r += tp_logit_before(cv[j], ci[j], v, c);
            out[3 + r] = v;
            out[3 + k + r] = __int_as_float(c);
        }
    }
    for (int j = k_eff + tid; j < k; j += LG_THREADS) {
        out[3 + j] = -INFINITY;
        out[3 + k + j] = __int_as_float(-1);
    }
}

void tpc_logits_stats(tp_backend *b, const float *logits, int rows, int ld, int n_valid, int k,
                      const int32_t *targets_host, float *mx, float *se, float *topv, int32_t *topi, float *tgt_val) {
    tp_cuda *c = tpc(b);
    tpc_no_capture(c, "logits_stats");
    if (rows <= 0) return;
    if (k < 0 || k > LG_MAXK) tp_die("cuda logits_stats: k = %d, must be 0..%d", k, LG_MAXK);
    if (n_valid > ld || n_valid < 0) tp_die("internal: logits_stats n_valid %d > ld %d", n_valid, ld);
    const size_t per_row = (size_t)(3 + 2 * k) * sizeof(float);
    int chunk = 0;
    const size_t need = tpc_logits_buf_bytes(rows, k, &chunk); /* cuda_plan.c: the memory plan's size */
    if (need > c->lg_bytes && c->scratch_reserved)
        tp_die("cuda logits_stats: %d rows of top-%d need %zu bytes but the memory plan reserved %zu for %d rows of "
               "top-%d (rank %d)", rows, k, need, c->lg_bytes, c->limits.max_rows, c->limits.max_k, c->rank);
    if (need > c->lg_bytes) { /* no plan (op tests): grow */
        if (c->lg_dev) CUDA_CHECK(cudaFree(c->lg_dev));
        c->lg_dev = NULL;
        CUDA_CHECK(cudaMalloc(&c->lg_dev, need));
        c->lg_bytes = need;
    }
    float *res_dev = (float *)c->lg_dev;
    int32_t *tg_dev = (int32_t *)((char *)c->lg_dev + (size_t)chunk * per_row);
    float *res = (float *)malloc((size_t)chunk * per_row);
    if (!res) tp_die("out of host memory in logits_stats (%zu bytes)", (size_t)chunk * per_row);
    for (int r0 = 0; r0 < rows; r0 += chunk) {
        const int nr = rows - r0 < chunk ? rows - r0 : chunk;
        if (targets_host) b->to_device(b, tg_dev, targets_host + r0, (size_t)nr * sizeof(int32_t));
        logits_stats_kernel<<<nr, LG_THREADS, 0, c->stream>>>(logits + (size_t)r0 * ld, ld, n_valid, k,
                                                              targets_host ? tg_dev : NULL, res_dev);
        CUDA_CHECK_LAUNCH();
        b->to_host(b, res, res_dev, (size_t)nr * per_row);
        for (int r = 0; r < nr; r++) {
            const float *o = res + (size_t)r * (3 + 2 * k);
            const size_t R = (size_t)(r0 + r);
            if (mx) mx[R] = o[0];
            if (se) se[R] = o[1];
            if (tgt_val) tgt_val[R] = o[2];
            if (topv) memcpy(topv + R * k, o + 3, (size_t)k * sizeof(float));
            if (topi) memcpy(topi + R * k, o + 3 + k, (size_t)k * sizeof(int32_t));
        }
    }
    free(res);
}
