#include "shard.h"

#include <stdio.h>
#include <string.h>

#include "kernels/common/tp_quant4.h" /* TP_Q4_GROUP_ALIGN */

int tp_shard_plan(const tp_config *c, int tp, int rank, tp_shard *s, char *err, size_t err_size) {
    if (tp < 1 || c->n_head % tp) {
        char valid[256];
        tp_config_valid_tp(c, valid, sizeof valid);
        snprintf(err, err_size, "TP=%d (the number of ranks) does not divide n_head=%d; valid TP sizes: %s", tp,
                 c->n_head, valid);
        return -1;
    }
    if (c->n_kv_head % tp && tp % c->n_kv_head) {
        char valid[256];
        tp_config_valid_tp(c, valid, sizeof valid);
        snprintf(err, err_size,
                 "TP=%d (the number of ranks) neither divides nor is a multiple of num_key_value_heads=%d: a rank "
                 "must hold whole KV heads, or one KV head replicated; valid TP sizes: %s",
                 tp, c->n_kv_head, valid);
        return -1;
    }
    char why[384];
    if (!tp_config_q4_ok(c, tp, c->q4_group, why, sizeof why)) { /* every rank's 4-bit groups whole */
        char valid[256];
        tp_config_valid_tp(c, valid, sizeof valid);
        size_t u = (size_t)snprintf(err, err_size, "%s%s; valid TP sizes: %s", c->q4_from_flag ? "--weights int4: " : "",
                                    why, valid[0] ? valid : "none");
        if (c->q4_from_flag && u < err_size) { /* the flag's values that would fit this TP size */
            u += (size_t)snprintf(err + u, err_size - u, "; --group-size values that fit TP=%d:", tp);
            int n = 0;
            for (int g = TP_Q4_GROUP_ALIGN; g <= c->n_embd && u + 16 < err_size; g += TP_Q4_GROUP_ALIGN)
                if (tp_config_q4_ok(c, tp, g, NULL, 0)) u += (size_t)snprintf(err + u, err_size - u, n++ ? ", %d" : " %d", g);
            if (!n && u < err_size) snprintf(err + u, err_size - u, " none");
        }
        return -1;
    }
    if (tp > c->vocab_size || tp > c->n_inner) {
        snprintf(err, err_size, "TP=%d is larger than vocab_size=%d or the MLP width %d", tp, c->vocab_size,
                 c->n_inner);
        return -1;
    }
    s->tp = tp;
    s->rank = rank;
    s->n_heads = c->n_head / tp;
    s->head0 = rank * s->n_heads;
    const int group = c->n_head / c->n_kv_head; /* query heads per KV head */
    s->kv_head0 = s->head0 / group;
    s->n_kv_heads = c->n_kv_head % tp == 0 ? c->n_kv_head / tp : 1; /* else replicated: one per rank */
    s->inner0 = (int)((long)rank * c->n_inner / tp);
    s->n_inner = (int)((long)(rank + 1) * c->n_inner / tp) - s->inner0;
    s->n_vocab = (c->vocab_size + tp - 1) / tp;
    s->vocab0 = rank * s->n_vocab;
    int valid = c->vocab_size - s->vocab0;
    s->n_vocab_valid = valid < 0 ? 0 : valid > s->n_vocab ? s->n_vocab : valid;
    return 0;
}
