/* Which backends this build has. The CUDA entry points live in kernels/cuda when it is built;
 * without it these say so, and --backend cuda fails with that message. */
#include <stdio.h>
#include <string.h>

#include "kernels/backend.h"

#ifndef TPGEN_HAVE_CUDA
tp_backend *tp_backend_cuda_create(int device, tp_dtype act, char *err, size_t err_size) {
    (void)device; (void)act;
    snprintf(err, err_size, "this tpgen was built without the CUDA backend (configure with -DTPGEN_CUDA=ON)");
    return NULL;
}
int tp_backend_cuda_compiled(void) { return 0; }
int tp_backend_cuda_device_count(void) { return 0; }
int tp_backend_cuda_use_int8(tp_backend *b, int verbose, char *err, size_t err_size) {
    (void)b; (void)verbose;
    snprintf(err, err_size, "this tpgen was built without the CUDA backend");
    return -1;
}
#endif

int tp_backend_use_int8(tp_backend *b, int verbose, char *err, size_t err_size) {
    if (strcmp(b->name, "cpu") == 0) return tp_backend_cpu_use_int8(b, verbose, err, err_size);
    return tp_backend_cuda_use_int8(b, verbose, err, err_size);
}
