/* The NCCL communicator on 2+ ranks, nccl-tests style: inputs whose sum is exactly predictable
 * in F32, F16 and BF16, so every element is either right or counted in #wrong.
 *
 * usage: mpirun -np 2 test_nccl_comm            one GPU per rank; exits 77 (SKIPPED) with fewer
 *                                               GPUs than ranks on the node
 *        mpirun -np 2 test_nccl_comm --shared   every rank on GPU 0 (needs one GPU): NCCL must
 *                                               refuse with a clear message, and the MPI
 *                                               communicator's staged all-reduce of device
 *                                               buffers must give the same exact sums
 *        mpirun -np 2 test_nccl_comm --watchdog  one GPU per rank: rank 1 never joins an all-reduce;
 *                                               rank 0's watchdog (--comm-timeout 2 s) must abort
 *                                               it, name rank 0 and the all-reduce, and end the job
 *                                               non-zero (tests/gpu/watchdog.sh checks that)
 *        mpirun -np 2 test_nccl_comm --count-mismatch  rank r all-reduces 1000 + 8 r F16 elements
 *        mpirun -np 2 test_nccl_comm --type-mismatch   rank 0 all-reduces F16, the others BF16
 *                                               the ranks disagree: on GPUs NCCL hangs or corrupts
 *                                               memory, so these run on the emulated device only
 *                                               (tests/gpu_emu_faults.cmake), which must end the
 *                                               job naming the call and both counts and types
 * Checks: all-reduce of 1 .. 4M+3 elements in each dtype (in place, ordered on the backend's
 * stream: the inputs are written and the results read with no explicit sync between), the same
 * through the MPI communicator, the host collectives delegated to MPI, and (one GPU per rank) a
 * timing of a 64 MiB all-reduce reported as algbw and busbw = algbw * 2(n-1)/n. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm.h"
#include "util/log.h"
#include "kernels/backend.h"
#include "kernels/cuda_module.h"
#include "kernels/dtype.h"

/* Element i on rank r: (r + 1) * v_i with v_i = ((i % 13) - 6) / 2. The sum over n ranks is
 * n(n+1)/2 * v_i: multiples of 1/2 below 2^7 for n <= 8, exact in BF16 (8 significant bits),
 * F16 and F32, whatever order the reduction adds them in. */
static float value(size_t i, int r) { return (float)(r + 1) * (float)((int)(i % 13) - 6) * 0.5f; }

static long allreduce_wrong(tp_comm *c, tp_backend *b, size_t n, tp_dtype dt) {
    const size_t es = tp_dtype_size(dt);
    float *h = tp_malloc(n * sizeof(float));
    void *raw = tp_malloc(n * es);
    for (size_t i = 0; i < n; i++) h[i] = value(i, c->rank);
    tp_convert_from_f32(raw, dt, h, n);
    void *d = b->alloc(b, n * es, "all-reduce test buffer");
    b->to_device(b, d, raw, n * es); /* no sync: the all-reduce is ordered after it on the stream */
    c->allreduce_sum(c, d, n, dt);
    b->to_host(b, raw, d, n * es);
    tp_convert_to_f32(h, raw, dt, n);
    const float tri = (float)(c->size * (c->size + 1) / 2);
    long wrong = 0;
    for (size_t i = 0; i < n; i++) wrong += h[i] != tri * value(i, 0);
    b->free(b, d);
    free(h);
    free(raw);
    return wrong;
}

static int run_sizes(tp_comm *c, tp_comm *mpi, tp_backend *b) {
    const size_t sizes[] = {1, 7, 1000, 65536 + 5, ((size_t)4 << 20) + 3};
    const tp_dtype dts[] = {TP_F32, TP_F16, TP_BF16};
    int failed = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (int d = 0; d < 3; d++) {
            long w = allreduce_wrong(c, b, sizes[s], dts[d]);
            int worst = mpi->allreduce_max_int(mpi, (int)(w > 1000000000 ? 1000000000 : w));
            if (c->rank == 0)
                printf("%-5s all-reduce %9zu x %-4s on %d ranks: #wrong %d %s\n", c->name, sizes[s],
                       tp_dtype_name(dts[d]), c->size, worst, worst ? "FAIL" : "ok");
            failed += worst != 0;
        }
    return failed;
}

static int run_host_collectives(tp_comm *c) {
    int failed = 0;
    int v = c->rank == 0 ? 4242 : -1;
    c->bcast(c, &v, sizeof v, 0);
    failed += v != 4242;
    int32_t mine = 100 + c->rank, *all = tp_malloc(c->size * sizeof(int32_t));
    c->allgather(c, &mine, all, sizeof mine);
    for (int r = 0; r < c->size; r++) failed += all[r] != 100 + r;
    memset(all, 0, c->size * sizeof(int32_t));
    c->gather(c, &mine, all, sizeof mine, 0);
    if (c->rank == 0)
        for (int r = 0; r < c->size; r++) failed += all[r] != 100 + r;
    failed += c->allreduce_max_int(c, c->rank * 3) != (c->size - 1) * 3;
    c->barrier(c);
    free(all);
    return failed;
}

