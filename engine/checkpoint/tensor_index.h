/* What the safetensors and torch.save readers share: the table of tensors they found (name ->
 * tp_st_tensor, a hash lookup, duplicate names refused) and the reader of a sharded checkpoint's
 * index (model.safetensors.index.json, pytorch_model.bin.index.json: {"weight_map": {tensor name:
 * shard file}}). A format reader supplies only how one shard file is loaded into the table.
 *
 * The index is data from the internet: every shard name passes tp_ckpt_path_check (ckpt_path.h)
 * before anything is opened, each distinct shard is loaded once (in name order), and afterwards
 * every weight_map entry must be found in the file it names (a tensor the reader set aside on
 * purpose, like the bool buffers of old .bin files, is excused by the reader's skipped()). */
#ifndef TPGEN_TENSOR_INDEX_H
#define TPGEN_TENSOR_INDEX_H

#include <stddef.h>

#include "safetensors.h"

typedef struct {
    tp_st_tensor *tensors; /* [n] in the order the reader added them (file by file) */
    size_t n, cap;
    size_t *slots;         /* [n_slots] open-addressing hash of names: tensor index + 1, 0 empty */
    size_t n_slots;        /* power of two, at least twice n */
    size_t total_bytes;    /* sum of nbytes of [0, n) */
} tp_tensor_table;

void tp_tensor_table_init(tp_tensor_table *t);
/* A zeroed tensor at tensors[n], not yet counted: fill it, then tp_tensor_table_push (or leave it
 * on an error). The pointer is valid until the next reserve. */
tp_st_tensor *tp_tensor_table_reserve(tp_tensor_table *t);
/* Counts the reserved tensor (name owned by the table from now on). */
void tp_tensor_table_push(tp_tensor_table *t);
/* Indexes tensors [first, n) by name (call after sorting them): -1 with "FILE: tensor X appears
 * twice" or "tensor X is in two files: A and B" in err when a name is already there. */
int tp_tensor_table_index(tp_tensor_table *t, size_t first, char *err, size_t err_size);
const tp_st_tensor *tp_tensor_table_find(const tp_tensor_table *t, const char *name); /* NULL when absent */
void tp_tensor_table_free(tp_tensor_table *t); /* frees the names too */

/* How a format loads one shard into its table: 0, or -1 with a message naming path in err.
 * why: "(a shard named by the weight_map of INDEX)", for the open error. */
typedef int (*tp_shard_load_fn)(void *reader, const char *path, const char *why, char *err, size_t err_size);
/* NULL, or the reason name is legitimately absent from the table (a type the reader skips). */
typedef const char *(*tp_shard_skipped_fn)(const void *reader, const char *name);

/* Reads the index text (from the file named index; shard names relative to dir), loads each
 * distinct shard with load(reader, ...), then checks that every weight_map entry is in table, in
 * the file it names. 0, or -1 with a message naming the index and the entry in err. */
int tp_tensor_index_load_text(const char *text, size_t len, const char *index, const char *dir, void *reader,
                              tp_shard_load_fn load, tp_shard_skipped_fn skipped, const tp_tensor_table *table,
                              char *err, size_t err_size);
/* The same, reading the file index. */
int tp_tensor_index_load(const char *index, const char *dir, void *reader, tp_shard_load_fn load,
                         tp_shard_skipped_fn skipped, const tp_tensor_table *table, char *err, size_t err_size);

#endif
