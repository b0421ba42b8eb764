/* Per-row statistics of f32 logits [rows, ld] over columns < n_valid: max, sum of exp(l - max),
 * the top k (value descending, ties to the lower column) and the value at a target column.
 * The rule for ties, NaN and inf is kernels/common/tp_logits.h, shared with the CUDA backend:
 * NaN is never selected and makes the sum NaN; missing entries (fewer than k non-NaN values) are
 * value -inf, index -1.
 *
 * A row is cut into parts of consecutive columns when there are fewer rows than threads (batch
 * 1: one row of 51,200 logits was a serial pass on one thread while the others waited, 0.2 ms a
 * decode step on a 2-core Zen 5, 3% of an int4 step; perf). Each part is one pass for its max and
 * top k (an insertion list) and one for its exp sum (in double, a vector loop); the parts are merged
 * in column order: the max of their maxima, their lists pushed again part after part (a part's
 * columns are all below the next part's, so tp_topk_push's tie rule gives one scan's list), the
 * sums added in order. One part (rows >= threads, short rows) is the single scan exactly. */
#include <math.h>
#include <stdlib.h>

#include "util/log.h"
#include "kernels/common/tp_logits.h"
#include "kernels/cpu/cpu_internal.h"

#define LG_PART_MIN 8192 /* columns a part at least */

/* The columns [*c0, *c1) of work item it (part it % parts of its row, per columns a part). */
static inline void part_cols(int it, int parts, int per, int n_valid, int *c0, int *c1) {
    *c0 = it % parts * per;
    *c1 = *c0 + per < n_valid ? *c0 + per : n_valid;
}

/* Max and top k of columns [c0, c1) of l: tv / ti (k entries, *len of them filled). */
static float scan_part(const float *l, int c0, int c1, int k, float *tv, int32_t *ti, int *len) {
    float m = -INFINITY;
    *len = 0;
    for (int c = c0; c < c1; c++) {
        const float v = l[c];
        m = tp_logit_max(m, v);
        if (k > 0 && (*len < k || v > tv[k - 1])) tp_topk_push(tv, ti, len, k, v, c);
    }
    return m;
}

/* The sum of exp(l[c] - m) over [c0, c1) in double: a vector loop (tp_expf), partial sums per
 * lane (as cpu_rmsnorm's sum of squares). */
CPU_SIMD_CLONES static double cpu_logits_exp_sum(const float *l, int c0, int c1, float m) {
    double s = 0.0;
    #pragma omp simd reduction(+ : s)
    for (int c = c0; c < c1; c++) s += (double)tp_logit_exp(l[c], m);
    return s;
}

void cpu_logits_stats(tp_backend *b, const float *logits, int rows, int ld, int n_valid, int k,
                      const int32_t *targets_host, float *mx, float *se, float *topv, int32_t *topi,
                      float *tgt_val) {
    const int nt = cpu_threads(b), kk = topv && topi ? k : 0;
    int parts = rows < nt ? nt / rows : 1;
    if (parts > n_valid / LG_PART_MIN) parts = n_valid / LG_PART_MIN;
    if (parts < 1) parts = 1;
    const int items = rows * parts, per = (n_valid + parts - 1) / parts;
    /* per item (row r = it / parts, part it % parts): exp sum, max, top-k list (kk entries, plen
     * filled); per row its max. One block, the doubles first (the rest 4-byte types). */
    const size_t ni = (size_t)items;
    double *ps = tp_malloc(ni * sizeof(double) + (ni * (2 + 2 * (size_t)kk) + (size_t)rows) * 4);
    float *pm = (float *)(ps + ni), *rmax = pm + ni, *pv = rmax + rows;
    int32_t *pi = (int32_t *)(pv + ni * kk);
    int *plen = (int *)(pi + ni * kk);

    #pragma omp parallel num_threads(nt) if (items > 1)
    {
        #pragma omp for schedule(dynamic, 1)
        for (int it = 0; it < items; it++) {
            int c0, c1;
            part_cols(it, parts, per, n_valid, &c0, &c1);
            pm[it] = scan_part(logits + (size_t)(it / parts) * ld, c0, c1, kk, pv + (size_t)it * kk,
                               pi + (size_t)it * kk, &plen[it]);
        }
        #pragma omp for schedule(static)
        for (int r = 0; r < rows; r++) {
            float m = -INFINITY;
            float *tv = kk ? topv + (size_t)r * k : NULL;
            int32_t *ti = kk ? topi + (size_t)r * k : NULL;
            int len = 0;
            for (int p = 0; p < parts; p++) {
                const int it = r * parts + p;
                m = tp_logit_max(m, pm[it]);
                for (int j = 0; j < plen[it]; j++) tp_topk_push(tv, ti, &len, kk, pv[(size_t)it * kk + j], pi[(size_t)it * kk + j]);
            }
            for (int j = len; j < kk; j++) {
                tv[j] = -INFINITY;
                ti[j] = -1;
            }
            rmax[r] = m;
        }
        #pragma omp for schedule(dynamic, 1)
        for (int it = 0; it < items; it++) {
            int c0, c1;
            part_cols(it, parts, per, n_valid, &c0, &c1);
            ps[it] = cpu_logits_exp_sum(logits + (size_t)(it / parts) * ld, c0, c1, rmax[it / parts]);
        }
        #pragma omp for schedule(static)
        for (int r = 0; r < rows; r++) {
            double s = 0.0;
            for (int p = 0; p < parts; p++) s += ps[r * parts + p];
            if (mx) mx[r] = rmax[r];
            if (se) se[r] = (float)s;
            if (tgt_val) {
                const int32_t tg = targets_host ? targets_host[r] : -1;
                tgt_val[r] = (tg >= 0 && tg < n_valid) ? logits[(size_t)r * ld + tg] : NAN;
            }
        }
    }
    free(ps);
}
