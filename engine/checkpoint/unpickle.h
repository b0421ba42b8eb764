/* A restricted unpickler for torch state dicts (the data.pkl record of a torch.save archive).
 *
 * It is a pickle VM that builds only plain data: None, bools, ints, floats, strings, tuples,
 * lists, dicts, and the few callables a state dict needs, which are recognised by name and
 * never looked up or run:
 *   collections.OrderedDict()                  -> an empty dict
 *   torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, meta])
 *   torch._utils._rebuild_parameter(tensor, requires_grad, hooks), and _with_state (+ state)
 *   torch.<T>Storage, only inside a persistent id ("storage", type, key, location, numel)
 * Any other global is refused by name ("refusing to load os.system from FILE: not a tensor"),
 * and so is any opcode outside the protocol 2-5 subset torch.save emits (INST, OBJ, NEWOBJ, EXT,
 * PERSID by text, ...). Input is bounds-checked byte by byte; the work and memory are linear in
 * its size. Callable on any buffer, so a fuzzer can drive it.
 */
#ifndef TPGEN_UNPICKLE_H
#define TPGEN_UNPICKLE_H

#include <stddef.h>
#include <stdint.h>

#define TP_PICKLE_MAX_DIMS 8

/* Element type of a storage, from its torch.<T>Storage class. */
typedef enum {
    TP_STORE_F32,
    TP_STORE_F16,
    TP_STORE_BF16, /* the ones tpgen loads */
    TP_STORE_F64,
    TP_STORE_I64,
    TP_STORE_I32,
    TP_STORE_I16,
    TP_STORE_I8,
    TP_STORE_U8,
    TP_STORE_BOOL,
} tp_store_type;

const char *tp_store_type_name(tp_store_type t); /* "FloatStorage", ... */
size_t tp_store_type_size(tp_store_type t);      /* bytes per element */

typedef struct {
    char *name;        /* state-dict key */
    char *storage_key; /* archive record "<prefix>/data/<storage_key>" */
    tp_store_type type;
    int64_t storage_numel; /* elements the persistent id says the storage holds */
    int64_t offset;        /* storage offset, elements */
    int ndim;
    int64_t shape[TP_PICKLE_MAX_DIMS];
    int64_t stride[TP_PICKLE_MAX_DIMS];
} tp_pickle_tensor;

typedef struct {
    tp_pickle_tensor *tensors; /* [n] in the pickle's order */
    size_t n;
} tp_pickle_dict;

/* Runs the pickle in buf[0, size) and returns its state dict: a dict (or OrderedDict) of
 * name -> tensor. what names the source in messages. Returns 0, or -1 with a message in err. */
int tp_unpickle_state_dict(const uint8_t *buf, size_t size, const char *what, tp_pickle_dict *out, char *err,
                           size_t err_size);
void tp_pickle_dict_free(tp_pickle_dict *d);

#endif
