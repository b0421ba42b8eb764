/* The CUDA backend's sizing rules, as plain C: which attention kernel a step takes, how many
 * split-K partials it writes, how large the logits_stats buffer is, and the backend's part of
 * the memory plan. The launchers in the .cu files call these same functions, and they are
 * compiled into every build (not only with CUDA), so tests/mem_plan checks on the CPU that the
 * reserved scratch covers every step the limits allow. */
#ifndef TPGEN_CUDA_PLAN_H
#define TPGEN_CUDA_PLAN_H

#include <stddef.h>

#include "kernels/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TPC_STAGE_BYTES ((size_t)16 << 20)     /* per pinned staging buffer (two) */
#define TPC_CUBLAS_WS_BYTES ((size_t)32 << 20) /* cuBLAS / cuBLASLt workspace */
#define TPC_LG_MAXK 64                         /* largest k of logits_stats */
#define TPC_GRAPH_HEADROOM_BYTES ((size_t)1 << 20) /* per CUDA graph exec (driver-owned) */
#define TPC_MAX_GRAPH_KEYS 32                  /* engine: one graph per decode token count <= 32 */

/* Attention: 1 when a step of T tokens over n_seqs sequences takes the split-K decode kernel. */
int tpc_attn_is_decode(int T, int n_seqs);
/* Decode splits for a context of ctx positions: positions per split in *chunk (64..256), chosen
 * so the grid has at least two blocks per multiprocessor. */
int tpc_attn_splits(long ctx, int T, int Hl, int sm_count, int *chunk);
/* Bytes of split-K partials [T, Hl, n_splits, D + 2] f32 (0 when n_splits == 1: written directly). */
size_t tpc_attn_part_bytes(int T, int Hl, int D, int n_splits);
/* The most any step within lim needs (every decode T, every context 1..max_ctx). */
size_t tpc_attn_part_max(const tp_step_limits *lim, int sm_count);
/* logits_stats device buffer for `rows` rows of top-k (rows are processed in chunks that fit
 * one staging buffer; *chunk_rows gets the chunk). */
size_t tpc_logits_buf_bytes(int rows, int k, int *chunk_rows);

/* Names of the plan items (also the names given to alloc). */
#define TPC_PLAN_ATTN "attention split-K partials"
#define TPC_PLAN_LOGITS "logits_stats results"

/* Adds the backend's items for steps within lim on a GPU with sm_count multiprocessors. */
void tpc_plan_scratch(const tp_step_limits *lim, int sm_count, tp_mem_plan *plan);

/* The scratch reserve_scratch allocates (through b->alloc, named as in the plan). */
typedef struct {
    void *attn_part;
    size_t attn_part_bytes;
    void *lg;
    size_t lg_bytes;
} tpc_scratch;
void tpc_scratch_reserve(tp_backend *b, const tp_step_limits *lim, int sm_count, tpc_scratch *s);

#ifdef __cplusplus
}
#endif

#endif
