/* What the scheduler unit tests (sched_unit.c, sched_order.c) share: the sizes of a tp_model that
 * holds only what the scheduler reads (no MPI, no weights), and CHECK from tests/common/check.h.
 * Include once, in the test's .c file. */
#ifndef TPGEN_TESTS_SCHED_TEST_H
#define TPGEN_TESTS_SCHED_TEST_H

#include <string.h>

#include "sched/scheduler.h"
#include "tests/common/check.h"

enum { V = 16, EOS = 15, N_POS = 32, MAX_TOKENS = 16, MAX_ROWS = 16, MAX_BLOCKS = 8, BS = 4 };

/* m: zeroed, then the sizes above with max_seqs batch slots and n_blocks KV blocks */
static inline void sched_test_model(tp_model *m, int max_seqs, int n_blocks) {
    memset(m, 0, sizeof *m);
    m->cfg = (tp_config){.vocab_size = V, .n_positions = N_POS, .eos_token_id = EOS};
    m->a = (tp_acts){.max_tokens = MAX_TOKENS, .max_rows = MAX_ROWS, .max_seqs = max_seqs, .max_blocks = MAX_BLOCKS};
    m->kv = (tp_kv_cache){.n_blocks = n_blocks, .block_size = BS};
}

#endif
