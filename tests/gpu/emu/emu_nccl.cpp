/* Emulated NCCL over MPI: the calls comm/comm_nccl.c makes. Each rank is its own process with
 * its own emulated device; a communicator is an MPI communicator split from MPI_COMM_WORLD by
 * the unique id rank 0 drew (every rank of the job joins: tpgen runs one group per job).
 * ncclAllReduce is submitted on the stream like a kernel (so a graph capture records it and a
 * replay runs it again): every rank first checks that all ranks reduce the same count, type and
 * operation (a mismatch hangs or corrupts on GPUs; here every rank sees it, rank 0 names the call
 * and the first rank that differs with both counts and types, and every rank exits 1), then
 * gathers every rank's buffer and sums in rank order, rounding to the element type after each
 * addition as NCCL's F16/BF16 sums do (an f32 add, rounded), so every rank gets the same bits. */
#define OMPI_SKIP_MPICXX 1 /* the C API only */
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <vector>

#include "kernels/common/tp_round.h"
#include "tests/gpu/emu/emu_rt.h"

extern "C" {
#include "util/log.h"
}

struct ncclComm {
    MPI_Comm mpi;
    int rank, size;
};

extern "C" const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclSystemError: return "unhandled system error";
    default: return "unknown error";
    }
}
extern "C" const char *ncclGetLastError(ncclComm_t) { return ""; }

extern "C" ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    memset(id, 0, sizeof *id);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    const int color = (int)(((unsigned)ts.tv_nsec ^ (unsigned)getpid() * 2654435761u) & 0x3fffffff);
    memcpy(id->internal, &color, sizeof color);
    return ncclSuccess;
}

static void mpi_check(int r, const char *call) {
    if (r != MPI_SUCCESS) emu_fatal("emulated NCCL: %s failed (MPI error %d)", call, r);
}

extern "C" ncclResult_t ncclCommInitRank(ncclComm_t *c, int nranks, ncclUniqueId id, int rank) {
    int color;
    memcpy(&color, id.internal, sizeof color);
    MPI_Comm m;
    mpi_check(MPI_Comm_split(MPI_COMM_WORLD, color, rank, &m), "MPI_Comm_split");
    int size = 0, r = 0;
    MPI_Comm_size(m, &size);
    MPI_Comm_rank(m, &r);
    if (size != nranks || r != rank) {
        fprintf(stderr, "emulated NCCL: ncclCommInitRank(nranks %d, rank %d): %d ranks joined with this id, this one "
                "as rank %d\n", nranks, rank, size, r);
        MPI_Comm_free(&m);
        return ncclInvalidArgument;
    }
    *c = new ncclComm{m, rank, size};
    return ncclSuccess;
}
extern "C" ncclResult_t ncclCommFinalize(ncclComm_t) { return ncclSuccess; }
extern "C" ncclResult_t ncclCommDestroy(ncclComm_t c) {
    if (c) MPI_Comm_free(&c->mpi);
    delete c;
    return ncclSuccess;
}
extern "C" ncclResult_t ncclCommAbort(ncclComm_t) { return ncclSuccess; }
extern "C" ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t *st) {
    *st = ncclSuccess;
    return ncclSuccess;
}

static const char *type_name(ncclDataType_t t) {
    return t == ncclFloat16 ? "f16" : t == ncclBfloat16 ? "bf16" : t == ncclFloat32 ? "f32" : "?";
}

static float load(const void *p, ncclDataType_t t, size_t i) {
    if (t == ncclFloat32) return ((const float *)p)[i];
    const uint16_t h = ((const uint16_t *)p)[i];
    if (t == ncclBfloat16) {
        const uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    return tp_f16_to_f32(h);
}
static void store(void *p, ncclDataType_t t, size_t i, float v) {
    if (t == ncclFloat32) ((float *)p)[i] = v;
    else ((uint16_t *)p)[i] = t == ncclBfloat16 ? tp_f32_to_bf16(v) : tp_f32_to_f16(v);
}

static void allreduce_run(ncclComm_t c, const void *send, void *recv, size_t n, ncclDataType_t t) {
    long mine[3] = {(long)n, (long)t, (long)ncclSum}, all[3 * 64];
    if (c->size > 64) emu_fatal("emulated NCCL: more than 64 ranks");
    mpi_check(MPI_Allgather(mine, 3, MPI_LONG, all, 3, MPI_LONG, c->mpi), "MPI_Allgather");
    for (int r = 1; r < c->size; r++)
        if (memcmp(all, all + 3 * r, sizeof mine))
            /* every rank has the same table: one message (rank 0's), every rank exits 1 */
            tp_die_all("emulated CUDA: ncclAllReduce: the ranks disagree: rank 0 reduces count %ld of %s, rank %d "
                       "count %ld of %s (every rank must give the same count and type: NCCL would hang or corrupt)",
                       all[0], type_name((ncclDataType_t)all[1]), r, all[3 * r],
                       type_name((ncclDataType_t)all[3 * r + 1]));
    const size_t es = t == ncclFloat32 ? 4 : 2, bytes = n * es;
    std::vector<char> every((size_t)c->size * bytes + 1);
    mpi_check(MPI_Allgather(send, (int)bytes, MPI_BYTE, every.data(), (int)bytes, MPI_BYTE, c->mpi), "MPI_Allgather");
    for (size_t i = 0; i < n; i++) {
        float acc = load(every.data(), t, i);
        for (int r = 1; r < c->size; r++) {
            acc += load(every.data() + (size_t)r * bytes, t, i);
            if (t != ncclFloat32) { /* rounded to the element type after each addition */
                uint16_t h[1];
                store(h, t, 0, acc);
                acc = load(h, t, 0);
            }
        }
        store(recv, t, i, acc);
    }
}

extern "C" ncclResult_t ncclAllReduce(const void *send, void *recv, size_t n, ncclDataType_t t, ncclRedOp_t op,
                                      ncclComm_t c, cudaStream_t s) {
    if (op != ncclSum || (t != ncclFloat16 && t != ncclBfloat16 && t != ncclFloat32)) {
        fprintf(stderr, "emulated NCCL: ncclAllReduce: op %d on type %d is not emulated\n", (int)op, (int)t);
        return ncclInvalidArgument;
    }
    if ((size_t)n * (t == ncclFloat32 ? 4 : 2) > 0x7fffffff) return ncclInvalidArgument;
    char call[96];
    snprintf(call, sizeof call, "ncclAllReduce(count %zu, %s)", n, type_name(t));
    emu_check_device(call, "the send buffer", send, n * (t == ncclFloat32 ? 4 : 2));
    emu_check_device(call, "the receive buffer", recv, n * (t == ncclFloat32 ? 4 : 2));
    emu_submit(s, NULL, [=]() { allreduce_run(c, send, recv, n, t); });
    return ncclSuccess;
}
