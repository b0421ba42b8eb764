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
 * tp_die, so no rank is left waiting in a collective.
 *
 * Watchdog: NCCL never times out by itself, so a rank whose peer died or never joined a
 * collective would wait forever. A thread polls every 100 ms: ncclCommGetAsyncError (a network
 * or peer failure NCCL noticed), the oldest all-reduce issued outside graph capture (an event
 * recorded after it on the stream: not done --comm-timeout seconds after issue), and the host's
 * wait on the stream (a CUDA graph replays its all-reduces where this file does not see them, so
 * a step stuck in one shows as a host wait longer than the timeout). On any of these it prints
 * the rank and the collective, calls ncclCommAbort, and ends the job non-zero through tp_die
 * (MPI_Abort: every rank stops). */
#include <nccl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm.h"
#include "kernels/cuda_module.h" /* TP_CUDA_EXPORT */
#include "util/log.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"

#define WD_RING 64              /* eager all-reduces tracked at once */
#define WD_POLL_US 100000       /* watchdog poll period */
#define WD_DEFAULT_TIMEOUT 300.0 /* seconds (--comm-timeout) */

typedef struct {
    cudaEvent_t ev;       /* recorded on the stream right after the all-reduce */
    double issued;        /* monotonic seconds */
    unsigned long long seq;
    size_t n;
    tp_dtype dt;
} wd_entry;

typedef struct {
    tp_comm *mpi;   /* host collectives */
    tp_backend *b;  /* the CUDA backend whose stream carries the all-reduce */
    ncclComm_t nc;  /* NULL with one rank */
    cudaStream_t stream;
    int device, rank;

    /* watchdog (only with a communicator: more than one rank) */
    pthread_t wd;
    int wd_started;
    pthread_mutex_t mu;  /* guards ring, head, count, timeout, last_* */
    int stop;            /* under mu */
    double timeout;      /* seconds; 0: no timeout (async errors are still polled) */
    wd_entry ring[WD_RING];
    int head, count;
    unsigned long long seq;       /* all-reduces issued */
    size_t last_n;                /* the latest one, for the message */
    tp_dtype last_dt;
    int last_captured;
} nccl_impl;

static double mono_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

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

/* ---- watchdog ---- */

static void wd_fail(nccl_impl *im, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void wd_fail(nccl_impl *im, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "tpgen: [rank %d] NCCL watchdog: %s; aborting the NCCL communicator\n", im->rank, msg);
    fflush(stderr);
    ncclCommAbort(im->nc); /* pending collectives of this rank return; its result no longer matters */
    tp_die("NCCL watchdog on rank %d: %s (communicator aborted; raise --comm-timeout if steps are legitimately "
           "this slow)", im->rank, msg);
}

/* Drops the completed all-reduces at the front of the ring. Caller holds mu. Returns the CUDA
 * error of a failed one (cudaSuccess otherwise). */
static cudaError_t wd_pop_done(nccl_impl *im) {
    while (im->count) {
        const cudaError_t e = cudaEventQuery(im->ring[im->head].ev);
        if (e == cudaErrorNotReady) return cudaSuccess;
        if (e != cudaSuccess) return e;
        im->head = (im->head + 1) % WD_RING;
        im->count--;
    }
    return cudaSuccess;
}

static void *wd_main(void *arg) {
    nccl_impl *im = arg;
    if (cudaSetDevice(im->device) != cudaSuccess) return NULL;
    for (;;) {
        usleep(WD_POLL_US);
        ncclResult_t st = ncclSuccess;
        const ncclResult_t r = ncclCommGetAsyncError(im->nc, &st);
        pthread_mutex_lock(&im->mu);
        if (im->stop) {
            pthread_mutex_unlock(&im->mu);
            return NULL;
        }
        const double timeout = im->timeout, now = mono_seconds();
        const unsigned long long seq = im->seq;
        const size_t last_n = im->last_n;
        const tp_dtype last_dt = im->last_dt;
        const int last_captured = im->last_captured;
        if (r != ncclSuccess || (st != ncclSuccess && st != ncclInProgress)) {
            pthread_mutex_unlock(&im->mu);
            const char *le = ncclGetLastError(im->nc);
            if (!le) le = "";
            wd_fail(im, "ncclCommGetAsyncError reports %s%s%s after all-reduce #%llu (%zu x %s)",
                    ncclGetErrorString(r != ncclSuccess ? r : st), *le ? ": " : "", le, seq, last_n,
                    tp_dtype_name(last_dt));
        }
        const cudaError_t ce = wd_pop_done(im);
        if (ce != cudaSuccess) {
            pthread_mutex_unlock(&im->mu);
            wd_fail(im, "the stream failed after all-reduce #%llu: %s", seq, cudaGetErrorString(ce));
        }
        if (timeout > 0 && im->count && now - im->ring[im->head].issued > timeout) {
            const wd_entry e = im->ring[im->head];
            pthread_mutex_unlock(&im->mu);
            wd_fail(im, "all-reduce #%llu (%zu x %s) has not completed %.0f s after it was issued (--comm-timeout %g s)",
                    e.seq, e.n, tp_dtype_name(e.dt), now - e.issued, timeout);
        }
        pthread_mutex_unlock(&im->mu);
        const double waited = tp_cuda_host_wait_seconds(im->b);
        if (timeout > 0 && waited > timeout && seq > 0)
            wd_fail(im, "the host has waited %.0f s for the GPU stream; the latest all-reduce #%llu (%zu x %s%s) or "
                    "a collective issued with it has not completed (--comm-timeout %g s)",
                    waited, seq, last_n, tp_dtype_name(last_dt), last_captured ? ", in a CUDA graph" : "", timeout);
    }
}

