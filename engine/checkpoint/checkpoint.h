/* A model's checkpoint in whichever format its directory has: safetensors (model.safetensors or
 * model.safetensors.index.json) or torch.save (pytorch_model.bin or pytorch_model.bin.index.json).
 * When both are there, safetensors is read (as transformers does) and the description says so.
 * Either way the tensors are tp_st_tensor views into mmapped files (safetensors.h). */
#ifndef TPGEN_CHECKPOINT_H
#define TPGEN_CHECKPOINT_H

#include <stddef.h>

#include "safetensors.h"

typedef struct tp_ckpt tp_ckpt;

/* path: a model directory, or one checkpoint file / index .json (the format from its name).
 * Returns NULL with a message naming the file (and the tensor) in err. */
tp_ckpt *tp_ckpt_open(const char *path, char *err, size_t err_size);
const tp_st_tensor *tp_ckpt_find(const tp_ckpt *c, const char *name); /* NULL when absent */
size_t tp_ckpt_count(const tp_ckpt *c);
const tp_st_tensor *tp_ckpt_at(const tp_ckpt *c, size_t i);
size_t tp_ckpt_total_bytes(const tp_ckpt *c);
size_t tp_ckpt_file_count(const tp_ckpt *c);
int tp_ckpt_is_bin(const tp_ckpt *c); /* 1: torch.save .bin, 0: safetensors */
/* What was read, for the log and `tpgen info`: "DIR/pytorch_model.bin (torch.save zip, ZIP64)",
 * with "; pytorch_model.bin is also there and was not read" when both formats are present. */
const char *tp_ckpt_describe(const tp_ckpt *c);
/* For a missing tensor: "it is stored as BoolStorage, which tpgen does not load", or NULL. */
const char *tp_ckpt_unsupported(const tp_ckpt *c, const char *name);
void tp_ckpt_close(tp_ckpt *c);

#endif
