#include "generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "scheduler.h"
#include "step.h"

/* Every token but the last generated one goes through the model, and a sequence stops at
 * n_positions tokens: prompt + max_new_tokens - 1 tokens, at most n_positions - 1. */
int tp_request_tokens(const tp_model *m, const tp_request *r) {
    if (r->max_new_tokens == 0 || r->n_prompt >= m->cfg.n_positions) return 0; /* never runs */
    long len = (long)r->n_prompt + r->max_new_tokens - 1;
    return len > m->cfg.n_positions - 1 ? m->cfg.n_positions - 1 : (int)len;
}

int tp_request_blocks(const tp_model *m, const tp_request *r) {
    return (tp_request_tokens(m, r) + m->kv.block_size - 1) / m->kv.block_size;
}

long tp_generate(tp_model *m, tp_request *reqs, int n, const tp_generate_hooks *hooks) {
    tp_sched *s = tp_sched_new(m, hooks);
    for (int i = 0; i < n; i++)
        if (tp_sched_submit(s, &reqs[i]))
            tp_die("internal: request %d needs %d KV blocks, the cache has %d", i, tp_request_blocks(m, &reqs[i]),
                   m->kv.n_blocks);
    while (tp_sched_step(s)) {}
    /* every request is done: every KV block is back (speculation's rejected drafts included) */
    if (tp_sched_kv_free(s) != tp_sched_kv_total(s))
        tp_die("internal: %d of %d KV blocks not given back after the last request", tp_sched_kv_total(s) - tp_sched_kv_free(s),
               tp_sched_kv_total(s));
    long steps = tp_sched_steps(s);
    tp_sched_free(s);
    return steps;
}

int tp_score(tp_model *m, const int32_t *ids, int n, int k, float *logprobs, int32_t *top_ids, float *top_lps) {
    int bs = m->kv.block_size;
    int need = (n + bs - 1) / bs;
    if (need > m->kv.n_blocks) tp_die("internal: score needs %d KV blocks, cache has %d", need, m->kv.n_blocks);
    int32_t *blocks = tp_malloc((need > 0 ? need : 1) * sizeof(int32_t));
    for (int b = 0; b < need; b++) blocks[b] = b;
    int bad = tp_score_in(m, ids, n, k, blocks, logprobs, top_ids, top_lps);
    free(blocks);
    return bad;
}

int tp_score_in(tp_model *m, const int32_t *ids, int n, int k, const int32_t *blocks, float *logprobs,
                int32_t *top_ids, float *top_lps) {
    int bad = 0;
    tp_acts *a = &m->a;
    int MB = a->max_blocks, bs = m->kv.block_size;
    int need = (n + bs - 1) / bs;
    int32_t *table = tp_malloc(MB * sizeof(int32_t));
    for (int b = 0; b < MB; b++) table[b] = b < need ? blocks[b] : -1;
    int chunk = a->max_tokens < a->max_rows ? a->max_tokens : a->max_rows;
    int32_t *pos = tp_malloc(chunk * sizeof(int32_t)), *seq = tp_calloc(chunk, sizeof(int32_t));
    int32_t *rows = tp_malloc(chunk * sizeof(int32_t)), *targets = tp_malloc(chunk * sizeof(int32_t));
    tp_step_output out;
    tp_step_output_init(&out, m);
    logprobs[0] = NAN;
    for (int j = 0; j < k; j++) { top_ids[j] = -1; top_lps[j] = NAN; }
    int n_fwd = n - 1; /* the last token predicts nothing that is scored */
    for (int t0 = 0; t0 < n_fwd; t0 += chunk) {
        int T = n_fwd - t0 < chunk ? n_fwd - t0 : chunk;
        for (int t = 0; t < T; t++) {
            pos[t] = t0 + t;
            rows[t] = t;
            targets[t] = ids[t0 + t + 1];
        }
        tp_logits_request lr = {TP_LOGITS_CANDIDATES, k > 1 ? k : 1, targets};
        tp_step_host st = {T, ids + t0, pos, seq, 1, MB, table, T, rows};
        tp_step_run(m, &st, &lr, &out);
        for (int t = 0; t < T; t++) { /* row t predicts ids[t0 + t + 1] */
            int i = t0 + t + 1;
            const tp_row_result *rr = &out.rows[t];
            logprobs[i] = rr->target_logit - rr->lse;
            if (!bad && (!isfinite(rr->lse) || isnan(rr->target_logit) || rr->target_logit == INFINITY)) bad = i;
            for (int j = 0; j < k; j++) {
                top_ids[(size_t)i * k + j] = j < rr->n ? rr->c[j].id : -1;
                top_lps[(size_t)i * k + j] = j < rr->n ? rr->c[j].logit - rr->lse : NAN;
            }
        }
    }
    tp_step_output_free(&out);
    free(table); free(pos); free(seq); free(rows); free(targets);
    return bad;
}
