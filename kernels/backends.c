/* The CUDA backend's entry points, reached in its module (kernels/cuda_module.h). A build
 * without CUDA, or a process that cannot load the module, gets the reason in err. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/backend.h"
#include "kernels/cuda_module.h"
#include "util/log.h"

/* No CUDA driver (libcuda.so.1 does not open): 0 without loading the module, unless
 * TPGEN_CUDA_MODULE names a file that exists (the emulated device, lib/libtpgen-cuda-emu.so,
 * needs no driver). A driver but a module that does not load: 0, said once on stderr
 * (--backend cuda then fails with the reason). */
int tp_backend_cuda_device_count(void) {
    static void *driver;
    if (!tp_backend_cuda_compiled()) return 0;
    const char *named = getenv("TPGEN_CUDA_MODULE");
    const int asked = named && *named && access(named, F_OK) == 0;
    if (!asked && !driver && !(driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL))) return 0;
    char err[2048];
    __typeof__(tpcuda_device_count) *count = tp_cuda_module_symbol("tpcuda_device_count", err, sizeof err);
    if (!count) {
        static int said;
        if (!said++) tp_log0("tpgen: warning: a CUDA driver is installed but %s; using the CPU backend\n", err);
        return 0;
    }
    return count();
}

tp_backend *tp_backend_cuda_create(int device, tp_dtype act, char *err, size_t err_size) {
    __typeof__(tpcuda_backend_create) *create = tp_cuda_module_symbol("tpcuda_backend_create", err, err_size);
    return create ? create(device, act, err, err_size) : NULL;
}

int tp_backend_cuda_use_int8(tp_backend *b, int verbose, char *err, size_t err_size) {
    __typeof__(tpcuda_use_int8) *use = tp_cuda_module_symbol("tpcuda_use_int8", err, err_size);
    return use ? use(b, verbose, err, err_size) : -1;
}

int tp_backend_use_int8(tp_backend *b, int verbose, char *err, size_t err_size) {
    if (strcmp(b->name, "cpu") == 0) return tp_backend_cpu_use_int8(b, verbose, err, err_size);
    return tp_backend_cuda_use_int8(b, verbose, err, err_size);
}

int tp_backend_cuda_use_int4(tp_backend *b, int verbose, char *err, size_t err_size) {
    __typeof__(tpcuda_use_int4) *use = tp_cuda_module_symbol("tpcuda_use_int4", err, err_size);
    return use ? use(b, verbose, err, err_size) : -1;
}

int tp_backend_use_int4(tp_backend *b, int verbose, char *err, size_t err_size) {
    if (strcmp(b->name, "cpu") == 0) return tp_backend_cpu_use_int4(b, verbose, err, err_size);
    return tp_backend_cuda_use_int4(b, verbose, err, err_size);
}

int tp_backend_kv_dtype(tp_backend *b, tp_dtype kv, char *err, size_t err_size) {
    if (kv == b->act || (kv == TP_BF16 && strcmp(b->name, "cpu") == 0 && b->act == TP_F32)) {
        b->kv = kv;
        return 0;
    }
    snprintf(err, err_size, "--kv-cache-dtype %s: the %s backend in %s keeps K and V in %s (bf16 K/V is an option "
                            "of the f32 CPU backend: --weights int8|int4 or f32 on --backend cpu)",
             tp_dtype_flag(kv), b->name, tp_dtype_flag(b->act), tp_dtype_flag(b->act));
    return -1;
}

int tp_backend_int4_act8(tp_backend *b, char *err, size_t err_size) {
    if (strcmp(b->name, "cpu") == 0) return tp_backend_cpu_int4_act8(b, err, err_size);
    snprintf(err, err_size, "--int4-activations int8 is an option of the CPU int4 kernels; the %s backend "
                            "multiplies 4-bit weights with %s activations (leave it out, or --backend cpu)",
             b->name, b->act == TP_BF16 ? "bf16" : "f16");
    return -1;
}
