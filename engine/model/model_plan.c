#include "model_plan.h"

#include <stdio.h>
#include <string.h>

void tp_model_step_limits(const tp_model *m, const tp_plan_args *pa, tp_step_limits *lim) {
    memset(lim, 0, sizeof *lim);
    long max_blocks = ((long)m->cfg.n_positions + pa->block_size - 1) / pa->block_size;
    if (pa->kv_blocks > 0 && pa->kv_blocks < max_blocks) max_blocks = pa->kv_blocks; /* as tp_model_alloc's table */
    lim->max_tokens = pa->max_tokens;
    lim->max_seqs = pa->max_seqs;
    lim->max_ctx = (int)(max_blocks * pa->block_size); /* graph captures size attention for the table's capacity */
    lim->max_rows = pa->max_rows;
    lim->max_k = pa->max_k;
    lim->n_heads = m->sh.n_heads;
    lim->head_dim = m->cfg.head_dim;
}

long tp_model_plan(const tp_model *m, const tp_plan_args *pa, size_t avail, tp_mem_plan *p, char *err,
                   size_t err_size) {
    const double MiB = 1048576.0;
    tp_backend *b = m->b;
    const tp_config *c = &m->cfg;
    memset(p, 0, sizeof *p);
    const size_t wb = m->w.arena ? m->w.arena_bytes : tp_model_weights_bytes(m);
    tp_mem_plan_add(p, "weights", wb, m->w.arena ? TP_MEM_HELD : TP_MEM_DEVICE,
                    "%d layers, %d heads (%d KV), %d MLP rows, %d vocab rows%s",
                    c->n_layer, m->sh.n_heads, m->sh.n_kv_heads, m->sh.n_inner, m->sh.n_vocab,
                    c->q4_lm_head ? "; GEMMs int4, lm_head too"
                    : c->q4_group ? "; layer GEMMs int4, lm_head int8"
                    : b->weights ? "; GEMMs int8 + f32 row scales"
                                 : "");
    /* The block table (in the activations) is sized by the KV blocks, which are known only after
     * the activations are: plan with an upper bound of the blocks, then shrink the entry to the
     * blocks taken (what tp_model_alloc asks for). */
    const int bs = pa->block_size;
    const size_t per_block = tp_kv_bytes_per_token(b, c->n_layer, m->sh.n_kv_heads, c->head_dim) * (size_t)bs;
    long kv_bound = pa->kv_tokens > 0 ? (pa->kv_tokens + bs - 1) / bs : (long)(avail / per_block) + 1;
    if (kv_bound > 2000000000L) kv_bound = 2000000000L;
    tp_mem_plan_add(p, "activations",
                    tp_model_acts_bytes(m, pa->max_tokens, pa->max_rows, pa->max_seqs, kv_bound, pa->block_size),
                    TP_MEM_DEVICE, "%d tokens per step, %d logits rows, %d sequences", pa->max_tokens, pa->max_rows,
                    pa->max_seqs);
    /* the backend's scratch for the longest context the cache could hold; shrunk below with the
     * activations once the blocks are known (it only shrinks, so the choice still fits) */
    tp_plan_args bounded = *pa;
    bounded.kv_blocks = kv_bound;
    tp_step_limits lim;
    tp_model_step_limits(m, &bounded, &lim);
    const int first_scratch = p->n;
    if (b->plan_scratch) b->plan_scratch(b, &lim, p);

    /* KV blocks: what is left, shared between the ranks on this device */
    const size_t share = avail / (size_t)(pa->sharing > 0 ? pa->sharing : 1);
    const size_t others = tp_mem_plan_needed(p);
    const size_t left = share > others ? share - others : 0;
    long blocks;
    if (pa->kv_tokens > 0) blocks = (pa->kv_tokens + bs - 1) / bs;
    else {
        blocks = (long)((double)left * pa->kv_mem / (double)per_block);
        const long need = (pa->kv_tokens_needed + bs - 1) / bs;
        if (pa->kv_tokens_needed > 0 && blocks > need) blocks = need;
        if (blocks > 2000000000L) blocks = 2000000000L;
    }
    if (blocks >= 1 && blocks < kv_bound)
        for (int i = 0; i < p->n; i++)
            if (strcmp(p->item[i].name, "activations") == 0)
                p->item[i].bytes =
                    tp_model_acts_bytes(m, pa->max_tokens, pa->max_rows, pa->max_seqs, blocks, pa->block_size);
    if (blocks >= 1 && blocks < kv_bound && b->plan_scratch) { /* what reserve_scratch will take */
        tp_mem_plan scratch = {0};
        bounded.kv_blocks = blocks;
        tp_model_step_limits(m, &bounded, &lim);
        b->plan_scratch(b, &lim, &scratch);
        for (int i = 0; i < scratch.n && first_scratch + i < p->n; i++)
            p->item[first_scratch + i] = scratch.item[i];
    }
    tp_mem_plan_add(p, "KV cache", (size_t)blocks * per_block, TP_MEM_DEVICE, "%ld blocks of %d tokens, %zu bytes per token",
                    blocks, bs, per_block / (size_t)bs);
    const size_t need = tp_mem_plan_needed(p);
    if (blocks >= 1 && need <= share) return blocks;

    size_t u = (size_t)snprintf(err, err_size,
                                "the job does not fit in %s memory on rank %d: it needs %.1f MiB, %.1f MiB are free%s "
                                "(%s); the plan:\n",
                                strcmp(b->name, "cpu") == 0 ? "host" : "device", m->sh.rank, need / MiB, share / MiB,
                                pa->sharing > 1 ? " for this rank (the device is shared)" : "",
                                blocks < 1 ? "not even one KV block is left: lower --max-batch-tokens or --max-batch, "
                                             "or use a larger TP"
                                           : "lower --kv-cache-tokens, --max-batch-tokens or --max-batch, or use a "
                                             "larger TP");
    if (u < err_size) tp_mem_plan_format(p, err + u, err_size - u);
    return 0;
}
