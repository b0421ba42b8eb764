/* Where a K or V row sits in the paged KV cache, for both backends (one definition: the CPU
 * tests check the index the CUDA kernels use).
 *
 * A layer's K cache (and its V cache) is [n_blocks][Hkl][bs][D], head-contiguous as vLLM lays it
 * out: block blk holds, per KV head g, the rows of its bs slots back to back, so the bs*D elements
 * one head reads from a block are one contiguous run (8 KiB at bs 16, D 128, f32) instead of bs
 * rows Hkl*D apart. Position p of a sequence whose block-table row is bt sits in block
 * bt[p / bs], slot p % bs. */
#ifndef TPGEN_TP_KV_H
#define TPGEN_TP_KV_H

#include <stddef.h>

#include "kernels/common/tp_hd.h"

/* Element offset of (block blk, KV head g, slot j): the row's D elements follow it. */
TP_HD size_t tp_kv_row(int32_t blk, int g, int j, int Hkl, int bs, int D) {
    return (((size_t)blk * (size_t)Hkl + (size_t)g) * (size_t)bs + (size_t)j) * (size_t)D;
}

/* Element offset of position p's row of KV head g, bt: the sequence's block-table row. */
TP_HD size_t tp_kv_pos_row(const int32_t *bt, int p, int g, int Hkl, int bs, int D) {
    return tp_kv_row(bt[p / bs], g, p % bs, Hkl, bs, D);
}

#endif
