/* Per-row logits statistics for sampling (logits_stats), shared by both backends: what counts
 * as the max, how the top k are ordered, and what NaN and inf do.
 *
 * Rule (over the valid columns c < n_valid of a row):
 *  - max: the largest non-NaN value; -inf when there is none.
 *  - top k: non-NaN values only, value descending; equal values (and -0 / +0, which compare
 *    equal) go to the lower column first. +inf and -inf are ordinary values (+inf ranks first,
 *    -inf last). Missing entries (fewer than k non-NaN values) are value -inf, index -1, after
 *    every real entry. NaN is never selected.
 *  - sum of exps: sum of exp(l - max) over every valid column, NaN included. It is therefore NaN
 *    when the row holds a NaN, when max is +inf (inf - inf), or when every value is -inf; finite
 *    and >= 1 otherwise.
 *  - So a row can be sampled exactly when tp_logits_row_ok(max, sum) (both finite). The sampler
 *    turns any other row into a per-request error; kernels never clamp or repair logits.
 * The CPU backend scans a row once with tp_logit_max / tp_topk_push; the CUDA backend does a
 * radix select on tp_logit_key and ranks its k candidates with tp_logit_before. Both give the
 * same (value, column) lists; tests/gpu_math/test_gpu_math.c checks that on ties, -0/+0, +-inf, NaN. */
#ifndef TPGEN_TP_LOGITS_H
#define TPGEN_TP_LOGITS_H

#include "kernels/common/tp_act.h"
#include "kernels/common/tp_hd.h"

/* Order-preserving key: a > b (as floats, neither NaN) iff key(a) > key(b); -0 and +0 share a key;
 * NaN maps to 0, below every other key (-inf's key is 0x007fffff). */
TP_HD uint32_t tp_logit_key(float f) {
    if (f != f) return 0u;
    const uint32_t u = f == 0.0f ? 0u : tp_f32_bits(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* 1 when (va, column ca) ranks before (vb, cb) in a top-k list; never for a NaN value. */
TP_HD int tp_logit_before(float va, int ca, float vb, int cb) { return va > vb || (va == vb && ca < cb); }

/* Running max that skips NaN (every comparison with NaN is false). */
TP_HD float tp_logit_max(float m, float v) { return v > m ? v : m; }

/* One term of the sum of exps (NaN for a NaN logit; 0 for -inf below a finite max), by tp_expf
 * (tp_act.h): the same bits on both backends, and a CPU loop of it is a vector loop (the C
 * library's expf is a call per element: a batch-1 row of 51,200 logits took 0.20 ms on a 2-core
 * Zen 5, 0.13 cut into parts over the threads, 0.05 with this too). */
TP_HD float tp_logit_exp(float v, float mx) { return tp_expf(v - mx); }

/* A row can be sampled: its max and sum of exps are finite. */
TP_HD int tp_logits_row_ok(float mx, float se) { return mx - mx == 0.0f && se - se == 0.0f; }

/* Insert (v, c) into the sorted list tv/ti of length *len (capacity k > 0), columns arriving in
 * increasing order: an equal value never displaces an earlier column, it goes after it. NaN is
 * skipped. */
TP_HD void tp_topk_push(float *tv, int32_t *ti, int *len, int k, float v, int32_t c) {
    if (v != v) return;
    int n = *len;
    if (n == k) {
        if (!(v > tv[k - 1])) return;
        n = k - 1; /* drop the last */
    }
    int j = n;
    while (j > 0 && v > tv[j - 1]) {
        tv[j] = tv[j - 1];
        ti[j] = ti[j - 1];
        j--;
    }
    tv[j] = v;
    ti[j] = c;
    *len = n + 1;
}

#endif
