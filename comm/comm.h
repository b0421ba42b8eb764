/* The communicator interface: what the engine needs from the other ranks.
 *
 * Host collectives (bcast, gather, ...) move control data: token ids, sampling candidates,
 * error flags. allreduce_sum moves activations: a *device* buffer of the backend (NCCL works on
 * it in place on the compute stream; the MPI communicator stages it through host memory).
 * With one rank every operation is a copy or a no-op, so model code has no special case.
 *
 * Rank discovery: world rank/size from MPI; local rank/size (ranks sharing this node, for
 * cudaSetDevice) from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), so mpirun and srun both work.
 */
#ifndef TPGEN_COMM_H
#define TPGEN_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

typedef struct tp_comm tp_comm;
struct tp_comm {
    const char *name; /* "mpi", "nccl" */
    int rank, size;             /* world */
    int local_rank, local_size; /* on this node */
    int capturable;             /* allreduce_sum can be recorded in a CUDA graph (NCCL) */

    /* buf: device buffer of n elements of dt, summed in place across ranks. */
    void (*allreduce_sum)(tp_comm *c, void *buf, size_t n, tp_dtype dt);

    /* Host collectives (always MPI underneath). */
    void (*bcast)(tp_comm *c, void *buf, size_t bytes, int root);
    /* Every rank sends `bytes`; root receives size * bytes, rank-major. */
    void (*gather)(tp_comm *c, const void *send, void *recv, size_t bytes, int root);
    void (*allgather)(tp_comm *c, const void *send, void *recv, size_t bytes);
    int (*allreduce_max_int)(tp_comm *c, int v);
    void (*barrier)(tp_comm *c);
    /* bcast for a message the other ranks may wait on for long (a server idle between
     * requests): they spin briefly, then poll with growing sleeps (up to 5 ms), so an idle rank
     * costs well under 1% of a core and a busy one no latency. Every rank must call this (not
     * bcast) for the same message. */
    void (*bcast_idle)(tp_comm *c, void *buf, size_t bytes, int root);

    /* Optional (NULL: no effect, as for MPI): a collective not done after `seconds` (0: never)
     * ends the job, naming the rank and the collective. NCCL: default 300 s (--comm-timeout). */
    void (*set_timeout)(tp_comm *c, double seconds);

    void (*destroy)(tp_comm *c);
    void *impl;
};

/* MPI_Init (if needed), rank discovery, and the exit hooks of util/log.h so that an error on
 * one rank ends every rank. Call first in main. */
tp_comm *tp_comm_mpi_init(int *argc, char ***argv);
/* Tell the MPI communicator which backend owns the device buffers given to allreduce_sum
 * (NULL or the CPU backend: buffers are host memory). Set NULL before destroying the backend:
 * that releases the staging buffers made with it. */
void tp_comm_mpi_set_backend(tp_comm *c, tp_backend *b);
/* NCCL communicator over the same ranks: ncclUniqueId made on rank 0 and broadcast with MPI.
 * Host collectives are delegated to mpi. NULL + err when NCCL is not compiled or fails. It is
 * tpcuda_comm_nccl_create (comm/comm_nccl.c), in the CUDA module (kernels/cuda_module.h). */
tp_comm *tp_comm_nccl_create(tp_comm *mpi, tp_backend *b, char *err, size_t err_size);
tp_comm *tpcuda_comm_nccl_create(tp_comm *mpi, tp_backend *b, char *err, size_t err_size);
/* MPI_Finalize after the last use; frees c (the MPI communicator). */
void tp_comm_finalize(tp_comm *c);

#endif