static void time_allreduce(tp_comm *c, tp_backend *b) {
    const size_t n = (size_t)32 << 20; /* 64 MiB of F16 */
    void *d = b->alloc(b, n * 2, "all-reduce timing buffer");
    const int iters = 20;
    for (int i = 0; i < 3; i++) c->allreduce_sum(c, d, n, TP_F16); /* warm-up; the contents do not matter */
    b->sync(b);
    c->barrier(c);
    double t0 = tp_now_seconds();
    for (int i = 0; i < iters; i++) c->allreduce_sum(c, d, n, TP_F16);
    b->sync(b);
    double t = (tp_now_seconds() - t0) / iters;
    if (c->rank == 0) {
        double algbw = n * 2 / t / 1e9, busbw = algbw * 2.0 * (c->size - 1) / c->size;
        printf("%-5s all-reduce 64 MiB F16: %.3f ms, algbw %.1f GB/s, busbw %.1f GB/s\n", c->name, t * 1e3, algbw,
               busbw);
    }
    b->free(b, d);
}

int main(int argc, char **argv) {
    tp_comm *mpi = tp_comm_mpi_init(&argc, &argv);
    const int shared = argc > 1 && strcmp(argv[1], "--shared") == 0;
    const int watchdog = argc > 1 && strcmp(argv[1], "--watchdog") == 0;
    const int count_mismatch = argc > 1 && strcmp(argv[1], "--count-mismatch") == 0;
    const int type_mismatch = argc > 1 && strcmp(argv[1], "--type-mismatch") == 0;
    char err[2048];
    /* the module and its NCCL entry, before the no-GPU skip: checked on any machine */
    if (!tp_cuda_module_symbol("tpcuda_comm_nccl_create", err, sizeof err)) tp_die("%s", err);
    const int n_dev = tp_backend_cuda_device_count();
    if (mpi->size < 2) {
        if (mpi->rank == 0) fprintf(stderr, "test_nccl_comm: run it on 2 or more ranks (mpirun -np 2)\n");
        tp_comm_finalize(mpi);
        return 1;
    }
    if (n_dev == 0 || (!shared && n_dev < mpi->local_size)) {
        if (mpi->rank == 0)
            printf("SKIPPED: %d ranks on this node, %d GPU(s) visible; this test needs %s\n", mpi->local_size, n_dev,
                   shared ? "one GPU" : "one GPU per rank");
        tp_comm_finalize(mpi);
        return 77;
    }
    tp_backend *b = tp_backend_cuda_create(shared ? 0 : mpi->local_rank, TP_F16, err, sizeof err);
    if (!b) tp_die("%s", err);
    tp_comm_mpi_set_backend(mpi, b);
    int failed = 0;

    tp_comm *nc = tp_comm_nccl_create(mpi, b, err, sizeof err);
    if (watchdog) {
        if (!nc) tp_die("tp_comm_nccl_create: %s", err);
        nc->set_timeout(nc, 2.0);
        if (mpi->rank == 0) { /* rank 1 never joins: the all-reduce cannot complete */
            void *d = b->alloc(b, 1024 * 2, "watchdog test buffer");
            nc->allreduce_sum(nc, d, 1024, TP_F16);
            printf("watchdog: rank 0 waits for an all-reduce rank 1 never joins (timeout 2 s)\n");
            fflush(stdout);
            b->sync(b);
            printf("FAIL: the all-reduce completed without rank 1\n");
        } else {
            const double t0 = tp_now_seconds();
            while (tp_now_seconds() - t0 < 60) usleep(100000); /* the watchdog's MPI_Abort ends this rank */
            printf("FAIL: rank 1 was not stopped within 60 s\n");
        }
        tp_comm_finalize(mpi);
        return 1;
    }
    if (count_mismatch || type_mismatch) { /* a bug in the caller: the all-reduce must not pass */
        if (!nc) tp_die("tp_comm_nccl_create: %s", err);
        const size_t n = count_mismatch ? 1000 + 8 * (size_t)mpi->rank : 1000;
        const tp_dtype dt = type_mismatch && mpi->rank > 0 ? TP_BF16 : TP_F16;
        void *d = b->alloc(b, n * 2, "mismatch test buffer");
        nc->allreduce_sum(nc, d, n, dt);
        b->sync(b);
        fprintf(stderr, "FAIL: rank %d: an all-reduce of %zu x %s passed\n", mpi->rank, n, tp_dtype_name(dt));
        tp_comm_finalize(mpi);
        return 1;
    }
    if (shared) {
        const int refused = !nc && strstr(err, "one GPU per rank") && strstr(err, "--comm mpi");
        if (mpi->rank == 0)
            printf("nccl  refuses ranks sharing a GPU: %s -> %s\n", nc ? "(created)" : err, refused ? "ok" : "FAIL");
        failed += !refused;
        if (nc) nc->destroy(nc);
        failed += run_sizes(mpi, mpi, b); /* the MPI communicator stages device buffers through the host */
    } else {
        if (!nc) tp_die("tp_comm_nccl_create: %s", err);
        failed += run_sizes(nc, mpi, b);
        int hf = run_host_collectives(nc);
        hf = mpi->allreduce_max_int(mpi, hf);
        if (mpi->rank == 0) printf("nccl  host collectives through MPI: %s\n", hf ? "FAIL" : "ok");
        failed += hf != 0;
        time_allreduce(nc, b);
        nc->destroy(nc);
    }
    failed = mpi->allreduce_max_int(mpi, failed);
    if (mpi->rank == 0) printf("%s\n", failed ? "FAILED" : "all checks passed");
    b->destroy(b);
    tp_comm_finalize(mpi);
    return failed ? 1 : 0;
}
