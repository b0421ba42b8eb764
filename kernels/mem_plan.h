/* A memory plan: every buffer a job holds on one rank, named and sized before any step runs.
 *
 * The engine adds the weights, the activations of the largest step and the KV blocks; the
 * backend adds its own scratch (plan_scratch in backend.h: on CUDA the attention split-K
 * partials for the longest context, the logits_stats results, the cuBLAS workspace, the upload
 * buffers, headroom for CUDA graphs). The job checks the sum against the free memory at start,
 * refuses what does not fit, prints the table with --verbose, and then allocates exactly the
 * TP_MEM_DEVICE items, once; no op allocates afterwards. tests/mem_plan checks that the
 * allocations asked for equal the plan, item by item. */
#ifndef TPGEN_MEM_PLAN_H
#define TPGEN_MEM_PLAN_H

#include <stddef.h>

typedef enum {
    TP_MEM_DEVICE,   /* allocated at start through b->alloc, under this name */
    TP_MEM_HELD,     /* taken when the backend was created (no longer in mem_available) */
    TP_MEM_HEADROOM, /* kept free for memory the driver takes on our behalf; never allocated by us */
    TP_MEM_PINNED,   /* pinned host memory (not device memory) */
} tp_mem_kind;

#define TP_MEM_PLAN_MAX 24

typedef struct {
    char name[40];
    size_t bytes;
    tp_mem_kind kind;
    char note[96]; /* what sizes it: "34 layers x 2048 tokens x ..." */
} tp_mem_item;

typedef struct {
    tp_mem_item item[TP_MEM_PLAN_MAX];
    int n;
} tp_mem_plan;

void tp_mem_plan_add(tp_mem_plan *p, const char *name, size_t bytes, tp_mem_kind kind, const char *note_fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Sum of the items of one kind. */
size_t tp_mem_plan_sum(const tp_mem_plan *p, tp_mem_kind kind);
/* Device bytes the plan still needs from mem_available: DEVICE + HEADROOM items. */
size_t tp_mem_plan_needed(const tp_mem_plan *p);
/* The item of that name, or NULL. */
const tp_mem_item *tp_mem_plan_find(const tp_mem_plan *p, const char *name);
/* The plan as a table (one line per item, then the totals), into buf. */
void tp_mem_plan_format(const tp_mem_plan *p, char *buf, size_t size);

#endif
