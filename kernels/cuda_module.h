/* The CUDA backend and the NCCL communicator live in a module, libtpgen-cuda.so, loaded on first
 * use (kernels/cuda_module.c). Linking cuBLAS into every process cost each one ~0.3 s and
 * ~220 MB at start (cuBLAS's and cuBLASLt's initializers), GPU or not, and made a CUDA build fail
 * to start where the CUDA libraries are absent. Now a process loads the module only when a CUDA
 * driver is installed (libcuda.so.1 opens) or --backend cuda asks for it.
 *
 * Where: $TPGEN_CUDA_MODULE if set, else ../lib/libtpgen-cuda.so from the executable's
 * directory, else the build tree's lib/ (compiled in). The module resolves tpgen's own functions
 * (util/log.h) against the executable: programs that may load it are linked with exported
 * symbols (CMake ENABLE_EXPORTS). */
#ifndef TPGEN_CUDA_MODULE_H
#define TPGEN_CUDA_MODULE_H

#include <stddef.h>

#include "kernels/backend.h"

/* Loads the module once: 0, or -1 with why in err (not built with CUDA, not found: the paths
 * tried, or dlopen's message: a missing libcublas.so, an undefined symbol). */
int tp_cuda_module_load(char *err, size_t err_size);
/* A function of the module by name (loading it first); NULL with why in err. */
void *tp_cuda_module_symbol(const char *name, char *err, size_t err_size);
/* The module's path once loaded ("" before); --verbose prints it with --backend cuda. */
const char *tp_cuda_module_path(void);
/* 1 when the loaded module is an emulated device (it exports tpcuda_emulated: tests/gpu/emu). */
int tp_cuda_module_emulated(void);

/* Defined in the module only (kernels/cuda, comm/comm_nccl.c), reached through
 * tp_cuda_module_symbol by the tp_backend_cuda_* functions of kernels/backends.c and by
 * tp_comm_nccl_create; declared here for their types. The module is built with hidden
 * visibility: these are the symbols it exports (TP_CUDA_EXPORT), all looked up at load. */
#define TP_CUDA_EXPORT __attribute__((visibility("default")))
/* The hash of the interface headers the module was built with (TPGEN_CUDA_IFACE, CMakeLists.txt):
 * a module whose hash differs from tpgen's is refused at load. */
const char *tpcuda_interface(void);
int tpcuda_device_count(void);
tp_backend *tpcuda_backend_create(int device, tp_dtype act, char *err, size_t err_size);
int tpcuda_use_int8(tp_backend *b, int verbose, char *err, size_t err_size);
int tpcuda_use_int4(tp_backend *b, int verbose, char *err, size_t err_size);

#endif
