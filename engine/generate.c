#include "generate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
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

void tp_request_free(tp_request *r) {
    free(r->prompt);
    free(r->ids);
    free(r->logprobs);
    free(r->top_ids);
    free(r->top_lps);
    free(r->blocks);
    free(r->history);
    memset(r, 0, sizeof *r);
}

static void finish(tp_request *r, const char *reason, tp_kv_blocks *pool) {
    r->finish_reason = reason;
    r->state = 2;
    for (int i = 0; i < r->n_blocks; i++) tp_kv_blocks_give(pool, r->blocks[i]);
    r->n_blocks = 0;
}

static void record(tp_request *r, const tp_sample *s) {
    int k = r->sampling.logprobs, i = r->n_ids;
    r->ids[i] = s->id;
    r->logprobs[i] = s->logprob;
    for (int j = 0; j < k; j++) {
        r->top_ids[i * k + j] = j < s->n_top ? s->top_ids[j] : -1;
        r->top_lps[i * k + j] = j < s->n_top ? s->top_lps[j] : NAN;
    }
    r->history[r->n_prompt + i] = s->id;
    r->n_ids++;
}

long tp_generate(tp_model *m, tp_request *reqs, int n, const tp_generate_hooks *hooks) {
    tp_acts *a = &m->a;
    int MB = a->max_blocks, V = m->cfg.vocab_size;
    tp_kv_blocks pool;
    tp_kv_blocks_init(&pool, m->kv.n_blocks);
    int32_t *ids = tp_malloc(a->max_tokens * sizeof(int32_t)), *pos = tp_malloc(a->max_tokens * sizeof(int32_t));
    int32_t *seq = tp_malloc(a->max_tokens * sizeof(int32_t)), *rows = tp_malloc(a->max_rows * sizeof(int32_t));
    int32_t *table = tp_malloc((size_t)a->max_seqs * MB * sizeof(int32_t));
    tp_request **row_req = tp_malloc(a->max_rows * sizeof *row_req);
    tp_request **running = tp_calloc(a->max_seqs, sizeof *running);
    tp_step_output out;
    tp_step_output_init(&out, m);
    void *work = tp_malloc(tp_sample_full_work_bytes(V));

    for (int i = 0; i < n; i++) {
        tp_request *r = &reqs[i];
        int k = r->sampling.logprobs;
        size_t cap = r->max_new_tokens > 0 ? r->max_new_tokens : 1;
        r->ids = tp_malloc(cap * sizeof(int32_t));
        r->logprobs = tp_malloc(cap * sizeof(float));
        r->top_ids = tp_malloc(cap * (k ? k : 1) * sizeof(int32_t));
        r->top_lps = tp_malloc(cap * (k ? k : 1) * sizeof(float));
        r->blocks = tp_malloc(MB * sizeof(int32_t));
        r->history = tp_malloc((r->n_prompt + cap) * sizeof(int32_t));
        memcpy(r->history, r->prompt, r->n_prompt * sizeof(int32_t));
        tp_rng_seed(&r->rng, r->seed, (uint64_t)r->index);
        r->state = 0;
        /* nothing to generate, or the prompt already fills n_positions (one more token would
         * make the sequence longer than the model allows) */
        if (r->max_new_tokens == 0 || r->n_prompt >= m->cfg.n_positions) {
            r->state = 2;
            r->finish_reason = "length";
            if (hooks->on_done) hooks->on_done(hooks->ctx, r);
        }
    }

    long steps = 0;
    int next = 0, n_done = 0;
    for (int i = 0; i < n; i++) n_done += reqs[i].state == 2;
    while (n_done < n) {
        /* admit waiting requests, in order, while blocks and slots last */
        while (next < n && reqs[next].state != 0) next++;
        for (; next < n; next++) {
            tp_request *r = &reqs[next];
            if (r->state != 0) continue;
            int need = tp_request_blocks(m, r), slot = -1;
            for (int s = 0; s < a->max_seqs && slot < 0; s++) if (!running[s]) slot = s;
            if (slot < 0 || pool.n_free < need) break;
            for (int b = 0; b < need; b++) r->blocks[b] = tp_kv_blocks_take(&pool);
            r->n_blocks = need;
            r->slot = slot;
            r->state = 1;
            r->n_cached = 0;
            running[slot] = r;
        }
        /* pack the step: decode tokens first, then prefill chunks */
        int T = 0, R = 0, S = 0;
        for (int pass = 0; pass < 2; pass++)
            for (int s = 0; s < a->max_seqs; s++) {
                tp_request *r = running[s];
                if (!r) continue;
                int decoding = r->n_cached >= r->n_prompt;
                if (decoding != (pass == 0)) continue;
                int len = r->n_prompt + r->n_ids; /* tokens known so far */
                int take = len - r->n_cached;
                if (take > a->max_tokens - T) take = a->max_tokens - T;
                if (take <= 0 || R >= a->max_rows) continue;
                for (int j = 0; j < take; j++) {
                    int p = r->n_cached + j;
                    ids[T] = r->history[p];
                    pos[T] = p;
                    seq[T] = s;
                    T++;
                }
                r->n_cached += take;
                if (r->n_cached == len) { /* its last known token is in: sample the next one */
                    rows[R] = T - 1;
                    row_req[R++] = r;
                }
            }
        for (int s = 0; s < a->max_seqs; s++) {
            int32_t *row = table + (size_t)s * MB;
            tp_request *r = running[s];
            for (int b = 0; b < MB; b++) row[b] = r && b < r->n_blocks ? r->blocks[b] : -1;
            if (r) S = s + 1;
        }
        if (T == 0) tp_die("internal: scheduler made an empty step");
        /* one logits form for the whole step: candidates unless a row needs full logits */
        tp_logits_request lr = {TP_LOGITS_CANDIDATES, 1, NULL};
        for (int i = 0; i < R; i++) {
            int k = tp_sampling_candidates(&row_req[i]->sampling);
            if (k == 0) lr.mode = TP_LOGITS_FULL;
            else if (k > lr.k) lr.k = k;
            if (row_req[i]->sampling.logprobs > lr.k) lr.k = row_req[i]->sampling.logprobs;
        }
        tp_step_host st = {T, ids, pos, seq, S, MB, table, R, rows};
        tp_step_run(m, &st, &lr, &out);
        steps++;

        for (int i = 0; i < R; i++) {
            tp_request *r = row_req[i];
            tp_sample smp;
            int bad = lr.mode == TP_LOGITS_FULL
                        ? tp_sample_full(&r->sampling, &r->rng, out.full + (size_t)i * V, V, r->history,
                                         r->n_prompt + r->n_ids, work, &smp)
                        : tp_sample_candidates(&r->sampling, &r->rng, out.rows[i].c, out.rows[i].n, out.rows[i].lse,
                                               &smp);
            const char *reason = NULL;
            if (bad) { /* this request fails; the others go on */
                snprintf(r->error, sizeof r->error, "non-finite logits (inf or NaN) at step %d, position %d: the "
                         "model gave no distribution to sample from (inf/NaN weights, or a bad config)",
                         r->n_ids, r->n_prompt + r->n_ids);
                reason = "error";
            } else {
                record(r, &smp);
                int stop = hooks->on_token ? hooks->on_token(hooks->ctx, r) : 0;
                if (stop || (!r->ignore_eos && smp.id == m->cfg.eos_token_id)) reason = "stop";
                else if (r->n_ids >= r->max_new_tokens || r->n_prompt + r->n_ids >= m->cfg.n_positions) reason = "length";
            }
            if (reason) {
                finish(r, reason, &pool);
                running[r->slot] = NULL;
                n_done++;
                if (hooks->on_done) hooks->on_done(hooks->ctx, r);
            }
        }
    }
    tp_step_output_free(&out);
    free(work); free(ids); free(pos); free(seq); free(rows); free(table); free(row_req); free(running);
    tp_kv_blocks_free_all(&pool);
    return steps;
}

int tp_score(tp_model *m, const int32_t *ids, int n, int k, float *logprobs, int32_t *top_ids, float *top_lps) {
    int bad = 0;
    tp_acts *a = &m->a;
    int MB = a->max_blocks, bs = m->kv.block_size;
    int need = (n + bs - 1) / bs;
    if (need > m->kv.n_blocks) tp_die("internal: score needs %d KV blocks, cache has %d", need, m->kv.n_blocks);
    int32_t *table = tp_malloc(MB * sizeof(int32_t));
    for (int b = 0; b < MB; b++) table[b] = b < need ? b : -1;
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
