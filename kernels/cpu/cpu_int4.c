/* int4 weights on the CPU backend (--weights int4, AWQ / GPTQ checkpoints). */
#include <stdio.h>

#include "kernels/backend.h"

int tp_backend_cpu_use_int4(tp_backend *b, int verbose, char *err, size_t err_size) {
    (void)b, (void)verbose;
    snprintf(err, err_size, "--weights int4: the CPU int4 kernels are not built yet");
    return -1;
}
