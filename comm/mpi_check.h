/* MPI_CHECK: every MPI call's status checked; a failure prints file:line and MPI's own error
 * string, then ends every rank. */
#ifndef TPGEN_MPI_CHECK_H
#define TPGEN_MPI_CHECK_H

#include <mpi.h>

#include "util/log.h"

#define MPI_CHECK(call)                                                                     \
    do {                                                                                    \
        int mpi_rc_ = (call);                                                               \
        if (mpi_rc_ != MPI_SUCCESS) {                                                       \
            char mpi_msg_[MPI_MAX_ERROR_STRING];                                            \
            int mpi_len_ = 0;                                                               \
            MPI_Error_string(mpi_rc_, mpi_msg_, &mpi_len_);                                 \
            tp_die("MPI error at %s:%d in %s: %s", __FILE__, __LINE__, #call, mpi_msg_);    \
        }                                                                                   \
    } while (0)

#endif
