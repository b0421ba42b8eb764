/* The loader's row map (weights_items.h): which file row each device row of an item is, for the
 * float staging (weights.c) and the 4-bit staging (weights_q4.c) alike. */
#include "weights_items.h"

#include "util/log.h"

void tp_item_row_source(const load_item *it, const tp_config *c, int64_t r, int *part, int64_t *src_row) {
    const load_part *p0 = &it->part[0];
    *part = 0;
    *src_row = r;
    switch (it->slice) {
    case SLICE_ALL:
    case SLICE_COLS:
        return;
    case SLICE_ROWS: /* the parts' row slices stacked, then padding */
        for (int i = 0; i < it->n_parts; i++) {
            if (r < it->part[i].count) {
                *part = i;
                *src_row = it->part[i].first + r;
                return;
            }
            r -= it->part[i].count;
        }
        *part = -1;
        return;
    case SLICE_QKV: {
        /* qkv_proj rows come in G groups (mp_num: 4 for CodeGen, 8 for CodeGen2; remote_code.h),
         * group g = [Q_g; V_g; K_g], each E/G rows = H/G whole heads. Head h is in group h / (H/G)
         * at index h % (H/G). This rank's heads are gathered into [q heads; k heads; v heads]. */
        const int64_t G = c->qkv_groups;
        if (G < 1 || c->n_head % G) tp_die("qkv_proj: %d groups for %d heads (tp_checkpoint_qkv_groups not applied)",
                                           (int)G, c->n_head);
        const int64_t E = c->n_embd, D = c->head_dim, per_group = c->n_head / G, Hl = p0->count;
        static const int part_of[3] = {0, 2, 1}; /* q, k, v -> offset in group: Q=0, V=1, K=2 */
        const int64_t which = r / (Hl * D), hl = r % (Hl * D) / D, d = r % D;
        const int64_t h = p0->first + hl, grp = h / per_group, j = h % per_group;
        *src_row = grp * (3 * E / G) + part_of[which] * (E / G) + j * D + d;
        return;
    }
    }
}
