/* libFuzzer target: any byte string as a .safetensors file must either open, with every tensor
 * inside the file, or fail with a message; never crash, leak or read out of bounds.
 * Build with clang (tests/safetensors.cmake adds it when the compiler is clang):
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DTPGEN_CUDA=OFF
 *   cmake --build build-fuzz --target fuzz_safetensors && build-fuzz/tests/fuzz_safetensors -max_total_time=60
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) { /* one in-memory file, rewritten for each input */
        fd = memfd_create("fuzz.safetensors", 0);
        if (fd < 0) { perror("memfd_create"); abort(); }
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) { perror("memfd write"); abort(); }
    char err[512];
    tp_st_model *m = tp_st_open(path, err, sizeof err);
    if (!m) return 0;
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < tp_st_count(m); i++) {
        const tp_st_tensor *t = tp_st_at(m, i);
        if (tp_st_find(m, t->name) != t) abort();
        if (t->nbytes) sink ^= t->data[0] ^ t->data[t->nbytes - 1]; /* ASan checks the bounds */
    }
    (void)sink;
    tp_st_close(m);
    return 0;
}
