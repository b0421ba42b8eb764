/* Reader for HF safetensors checkpoints: one model.safetensors, or shards listed by
 * model.safetensors.index.json.
 *
 * File layout: [u64 little-endian N][N bytes of JSON header][data area]. The header maps each
 * tensor name to {"dtype", "shape", "data_offsets": [begin, end]}, offsets relative to the data
 * area; "__metadata__" (string -> string) is allowed and ignored.
 *
 * Every file is mmapped read-only and private without MAP_POPULATE, so a rank pages in only the
 * bytes of the slices it reads. Every header is validated completely at open (types, dtypes,
 * shapes, sizes, bounds, overlap, duplicate names), so later code can trust data/nbytes.
 * Tensors are listed file by file (shards in name order), each file's in data-offset order,
 * which is the order that reads the files sequentially. tp_st_find is a hash lookup.
 */
#ifndef TPGEN_SAFETENSORS_H
#define TPGEN_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/dtype.h"

#define TP_ST_MAX_DIMS 8
#define TP_ST_MAX_HEADER (100u * 1000u * 1000u) /* bytes; a larger header is not a checkpoint */

typedef struct {
    const char *name;       /* tensor name */
    tp_dtype dtype;         /* F32, F16, BF16; TP_F32 (its 4-byte size) when int32 */
    int int32;              /* 1: stored as I32 (IntStorage in a .bin): the packed 4-bit weights and
                               indices of AWQ / GPTQ checkpoints (qweight, qzeros, g_idx), read as
                               integers (tp_load_i32), never converted as floats */
    int ndim;
    int64_t shape[TP_ST_MAX_DIMS];
    const uint8_t *data;    /* into the mmap of its file: the tensor's first byte; files from the
                               reference writer align it to the element size, but the format does
                               not promise it: copy with memcpy where that matters */
    size_t nbytes;
    const char *file;       /* path of the file holding it */
} tp_st_tensor;

typedef struct tp_st_model tp_st_model;

/* Opens a model directory as HF publishes it: model.safetensors, or model.safetensors.index.json
 * (its "weight_map" names the shard files). Also accepts a path to one .safetensors file or to an
 * index .json file. mmaps every file read-only (MAP_PRIVATE, no MAP_POPULATE). Validates every
 * header completely. Returns NULL with a message in err that names the file (and tensor) on any
 * problem. */
tp_st_model *tp_st_open(const char *path, char *err, size_t err_size);
/* The same checks on bytes already in memory (for tests and fuzzing). tp_st_open_memory: one
 * .safetensors file of size bytes, named name in messages; tensors point into data, which must
 * outlive the model. tp_st_open_index_text: the text of an index file (named index in messages)
 * whose shards are read from dir. */
tp_st_model *tp_st_open_memory(const void *data, size_t size, const char *name, char *err, size_t err_size);
tp_st_model *tp_st_open_index_text(const char *text, size_t len, const char *index, const char *dir, char *err,
                                   size_t err_size);
const tp_st_tensor *tp_st_find(const tp_st_model *m, const char *name); /* NULL when absent */
size_t tp_st_count(const tp_st_model *m);
const tp_st_tensor *tp_st_at(const tp_st_model *m, size_t i);     /* i < tp_st_count */
size_t tp_st_total_bytes(const tp_st_model *m);                    /* sum of tensor bytes */
size_t tp_st_file_count(const tp_st_model *m);                     /* files mapped */
void tp_st_close(tp_st_model *m);

/* Hint that [p, p+n) will be read soon (madvise WILLNEED), for the loader's prefetch. */
void tp_st_prefetch(const void *p, size_t n);

/* Product of shape[0..ndim) (1 for a scalar). */
int64_t tp_st_numel(const tp_st_tensor *t);

/* "[a, b, c]" into buf; returns buf. For messages that show a shape. */
const char *tp_st_shape_str(const int64_t *shape, int ndim, char *buf, size_t size);

#endif
