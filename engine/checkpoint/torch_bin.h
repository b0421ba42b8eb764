/* Reader for torch.save checkpoints as HF publishes them: pytorch_model.bin, or shards listed by
 * pytorch_model.bin.index.json. Presents the same tensors as the safetensors reader
 * (tp_st_tensor: name, dtype, shape, data pointer into the mmapped file), so weights.c slices
 * rank shards from either without copying whole tensors.
 *
 * A torch.save file (torch >= 1.6) is a zip archive of stored (uncompressed) records:
 *   <prefix>/data.pkl      the state dict as a pickle; each tensor is
 *                          _rebuild_tensor_v2(storage, offset, size, stride, ...) and each
 *                          storage a persistent id ("storage", torch.<T>Storage, key, "cpu", numel)
 *   <prefix>/data/<key>    the storage's bytes, little-endian
 *   <prefix>/byteorder     "little" (absent in files from before torch 1.12: little)
 * The pickle is run by a restricted VM (unpickle.h) that never executes anything; the zip by
 * zipfile.h (ZIP64 included). Tensors may be views: offset into and a slice of a larger storage
 * (tied weights, a row of a matrix); they must be contiguous (an error names a tensor that is
 * not). F32, F16 and BF16 tensors are listed; tensors of other types (the bool causal_mask
 * buffers old CodeGen files carry) are kept aside, and tp_bin_unsupported names their type.
 */
#ifndef TPGEN_TORCH_BIN_H
#define TPGEN_TORCH_BIN_H

#include <stddef.h>
#include <stdint.h>

#include "safetensors.h"

typedef struct tp_bin_model tp_bin_model;

/* Opens a directory (pytorch_model.bin, else pytorch_model.bin.index.json), a .bin file or an
 * index .json. mmaps each file read-only. Returns NULL with a message naming the file (and the
 * tensor) in err. */
tp_bin_model *tp_bin_open(const char *path, char *err, size_t err_size);
/* The same on a torch.save archive already in memory (not copied; must outlive the model).
 * what names it in messages. For tests and the fuzzer. */
tp_bin_model *tp_bin_open_buffer(const uint8_t *buf, size_t size, const char *what, char *err, size_t err_size);

const tp_st_tensor *tp_bin_find(const tp_bin_model *m, const char *name); /* NULL when absent */
size_t tp_bin_count(const tp_bin_model *m);
const tp_st_tensor *tp_bin_at(const tp_bin_model *m, size_t i); /* file by file, each in data order */
size_t tp_bin_total_bytes(const tp_bin_model *m);
size_t tp_bin_file_count(const tp_bin_model *m);
int tp_bin_zip64(const tp_bin_model *m); /* 1 when any file used ZIP64 */
/* "BoolStorage" when name is in the checkpoint with a type tpgen does not load; else NULL. */
const char *tp_bin_unsupported(const tp_bin_model *m, const char *name);
void tp_bin_close(tp_bin_model *m);

#endif
