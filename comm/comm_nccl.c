/* The NCCL communicator: the activation all-reduce runs on the GPU, in place, on the CUDA
 * backend's compute stream (so it is ordered after the ops that produced the buffer and before
 * those that read it, without events, and a CUDA graph capture records it with the step).
 * Host collectives (token ids, candidates, flags) are the MPI communicator's, which this one
 * wraps and does not own.
 *
 * Setup: every rank checks that no two ranks drive the same GPU (NCCL refuses that; --comm mpi
 * allows it), rank 0 makes the ncclUniqueId and broadcasts it over MPI, then every rank calls
 * ncclCommInitRank on the device its backend uses. Errors every rank sees alike return NULL and
 * a message (the caller exits on every rank); an NCCL failure on one rank ends the job through
 * tp_die, so no rank is left waiting in a collective. */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "util/log.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"

typedef struct {
    tp_comm *mpi;   /* host collectives */
    tp_backend *b;  /* the CUDA backend whose stream carries the all-reduce */
    ncclComm_t nc;  /* NULL with one rank */
    cudaStream_t stream;
} nccl_impl;

#define NCCL_CHECK(comm, call)                                                                    \
    do {                                                                                          \
        ncclResult_t r_ = (call);                                                                 \
        if (r_ != ncclSuccess) {                                                                  \
            const char *last_ = ncclGetLastError(comm);                                           \
            tp_die("NCCL error at %s:%d: %s: %s%s%s%s", __FILE__, __LINE__, #call, ncclGetErrorString(r_), \
                   last_ && *last_ ? " (" : "", last_ && *last_ ? last_ : "", last_ && *last_ ? ")" : ""); \
        }                                                                                         \
    } while (0)

static ncclDataType_t nccl_type(tp_dtype dt) {
    return dt == TP_F16 ? ncclFloat16 : dt == TP_BF16 ? ncclBfloat16 : ncclFloat32;
}

static void nccl_allreduce_sum(tp_comm *c, void *buf, size_t n, tp_dtype dt) {
    nccl_impl *im = c->impl;
    if (c->size == 1 || n == 0) return;
    NCCL_CHECK(im->nc, ncclAllReduce(buf, buf, n, nccl_type(dt), ncclSum, im->nc, im->stream));
}

static void nccl_bcast(tp_comm *c, void *buf, size_t bytes, int root) {
    tp_comm *m = ((nccl_impl *)c->impl)->mpi;
    m->bcast(m, buf, bytes, root);
}
static void nccl_bcast_idle(tp_comm *c, void *buf, size_t bytes, int root) {
    tp_comm *m = ((nccl_impl *)c->impl)->mpi;
    m->bcast_idle(m, buf, bytes, root);
}
static void nccl_gather(tp_comm *c, const void *send, void *recv, size_t bytes, int root) {
    tp_comm *m = ((nccl_impl *)c->impl)->mpi;
    m->gather(m, send, recv, bytes, root);
}
static void nccl_allgather(tp_comm *c, const void *send, void *recv, size_t bytes) {
    tp_comm *m = ((nccl_impl *)c->impl)->mpi;
    m->allgather(m, send, recv, bytes);
}
static int nccl_allreduce_max_int(tp_comm *c, int v) {
    tp_comm *m = ((nccl_impl *)c->impl)->mpi;
    return m->allreduce_max_int(m, v);
}
static void nccl_barrier(tp_comm *c) {
    tp_comm *m = ((nccl_impl *)c->impl)->mpi;
    m->barrier(m);
}

static void nccl_destroy(tp_comm *c) {
    nccl_impl *im = c->impl;
    if (im->nc) {
        CUDA_CHECK(cudaStreamSynchronize(im->stream));
        NCCL_CHECK(im->nc, ncclCommFinalize(im->nc));
        NCCL_CHECK(im->nc, ncclCommDestroy(im->nc));
    }
    free(im);
    free(c);
}

tp_comm *tp_comm_nccl_create(tp_comm *mpi, tp_backend *b, char *err, size_t err_size) {
    if (!b || !b->name || strcmp(b->name, "cuda") != 0) {
        snprintf(err, err_size, "--comm nccl needs --backend cuda (NCCL reduces GPU buffers)");
        return NULL;
    }
    const int dev = tp_cuda_device(b);
    CUDA_CHECK(cudaSetDevice(dev));

    /* One GPU per rank: compare device UUIDs (unique across nodes) of all ranks. */
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    unsigned char *uu = tp_malloc((size_t)mpi->size * 16);
    mpi->allgather(mpi, prop.uuid.bytes, uu, 16);
    for (int i = 0; i < mpi->size; i++)
        for (int j = i + 1; j < mpi->size; j++)
            if (memcmp(uu + 16 * i, uu + 16 * j, 16) == 0) {
                free(uu);
                snprintf(err, err_size,
                         "--comm nccl needs one GPU per rank, but ranks %d and %d use the same GPU (%d ranks "
                         "in the job); start at most as many ranks per node as GPUs, or use --comm mpi, which "
                         "lets ranks share a GPU",
                         i, j, mpi->size);
                return NULL;
            }
    free(uu);

    nccl_impl *im = tp_calloc(1, sizeof *im);
    im->mpi = mpi;
    im->b = b;
    im->stream = tp_cuda_stream(b);
    if (mpi->size > 1) {
        /* rank 0's ncclUniqueId (or its failure) reaches every rank, so none waits alone */
        struct {
            int ok;
            char msg[256];
            ncclUniqueId id;
        } hdr;
        memset(&hdr, 0, sizeof hdr);
        if (mpi->rank == 0) {
            ncclResult_t r = ncclGetUniqueId(&hdr.id);
            hdr.ok = r == ncclSuccess;
            if (!hdr.ok) {
                const char *last = ncclGetLastError(NULL);
                snprintf(hdr.msg, sizeof hdr.msg, "%s%s%s%s", ncclGetErrorString(r), last && *last ? " (" : "",
                         last && *last ? last : "", last && *last ? ")" : "");
            }
        }
        mpi->bcast(mpi, &hdr, sizeof hdr, 0);
        if (!hdr.ok) {
            free(im);
            snprintf(err, err_size, "NCCL: ncclGetUniqueId failed on rank 0: %s", hdr.msg);
            return NULL;
        }
        NCCL_CHECK(NULL, ncclCommInitRank(&im->nc, mpi->size, hdr.id, mpi->rank));
    }

    tp_comm *c = tp_calloc(1, sizeof *c);
    c->name = "nccl";
    c->capturable = 1; /* ncclAllReduce on the compute stream records into a graph */
    c->rank = mpi->rank;
    c->size = mpi->size;
    c->local_rank = mpi->local_rank;
    c->local_size = mpi->local_size;
    c->allreduce_sum = nccl_allreduce_sum;
    c->bcast = nccl_bcast;
    c->bcast_idle = nccl_bcast_idle;
    c->gather = nccl_gather;
    c->allgather = nccl_allgather;
    c->allreduce_max_int = nccl_allreduce_max_int;
    c->barrier = nccl_barrier;
    c->destroy = nccl_destroy;
    c->impl = im;
    return c;
}
