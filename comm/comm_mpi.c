/* The MPI communicator: host collectives for control data, and the activation all-reduce.
 * Device buffers of a GPU backend are staged through host memory (converted to f32 for the
 * sum, as MPI has no 16-bit float sum); this is what lets several ranks share one GPU.
 *
 * Watchdog (--comm-timeout, set_timeout): Open MPI does not end a rank whose peer is gone. When
 * a peer's process dies, its TCP transport prints "An MPI communication peer process has
 * unexpectedly disconnected" and the collective waits for ever; when its node loses power, not
 * even that. A thread polls every 100 ms the collective in flight: the activation all-reduce, the
 * gathers, the max-reduce and the barrier, which every rank enters at the same point of a step,
 * within milliseconds of the others, once the first all-reduce has begun (before it, at load, one
 * rank may read its weights for minutes longer than another); and a broadcast on its root, which
 * only sends (rank 0 sending a step to a dead peer blocked there). Not a broadcast on the other
 * ranks: they wait there for rank 0's input (a prompts FIFO, stdin, a server's next request) for
 * as long as it takes. One not done after the timeout ends the job through tp_die (MPI_Abort),
 * naming the rank and the collective, so the launcher (srun --kill-on-bad-exit, mpirun) ends the
 * rest. */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm.h"
#include "comm/mpi_check.h"
#include "kernels/dtype.h"

typedef struct {
    tp_backend *b;          /* owner of allreduce buffers; NULL or "cpu": host memory */
    void *stage;            /* host copy of a device buffer (act dtype) */
    float *stage_f32;       /* the same in f32 for MPI_SUM */
    size_t stage_n;

    /* watchdog: started by set_timeout with a timeout > 0 and more than one rank */
    pthread_t wd;
    int wd_started;
    _Atomic double timeout;      /* seconds */
    _Atomic int armed;           /* the first all-reduce has begun: the ranks run in steps */
    _Atomic double in_flight;    /* tp_now_seconds() when the watched collective in flight began; 0: none */
    _Atomic(const char *) what;  /* its name ("all-reduce", "gather", ...) */
    _Atomic size_t in_flight_n;  /* its size, in units of */
    _Atomic(const char *) unit;  /* "x f32", "bytes" */
    _Atomic unsigned long long seq; /* watched collectives begun */
    int rank;
} mpi_impl;

#define WD_POLL_NS 100000000L /* watchdog poll period */