static void nccl_set_timeout(tp_comm *c, double seconds) {
    nccl_impl *im = c->impl;
    if (!im->wd_started) return;
    pthread_mutex_lock(&im->mu);
    im->timeout = seconds > 0 ? seconds : 0;
    pthread_mutex_unlock(&im->mu);
}

static void wd_start(nccl_impl *im) {
    pthread_mutex_init(&im->mu, NULL);
    im->timeout = WD_DEFAULT_TIMEOUT;
    for (int i = 0; i < WD_RING; i++) CUDA_CHECK(cudaEventCreateWithFlags(&im->ring[i].ev, cudaEventDisableTiming));
    const int e = pthread_create(&im->wd, NULL, wd_main, im);
    if (e) tp_die("cannot start the NCCL watchdog thread: %s", strerror(e));
    im->wd_started = 1;
}

static void wd_stop(nccl_impl *im) {
    if (!im->wd_started) return;
    pthread_mutex_lock(&im->mu);
    im->stop = 1;
    pthread_mutex_unlock(&im->mu);
    pthread_join(im->wd, NULL);
    for (int i = 0; i < WD_RING; i++) CUDA_CHECK(cudaEventDestroy(im->ring[i].ev));
    pthread_mutex_destroy(&im->mu);
    im->wd_started = 0;
}

static void nccl_allreduce_sum(tp_comm *c, void *buf, size_t n, tp_dtype dt) {
    nccl_impl *im = c->impl;
    if (c->size == 1 || n == 0) return;
    NCCL_CHECK(im->nc, ncclAllReduce(buf, buf, n, nccl_type(dt), ncclSum, im->nc, im->stream));
    enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    CUDA_CHECK(cudaStreamIsCapturing(im->stream, &cap));
    pthread_mutex_lock(&im->mu);
    im->seq++;
    im->last_n = n;
    im->last_dt = dt;
    im->last_captured = cap != cudaStreamCaptureStatusNone;
    /* eager all-reduces get an event; a captured one is watched through the host's wait */
    if (!im->last_captured) {
        const cudaError_t e = wd_pop_done(im);
        if (e != cudaSuccess) {
            pthread_mutex_unlock(&im->mu);
            CUDA_CHECK(e);
        }
        if (im->count < WD_RING) { /* more in flight than that: the oldest ones are watched already */
            wd_entry *w = &im->ring[(im->head + im->count) % WD_RING];
            CUDA_CHECK(cudaEventRecord(w->ev, im->stream));
            w->issued = mono_seconds();
            w->seq = im->seq;
            w->n = n;
            w->dt = dt;
            im->count++;
        }
    }
    pthread_mutex_unlock(&im->mu);
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
    wd_stop(im);
    if (im->nc) {
        CUDA_CHECK(cudaStreamSynchronize(im->stream));
        NCCL_CHECK(im->nc, ncclCommFinalize(im->nc));
        NCCL_CHECK(im->nc, ncclCommDestroy(im->nc));
    }
    free(im);
    free(c);
}

TP_CUDA_EXPORT tp_comm *tpcuda_comm_nccl_create(tp_comm *mpi, tp_backend *b, char *err, size_t err_size) {
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
        im->device = dev;
        im->rank = mpi->rank;
        wd_start(im);
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
    c->set_timeout = nccl_set_timeout;
    c->destroy = nccl_destroy;
    c->impl = im;
    return c;
}
