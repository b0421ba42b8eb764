/* Without the CUDA build there is no NCCL communicator; --comm nccl says so. */
#include <stdio.h>

#include "comm/comm.h"

#ifndef TPGEN_HAVE_CUDA
tp_comm *tp_comm_nccl_create(tp_comm *mpi, tp_backend *b, char *err, size_t err_size) {
    (void)mpi; (void)b;
    snprintf(err, err_size, "this tpgen was built without NCCL (configure with -DTPGEN_CUDA=ON)");
    return NULL;
}
#endif
