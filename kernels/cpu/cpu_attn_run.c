/* The CPU attention's schedule (cpu_attn_run, kernels/cpu/cpu_attn.h): which queries each thread
 * takes; the kernels are cpu_attn_kernels.c, the op and the build's choice cpu_attention.c and
 * cpu_attn_pick.c (which times builds through this). */
#include <stdlib.h>

#include "util/log.h"
#include "kernels/cpu/cpu_attn.h"

/* Tokens sorted by (sequence, position) and cut into tiles of up to cpu_attn_tile(isa) tokens of
 * one sequence, so each K and V block read serves every query of the tile. A work item is a
 * group of tiles of one sequence and one query head (decode: one token and one head); items of
 * one KV head are adjacent (their K/V rows are then still in this core's L2), longest context
 * first, and under grouped-query attention the query heads of one KV head on the same tokens
 * follow each other (they read the same K/V rows). */
typedef struct {
    int first, n, max_pos, h, g; /* g: the KV head query head h reads */
} att_item;

typedef struct {
    int32_t seq, pos, t;
} tok_key;
static int cmp_tok(const void *x, const void *y) {
    const tok_key *a = x, *b = y;
    if (a->seq != b->seq) return a->seq < b->seq ? -1 : 1;
    return a->pos < b->pos ? -1 : a->pos > b->pos;
}
static int cmp_item(const void *x, const void *y) {
    const att_item *a = x, *b = y;
    if (a->g != b->g) return a->g < b->g ? -1 : 1;
    if (a->max_pos != b->max_pos) return a->max_pos > b->max_pos ? -1 : 1;
    if (a->first != b->first) return a->first < b->first ? -1 : 1;
    return a->h < b->h ? -1 : a->h > b->h;
}

void cpu_attn_run(att_isa isa, const att_args *a, int n_threads) {
    const tp_step *st = a->st;
    const int T = st->n_tokens, Hl = a->Hl, qt = cpu_attn_tile(isa);
    if (T <= 0 || Hl <= 0) return;
    int *order = tp_malloc((size_t)T * sizeof(int));
    tok_key *keys = tp_malloc((size_t)T * sizeof(tok_key));
    for (int t = 0; t < T; t++) keys[t] = (tok_key){st->seq[t], st->pos[t], t};
    qsort(keys, T, sizeof(tok_key), cmp_tok);
    for (int t = 0; t < T; t++) order[t] = keys[t].t;
    free(keys);
    /* Tiles (3+ queries) grouped by up to CPU_ATTN_GROUP per item in the vector builds (a K/V
     * block then serves the whole group from L1), fewer when that would leave under 4 items per
     * thread. */
    long tiles = 0;
    for (int t = 0; t < T;) {
        int n = 1;
        while (t + n < T && n < qt && st->seq[order[t + n]] == st->seq[order[t]]) n++;
        tiles += n >= 3;
        t += n;
    }
    long per = isa == ATT_ISA_C ? 1 : tiles * Hl / (4L * n_threads);
    per = per < 1 ? 1 : per > CPU_ATTN_GROUP ? CPU_ATTN_GROUP : per;
    const int max_q = qt * (int)per;
    att_item *items = tp_malloc((size_t)T * Hl * sizeof(att_item));
    long n_items = 0;
    for (int t = 0; t < T;) {
        int n = 1;
        while (t + n < T && n < max_q && st->seq[order[t + n]] == st->seq[order[t]]) n++;
        if (n < 3) n = 1; /* 1-2 queries: one item each (the dot kernel) */
        for (int h = 0; h < Hl; h++)
            items[n_items++] = (att_item){t, n, st->pos[order[t + n - 1]], h, att_kv_head(a, h)};
        t += n;
    }
    qsort(items, n_items, sizeof(att_item), cmp_item);
    const size_t scratch = cpu_attn_scratch_floats(isa, a->D, st->block_size);

    #pragma omp parallel num_threads(n_threads) if (n_items > 1)
    {
        float *scr = tp_malloc(scratch * sizeof(float));
        #pragma omp for schedule(dynamic, 1)
        for (long w = 0; w < n_items; w++) cpu_attn_item(isa, a, order + items[w].first, items[w].n, items[w].h, scr);
        free(scr);
    }
    free(order);
    free(items);
}
