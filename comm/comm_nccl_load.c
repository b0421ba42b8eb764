/* --comm nccl: the NCCL communicator is in the CUDA module with the CUDA backend
 * (kernels/cuda_module.h); without CUDA in the build, or without the module, err says why. */
#include <stdio.h>

#include "comm/comm.h"
#include "kernels/cuda_module.h"

tp_comm *tp_comm_nccl_create(tp_comm *mpi, tp_backend *b, char *err, size_t err_size) {
    char why[2048];
    __typeof__(tpcuda_comm_nccl_create) *create = tp_cuda_module_symbol("tpcuda_comm_nccl_create", why, sizeof why);
    if (!create) {
        snprintf(err, err_size, "--comm nccl: %s", why);
        return NULL;
    }
    return create(mpi, b, err, err_size);
}
