/* Fuzz target: engine/safetensors.c on one file's bytes (tp_st_open_memory runs the same header
 * checks as tp_st_open). Any bytes either open, with every tensor inside the data area, its size
 * equal to its shape's and its name found by tp_st_find, or fail with a message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512];
    err[0] = 0;
    tp_st_model *m = tp_st_open_memory(data, size, "fuzz.safetensors", err, sizeof err);
    if (!m) {
        if (!err[0]) abort();
        return 0;
    }
    volatile uint8_t sink = 0;
    size_t total = 0;
    for (size_t i = 0; i < tp_st_count(m); i++) {
        const tp_st_tensor *t = tp_st_at(m, i);
        if (tp_st_find(m, t->name) != t) abort();
        if ((uint64_t)tp_st_numel(t) * tp_dtype_size(t->dtype) != t->nbytes) abort();
        if (t->data < data + 8 || t->nbytes > size || t->data + t->nbytes > data + size) abort();
        if (t->nbytes) sink ^= t->data[0] ^ t->data[t->nbytes - 1]; /* ASan checks the bounds too */
        total += t->nbytes;
    }
    if (total != tp_st_total_bytes(m) || tp_st_file_count(m) != 1) abort();
    (void)sink;
    tp_st_close(m);
    return 0;
}
