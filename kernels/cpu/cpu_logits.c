/* Per-row statistics of f32 logits [rows, ld] over columns < n_valid: max, sum of exp(l - max),
 * the top k (value descending, ties to the lower column) and the value at a target column.
 * Rows run in parallel; a row is one pass for max + top-k and one for the exp sum.
 * NaN logits are never selected (every comparison with NaN is false). When n_valid < k the
 * missing entries are value -inf, index -1. */
#include <math.h>

#include "kernels/cpu/cpu_internal.h"

/* Insert (v, c) into the sorted list tv/ti of length *len (capacity k). Columns arrive in
 * increasing order, so an equal value never displaces an earlier column: it goes after it. */
static inline void topk_push(float *tv, int32_t *ti, int *len, int k, float v, int32_t c) {
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
            m = v > m ? v : m;
            if (k > 0 && tv && ti && (len < k || v > tv[k - 1])) topk_push(tv, ti, &len, k, v, c);
        }
        for (int j = len; tv && ti && j < k; j++) {
            tv[j] = -INFINITY;
            ti[j] = -1;
        }
        double s = 0.0;
        #pragma omp simd reduction(+ : s)
        for (int c = 0; c < n_valid; c++) s += (double)expf(l[c] - m);
        if (mx) mx[r] = m;
        if (se) se[r] = (float)s;
        if (tgt_val) {
            const int32_t tg = targets_host ? targets_host[r] : -1;
            tgt_val[r] = (tg >= 0 && tg < n_valid) ? l[tg] : NAN;
        }
    }
}
