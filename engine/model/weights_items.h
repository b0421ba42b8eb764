/* The loader's list of what one rank loads (weights.c builds and checks it, weights_q4.c stages the
 * 4-bit matrices): each device tensor, the file tensors it is made of, and the part of them this
 * rank takes. Internal to engine/model. */
#ifndef TPGEN_WEIGHTS_ITEMS_H
#define TPGEN_WEIGHTS_ITEMS_H

#include <stddef.h>
#include <stdint.h>

#include "checkpoint/checkpoint.h"
#include "config.h"

typedef enum { SLICE_ALL, SLICE_ROWS, SLICE_COLS, SLICE_QKV } slice_kind;

/* A 4-bit Linear as AWQ / GPTQ store it (quant_config.h): the module's tensors. */
typedef struct {
    const tp_st_tensor *qweight; /* I32: AWQ [in, out/8], GPTQ [in/8, out] */
    const tp_st_tensor *qzeros;  /* I32 [in/Gs, out/8] */
    const tp_st_tensor *scales;  /* float [in/Gs, out] */
    const tp_st_tensor *g_idx;   /* GPTQ I32 [in] or NULL (checked to be k / Gs) */
} q4_tensors;

/* One file tensor an item reads, and the part of it this rank takes. */
typedef struct {
    char module[104];     /* the Linear's (or norm's, embedding's) name without ".weight" */
    char name[112];       /* module + suffix: the float tensor read (".weight", ".bias") */
    int64_t rows, cols;   /* full shape in the file (cols = 1 for vectors); 4-bit: the Linear's [out, in] */
    int64_t first, count; /* rows or columns taken; SLICE_QKV: heads */
    const tp_st_tensor *t; /* the checkpoint's tensor (NULL with random weights, and for 4-bit parts) */
    q4_tensors q;          /* 4-bit parts (item q4_src) */
} load_part;

/* One device tensor to load: where it goes, and the file tensors it is made of -- one, or for
 * SLICE_ROWS up to three whose row slices are stacked (LLaMA's q/k/v_proj into one qkv matrix,
 * gate_proj and up_proj into one). */
typedef struct {
    load_part part[3];
    int n_parts;
    void **dst;        /* where the device pointer is stored */
    int is_matrix;
    int q4;            /* a 4-bit device matrix (matrix_upload_q4), in groups of `group` k */
    int q4_src;        /* its parts are 4-bit in the checkpoint (AWQ / GPTQ); else float, quantized at load */
    int group;         /* q4: k per group of the device matrix (a slice's own k under group_size -1) */
    slice_kind slice;
    int64_t out_rows;  /* rows of the device tensor (>= the rows taken for padded lm_head) */
    float rand_mean;
    size_t offset;     /* in the arena */
} load_item;

/* Device shape of an item: [out_rows, out_cols]; the file columns [item_col0, + out_cols) it takes. */
static inline int64_t item_out_cols(const load_item *it) {
    return it->slice == SLICE_COLS ? it->part[0].count : it->part[0].cols;
}
static inline int64_t item_col0(const load_item *it) { return it->slice == SLICE_COLS ? it->part[0].first : 0; }

/* Where device row r of the item comes from: file tensor it->part[*part], row *src_row (before
 * the column slice). *part = -1: a padding row (lm_head past V), zero. */
void tp_item_row_source(const load_item *it, const tp_config *c, int64_t r, int *part, int64_t *src_row);

/* The 4-bit checkpoint tensors of every part of a q4_src item, checked (presence, I32, shapes from
 * config.json, g_idx trivial); dies on every rank (tp_die_all) naming the tensor and file. */
void tp_q4_check_item(const tp_ckpt *st, const char *dir, const tp_config *c, load_item *it);

/* This rank's canonical 4-bit slice of an item (kernels/common/tp_quant4.h) into q [out_rows *
 * out_cols], scale and zero [out_rows * out_cols / group]: unpacked from the checkpoint's tensors
 * (q4_src), or quantized by round-to-nearest from staging, the float slice stage_slice copied
 * ([out_rows, out_cols] in the file's dtype). row: f32 scratch of out_cols. */
void tp_q4_stage(const load_item *it, const tp_config *c, const uint8_t *staging, float *row, uint8_t *q,
                 float *scale, uint8_t *zero);

#endif