static void mpi_die(void *ctx) {
    (void)ctx;
    MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

/* Every rank is failing the same way: rank 0 has printed the reason. Wait (bounded) for the
 * others so the message is not cut off by an abort, then leave cleanly with status 1. When the
 * others never come (the error was this rank's alone, e.g. a file only its node lacks), a rank
 * other than 0 prints the message rank 0 did not, then ends the job. */
static void mpi_die_all(void *ctx) {
    (void)ctx;
    MPI_Request req;
    if (MPI_Ibarrier(MPI_COMM_WORLD, &req) == MPI_SUCCESS) {
        struct timespec nap = {0, 2000000};
        for (int i = 0; i < 5000; i++) { /* ~10 s */
            int done = 0;
            MPI_Test(&req, &done, MPI_STATUS_IGNORE);
            if (done) {
                MPI_Finalize();
                exit(1);
            }
            nanosleep(&nap, NULL);
        }
    }
    if (tp_log_rank() != 0) tp_die("%s", tp_log_die_all_message());
    MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

static void ensure_stage(mpi_impl *im, size_t n) {
    if (im->stage_n >= n) return;
    if (im->stage) im->b->host_free(im->b, im->stage);
    free(im->stage_f32);
    im->stage = im->b->host_alloc(im->b, n * 4, "all-reduce staging buffer");
    im->stage_f32 = tp_malloc(n * sizeof(float));
    im->stage_n = n;
}

static void *wd_main(void *arg) {
    mpi_impl *im = arg;
    for (;;) {
        struct timespec nap = {0, WD_POLL_NS};
        nanosleep(&nap, NULL);
        const double since = atomic_load(&im->in_flight), timeout = atomic_load(&im->timeout);
        if (since > 0 && timeout > 0 && tp_now_seconds() - since > timeout) {
            const unsigned long long seq = atomic_load(&im->seq);
            const char *what = atomic_load(&im->what), *unit = atomic_load(&im->unit);
            const size_t n = atomic_load(&im->in_flight_n);
            if (atomic_load(&im->in_flight) != since) continue; /* it just completed */
            fprintf(stderr, "tpgen: [rank %d] MPI watchdog: %s #%llu (%zu %s) has not completed %.0f s after it began "
                    "(--comm-timeout %g s): a peer rank is gone or stalled\n", im->rank, what, seq, n, unit,
                    tp_now_seconds() - since, timeout);
            fflush(stderr);
            tp_die("MPI watchdog on rank %d: %s #%llu not completed after %g s (--comm-timeout; a lost node or a dead "
                   "rank; raise it if steps are legitimately this slow)", im->rank, what, seq, timeout);
        }
    }
    return NULL;
}

static void mpi_set_timeout(tp_comm *c, double seconds) {
    mpi_impl *im = c->impl;
    atomic_store(&im->timeout, seconds > 0 ? seconds : 0);
    if (seconds <= 0 || c->size == 1 || im->wd_started) return;
    const int e = pthread_create(&im->wd, NULL, wd_main, im);
    if (e != 0) tp_die("comm: cannot start the MPI watchdog thread: %s", strerror(e));
    im->wd_started = 1;
}

/* A watched collective begins (once armed) and ends: what the watchdog reads. */
static void wd_begin(mpi_impl *im, const char *what, size_t n, const char *unit) {
    if (!im->wd_started || !atomic_load(&im->armed)) return; /* --comm-timeout 0: no clock read a step */
    atomic_store(&im->what, what);
    atomic_store(&im->in_flight_n, n);
    atomic_store(&im->unit, unit);
    atomic_fetch_add(&im->seq, 1);
    atomic_store(&im->in_flight, tp_now_seconds());
}
static void wd_end(mpi_impl *im) {
    if (im->wd_started) atomic_store(&im->in_flight, 0.0);
}

/* MPI_Allreduce (sum, f32, in place) under the watchdog's eye; the first one arms it */
static void allreduce_f32(mpi_impl *im, float *buf, size_t n) {
    atomic_store(&im->armed, 1);
    wd_begin(im, "all-reduce", n, "x f32");
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
    wd_end(im);
}

static void mpi_allreduce_sum(tp_comm *c, void *buf, size_t n, tp_dtype dt) {
    if (c->size == 1) return;
    mpi_impl *im = c->impl;
    if (n > INT_MAX) tp_die("all-reduce of %zu elements exceeds MPI's int count", n);
    int host = !im->b || strcmp(im->b->name, "cpu") == 0;
    if (host && dt == TP_F32) {
        allreduce_f32(im, buf, n);
        return;
    }
    ensure_stage(im, n);
    size_t bytes = n * tp_dtype_size(dt);
    if (host) memcpy(im->stage, buf, bytes);
    else im->b->to_host(im->b, im->stage, buf, bytes);
    tp_convert_to_f32(im->stage_f32, im->stage, dt, n);
    allreduce_f32(im, im->stage_f32, n);
    tp_convert_from_f32(im->stage, dt, im->stage_f32, n);
    if (host) memcpy(buf, im->stage, bytes);
    else im->b->to_device(im->b, buf, im->stage, bytes);
}

static int checked_count(size_t bytes) {
    if (bytes > INT_MAX) tp_die("message of %zu bytes exceeds MPI's int count", bytes);
    return (int)bytes;
}

static void mpi_bcast(tp_comm *c, void *buf, size_t bytes, int root) {
    if (c->size == 1) return;
    if (c->rank == root) wd_begin(c->impl, "broadcast", bytes, "bytes");
    MPI_CHECK(MPI_Bcast(buf, checked_count(bytes), MPI_BYTE, root, MPI_COMM_WORLD));
    if (c->rank == root) wd_end(c->impl);
}

static void mpi_bcast_idle(tp_comm *c, void *buf, size_t bytes, int root) {
    if (c->size == 1) return;
    MPI_Request req;
    MPI_CHECK(MPI_Ibcast(buf, checked_count(bytes), MPI_BYTE, root, MPI_COMM_WORLD, &req));
    if (c->rank == root) wd_begin(c->impl, "broadcast", bytes, "bytes");
    double t0 = MPI_Wtime();
    long sleep_ns = 20000;
    for (;;) {
        int done = 0;
        MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
        if (done) {
            if (c->rank == root) wd_end(c->impl);
            return;
        }
        /* spin for the first 2 ms (steps follow each other that fast), then sleep: up to 1 ms
         * at a time, 5 ms once idle for 0.2 s (each wake-up costs a progress poll of MPI) */
        double idle = MPI_Wtime() - t0;
        if (idle < 2e-3) continue;
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        long cap = idle < 0.2 ? 1000000 : 5000000;
        sleep_ns = sleep_ns * 2 < cap ? sleep_ns * 2 : cap;
    }
}

static void mpi_gather(tp_comm *c, const void *send, void *recv, size_t bytes, int root) {
    if (c->size == 1) {
        if (recv != send) memmove(recv, send, bytes);
        return;
    }
    int n = checked_count(bytes);
    wd_begin(c->impl, "gather", bytes, "bytes");
    MPI_CHECK(MPI_Gather(send, n, MPI_BYTE, recv, n, MPI_BYTE, root, MPI_COMM_WORLD));
    wd_end(c->impl);
}

static void mpi_allgather(tp_comm *c, const void *send, void *recv, size_t bytes) {
    if (c->size == 1) {
        if (recv != send) memmove(recv, send, bytes);
        return;
    }
    int n = checked_count(bytes);
    wd_begin(c->impl, "allgather", bytes, "bytes");
    MPI_CHECK(MPI_Allgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, MPI_COMM_WORLD));
    wd_end(c->impl);
}

static int mpi_allreduce_max_int(tp_comm *c, int v) {
    if (c->size == 1) return v;
    int out;
    wd_begin(c->impl, "max-reduce", 1, "x int");
    MPI_CHECK(MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    wd_end(c->impl);
    return out;
}

static void mpi_barrier(tp_comm *c) {
    if (c->size == 1) return;
    wd_begin(c->impl, "barrier", 0, "bytes");
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    wd_end(c->impl);
}

static void mpi_destroy(tp_comm *c) {
    mpi_impl *im = c->impl;
    if (im->wd_started) { /* it sleeps in nanosleep, a cancellation point, between polls */
        pthread_cancel(im->wd);
        pthread_join(im->wd, NULL);
    }
    if (im->stage) im->b->host_free(im->b, im->stage);
    free(im->stage_f32);
    free(im);
    free(c);
}

tp_comm *tp_comm_mpi_init(int *argc, char ***argv) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided;
        if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
            fprintf(stderr, "tpgen: error: MPI_Init failed\n");
            exit(1);
        }
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    tp_comm *c = tp_calloc(1, sizeof *c);
    c->name = "mpi";
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &c->rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &c->size));
    /* Ranks sharing this node: works the same under mpirun and srun. */
    MPI_Comm local;
    MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &local));
    MPI_CHECK(MPI_Comm_rank(local, &c->local_rank));
    MPI_CHECK(MPI_Comm_size(local, &c->local_size));
    MPI_CHECK(MPI_Comm_free(&local));
    tp_log_set_rank(c->rank, c->size);
    tp_exit_hooks hooks = {mpi_die, mpi_die_all, NULL};
    tp_log_set_exit_hooks(&hooks);

    c->allreduce_sum = mpi_allreduce_sum;
    c->bcast = mpi_bcast;
    c->bcast_idle = mpi_bcast_idle;
    c->gather = mpi_gather;
    c->allgather = mpi_allgather;
    c->allreduce_max_int = mpi_allreduce_max_int;
    c->barrier = mpi_barrier;
    c->set_timeout = mpi_set_timeout;
    c->destroy = mpi_destroy;
    mpi_impl *im = tp_calloc(1, sizeof(mpi_impl));
    im->rank = c->rank;
    c->impl = im;
    return c;
}

/* The staging buffers belong to the backend that made them: a new backend (or NULL, before
 * the backend is destroyed) releases them. */
void tp_comm_mpi_set_backend(tp_comm *c, tp_backend *b) {
    mpi_impl *im = c->impl;
    if (im->b != b && im->stage) {
        im->b->host_free(im->b, im->stage);
        free(im->stage_f32);
        im->stage = NULL;
        im->stage_f32 = NULL;
        im->stage_n = 0;
    }
    im->b = b;
}

void tp_comm_finalize(tp_comm *c) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Finalize();
    /* The backend may be destroyed by now: a staging buffer not released by
     * tp_comm_mpi_set_backend(c, NULL) is left to the process exit. */
    ((mpi_impl *)c->impl)->stage = NULL;
    mpi_destroy(c);
}
