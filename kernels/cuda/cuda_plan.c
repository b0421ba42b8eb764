/* The CUDA backend's sizing rules (see cuda_plan.h): plain C, built with or without CUDA. */
#include "kernels/cuda/cuda_plan.h"

#include "util/log.h"

int tpc_attn_is_decode(int T, int n_seqs) { return (T <= 8 || T <= 2 * n_seqs) && T <= 65535; /* grid.z */ }

int tpc_attn_splits(long ctx, int T, int Hl, int sm_count, int *chunk) {
    int c = 256;
    while (c > 64 && (long)T * Hl * ((ctx + c - 1) / c) < 2L * sm_count) c >>= 1;
    if (chunk) *chunk = c;
    return (int)((ctx + c - 1) / c);
}

size_t tpc_attn_part_bytes(int T, int Hl, int D, int n_splits) {
    return n_splits > 1 ? (size_t)T * Hl * n_splits * (size_t)(D + 2) * sizeof(float) : 0;
}

/* The split count is not monotone in the context (a longer context may take a longer chunk), so
 * every (T, ctx) pair is evaluated: at most a few million cheap steps, once at start. */
size_t tpc_attn_part_max(const tp_step_limits *lim, int sm_count) {
    size_t best = 0;
    int t_max = lim->max_tokens;
    if (t_max > 65535) t_max = 65535;
    for (int T = 1; T <= t_max; T++) {
        if (!tpc_attn_is_decode(T, lim->max_seqs)) continue;
        for (long ctx = 1; ctx <= lim->max_ctx; ctx++) {
            const size_t b = tpc_attn_part_bytes(T, lim->n_heads, lim->head_dim,
                                                 tpc_attn_splits(ctx, T, lim->n_heads, sm_count, NULL));
            if (b > best) best = b;
        }
    }
    return best;
}

size_t tpc_logits_buf_bytes(int rows, int k, int *chunk_rows) {
    const size_t per_row = (size_t)(3 + 2 * k) * sizeof(float) + sizeof(int32_t); /* results + target */
    size_t chunk = TPC_STAGE_BYTES / per_row;
    if (chunk > (size_t)rows) chunk = (size_t)rows;
    if (chunk_rows) *chunk_rows = (int)chunk;
    return chunk * per_row;
}

void tpc_plan_scratch(const tp_step_limits *lim, int sm_count, tp_mem_plan *plan) {
    const double MiB = 1048576.0;
    int t_dec = 2 * lim->max_seqs > 8 ? 2 * lim->max_seqs : 8; /* largest decode-kernel step */
    if (t_dec > lim->max_tokens) t_dec = lim->max_tokens;
    tp_mem_plan_add(plan, "cuBLAS workspace", TPC_CUBLAS_WS_BYTES, TP_MEM_HELD, "fixed (graph capture never allocates)");
    tp_mem_plan_add(plan, "upload conversion buffers", 2 * TPC_STAGE_BYTES, TP_MEM_HELD, "2 x %.0f MiB",
                    TPC_STAGE_BYTES / MiB);
    tp_mem_plan_add(plan, "staging buffers", 2 * TPC_STAGE_BYTES, TP_MEM_PINNED, "2 x %.0f MiB", TPC_STAGE_BYTES / MiB);
    tp_mem_plan_add(plan, TPC_PLAN_ATTN, tpc_attn_part_max(lim, sm_count), TP_MEM_DEVICE,
                    "decode steps <= %d tokens, context <= %d, %d heads x %d, %d SMs",
                    t_dec, lim->max_ctx, lim->n_heads, lim->head_dim, sm_count);
    const int k = lim->max_k > 0 ? lim->max_k : TPC_LG_MAXK;
    tp_mem_plan_add(plan, TPC_PLAN_LOGITS, tpc_logits_buf_bytes(lim->max_rows, k, NULL), TP_MEM_DEVICE,
                    "%d rows x top-%d", lim->max_rows, k);
    tp_mem_plan_add(plan, "CUDA graphs", (size_t)TPC_MAX_GRAPH_KEYS * TPC_GRAPH_HEADROOM_BYTES, TP_MEM_HEADROOM,
                    "up to %d decode graphs, no memory nodes", TPC_MAX_GRAPH_KEYS);
}

void tpc_scratch_reserve(tp_backend *b, const tp_step_limits *lim, int sm_count, tpc_scratch *s) {
    if (lim->max_k > TPC_LG_MAXK) tp_die("logits_stats: top-k %d exceeds %d", lim->max_k, TPC_LG_MAXK);
    tp_mem_plan p = {0};
    tpc_plan_scratch(lim, sm_count, &p);
    const tp_mem_item *a = tp_mem_plan_find(&p, TPC_PLAN_ATTN), *l = tp_mem_plan_find(&p, TPC_PLAN_LOGITS);
    s->attn_part_bytes = a->bytes;
    s->attn_part = a->bytes ? b->alloc(b, a->bytes, TPC_PLAN_ATTN) : NULL;
    s->lg_bytes = l->bytes;
    s->lg = l->bytes ? b->alloc(b, l->bytes, TPC_PLAN_LOGITS) : NULL;
}
