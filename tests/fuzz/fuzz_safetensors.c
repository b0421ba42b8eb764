/* Fuzz target: engine/checkpoint/safetensors.c on one file's bytes. Any bytes either open, with every tensor
 * inside the data area, its size equal to its shape's and its name found by tp_st_find, or fail
 * with a message. tp_st_open_memory (the bytes as given) and tp_st_open (the same bytes as a
 * file, a memfd) must agree exactly: the same error, or the same tensors. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "checkpoint/safetensors.h"

static int g_fd = -1;
static char g_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    if ((g_fd = memfd_create("fuzz.safetensors", 0)) < 0) { perror("memfd_create"); abort(); }
    snprintf(g_path, sizeof g_path, "/proc/self/fd/%d", g_fd);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512], ferr[512];
    err[0] = ferr[0] = 0;
    tp_st_model *m = tp_st_open_memory(data, size, g_path, err, sizeof err);
    if (ftruncate(g_fd, 0) != 0 || pwrite(g_fd, data, size, 0) != (ssize_t)size) { perror("memfd"); abort(); }
    tp_st_model *fm = tp_st_open(g_path, ferr, sizeof ferr);
    if (!m != !fm || strcmp(err, ferr) != 0) {
        fprintf(stderr, "memory and file differ:\n  memory: %s\n  file:   %s\n", m ? "opened" : err, fm ? "opened" : ferr);
        abort();
    }
    if (!m) {
        if (!err[0]) abort();
        return 0;
    }
    volatile uint8_t sink = 0;
    size_t total = 0;
    if (tp_st_count(m) != tp_st_count(fm)) abort();
    for (size_t i = 0; i < tp_st_count(m); i++) {
        const tp_st_tensor *t = tp_st_at(m, i), *ft = tp_st_at(fm, i);
        if (tp_st_find(m, t->name) != t) abort();
        if ((uint64_t)tp_st_numel(t) * tp_dtype_size(t->dtype) != t->nbytes) abort();
        if (t->data < data + 8 || t->nbytes > size || t->data + t->nbytes > data + size) abort();
        if (strcmp(t->name, ft->name) || t->dtype != ft->dtype || t->ndim != ft->ndim || t->nbytes != ft->nbytes ||
            memcmp(t->shape, ft->shape, sizeof t->shape) || memcmp(t->data, ft->data, t->nbytes))
            abort();
        if (t->nbytes) sink ^= t->data[0] ^ t->data[t->nbytes - 1]; /* ASan checks the bounds too */
        total += t->nbytes;
    }
    if (total != tp_st_total_bytes(m) || tp_st_file_count(m) != 1) abort();
    (void)sink;
    tp_st_close(m);
    tp_st_close(fm);
    return 0;
}
