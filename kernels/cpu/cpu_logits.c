/* Per-row statistics of f32 logits [rows, ld] over columns < n_valid: max, sum of exp(l - max),
 * the top k (value descending, ties to the lower column) and the value at a target column.
 * Rows run in parallel; a row is one pass for max + top-k (an insertion list) and one for the
 * exp sum (in double). The rule for ties, NaN and inf is kernels/common/tp_logits.h, shared with
 * the CUDA backend: NaN is never selected and makes the sum NaN; missing entries (fewer than k
 * non-NaN values) are value -inf, index -1. */
#include <math.h>

#include "kernels/common/tp_logits.h"
#include "kernels/cpu/cpu_internal.h"

void cpu_logits_stats(tp_backend *b, const float *logits, int rows, int ld, int n_valid, int k,
                      const int32_t *targets_host, float *mx, float *se, float *topv, int32_t *topi,
                      float *tgt_val) {
    #pragma omp parallel for schedule(dynamic, 1) num_threads(cpu_threads(b)) if (rows > 1)
    for (int r = 0; r < rows; r++) {
        const float *l = logits + (size_t)r * ld;
        float m = -INFINITY;
        float *tv = topv ? topv + (size_t)r * k : NULL;
        int32_t *ti = topi ? topi + (size_t)r * k : NULL;
        int len = 0;
        for (int c = 0; c < n_valid; c++) {
            const float v = l[c];
            m = tp_logit_max(m, v);
            if (k > 0 && tv && ti && (len < k || v > tv[k - 1])) tp_topk_push(tv, ti, &len, k, v, c);
        }
        for (int j = len; tv && ti && j < k; j++) {
            tv[j] = -INFINITY;
            ti[j] = -1;
        }
        double s = 0.0;
        /* in order, no simd: expf has no vector form without -ffast-math (gcc and clang both
         * left the loop scalar; clang warned that its simd pragma could not be honoured) */
        for (int c = 0; c < n_valid; c++) s += (double)tp_logit_exp(l[c], m);
        if (mx) mx[r] = m;
        if (se) se[r] = (float)s;
        if (tgt_val) {
            const int32_t tg = targets_host ? targets_host[r] : -1;
            tgt_val[r] = (tg >= 0 && tg < n_valid) ? l[tg] : NAN;
        }
    }
}
