/* tpgen bench-comm: the communicator's all-reduce, timed and checked the way nccl-tests does.
 *
 * The all-reduce is the one the model calls once per layer (tp_comm.allreduce_sum: MPI, or NCCL
 * on GPUs), on a device buffer of the backend the model would use, for f32, f16 and bf16, at
 * every power-of-two size from MIN to MAX bytes. Per size (nccl-tests' definitions):
 *   time   = mean over --iters calls after --warmup calls, the slowest rank's (max over ranks);
 *   algbw  = bytes / time;
 *   busbw  = algbw * 2(n-1)/n, the bytes each rank's link carries in a ring all-reduce, so it
 *            compares with the link's bandwidth whatever n is (0 at n = 1: nothing moves);
 *   #wrong = elements, over all ranks, whose sum differs from the exact one. The check runs
 *            after the timing on fresh inputs: small integers per rank (|x| <= 4), so every
 *            partial sum is an integer of at most 4n <= 128 in magnitude, exact in bf16's 8-bit
 *            significand, f16 and f32, in any summation order. Any difference is a bug.
 * The timed calls run on zeros (in place, inputs would otherwise grow by n per call).
 * A non-zero #wrong anywhere ends the job with status 1 after the table.
 *
 * TPGEN_BENCH_COMM_PERTURB=R (a test hook) adds 1 to one input element on rank R, so the tests
 * can see the check fail. */
#include <errno.h>
#include <stdio.h>

#include "util/threads.h"
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "job.h"
#include "util/log.h"

#define MAX_BYTES (1ull << 31) /* 2 GiB: bf16 count stays within MPI's int count */
#define CHECK_CHUNK 65536      /* elements converted at a time for the fill and the check */
#define MAX_CHECK_RANKS 32     /* 4 * n must stay within bf16's exact integers (256) */

static const char *USAGE =
    "usage: mpirun -np N tpgen bench-comm [--sizes MIN:MAX] [--iters N] [--warmup N] [--dtypes f32,f16,bf16]\n"
    "       [--json] [--backend cpu|cuda] [--comm mpi|nccl] [--threads N]\n"
    "  --sizes MIN:MAX  bytes, powers of two from MIN up to MAX (default 8:268435456; K, M, G suffixes: 8:256M)";

typedef struct {
    unsigned long long min_bytes, max_bytes;
    int iters, warmup, json;
    int dtypes[3], n_dtypes;
    tp_args job; /* --backend, --comm, --threads for tp_job_backend */
} comm_args;

/* "268435456", "256M", "1G" -> bytes; 0 on a malformed number. */
static unsigned long long parse_bytes(const char *s, const char *end) {
    if (s == end || *s < '0' || *s > '9') return 0;
    char *e;
    errno = 0;
    unsigned long long x = strtoull(s, &e, 10);
    if (errno) return 0;
    int shift = 0;
    if (e < end && (*e == 'K' || *e == 'k')) shift = 10, e++;
    else if (e < end && (*e == 'M' || *e == 'm')) shift = 20, e++;
    else if (e < end && (*e == 'G' || *e == 'g')) shift = 30, e++;
    if (e != end || x > (MAX_BYTES >> shift)) return 0;
    return x << shift;
}

static void parse_sizes(comm_args *c, const char *v) {
    const char *colon = strchr(v, ':');
    unsigned long long lo = colon ? parse_bytes(v, colon) : 0, hi = colon ? parse_bytes(colon + 1, v + strlen(v)) : 0;
    if (!lo || !hi)
        tp_die_all("--sizes expects MIN:MAX in bytes, each 4 to %llu (like 8:268435456 or 8:256M), got \"%s\"",
                   MAX_BYTES, v);
    if (lo < 4) tp_die_all("--sizes: MIN %llu is below 4 bytes (one f32 element)", lo);
    if (lo > hi) tp_die_all("--sizes: MIN %llu exceeds MAX %llu", lo, hi);
    c->min_bytes = lo;
    c->max_bytes = hi;
}

static void parse_dtypes(comm_args *c, const char *v) {
    c->n_dtypes = 0;
    const char *p = v;
    while (*p) {
        size_t n = strcspn(p, ",");
        int dt = n == 3 && !strncmp(p, "f32", 3) ? TP_F32 : n == 3 && !strncmp(p, "f16", 3) ? TP_F16
               : n == 4 && !strncmp(p, "bf16", 4) ? TP_BF16 : -1;
        if (dt < 0 || c->n_dtypes == 3) tp_die_all("--dtypes expects a list of f32, f16, bf16 (like f32,bf16), got \"%s\"", v);
        c->dtypes[c->n_dtypes++] = dt;
        p += n + (p[n] == ',');
    }
    if (!c->n_dtypes) tp_die_all("--dtypes expects a list of f32, f16, bf16 (like f32,bf16), got \"%s\"", v);
}

static void comm_args_parse(comm_args *c, int argc, char **argv) {
    memset(c, 0, sizeof *c);
    c->min_bytes = 8;
    c->max_bytes = 256u << 20;
    c->iters = 20;
    c->warmup = 5;
    c->dtypes[0] = TP_F32, c->dtypes[1] = TP_F16, c->dtypes[2] = TP_BF16;
    c->n_dtypes = 3;
    c->job.cmd = "bench-comm";
    for (int i = 0; i < argc; i++) {
        char flag[64], *v = tp_flag_split(argv[i], flag, sizeof flag, USAGE);
#define IS(name) (strcmp(flag, name) == 0)
#define VAL() (v ? v : (i + 1 < argc ? argv[++i] : (tp_die_all("%s needs a value", flag), (char *)NULL)))
        if (IS("--help") || IS("-h")) tp_die_all("%s", USAGE);
        else if (IS("--sizes")) parse_sizes(c, VAL());
        else if (IS("--iters")) c->iters = (int)tp_parse_long(flag, VAL(), 1, 100000);
        else if (IS("--warmup")) c->warmup = (int)tp_parse_long(flag, VAL(), 0, 100000);
        else if (IS("--dtypes")) parse_dtypes(c, VAL());
        else if (IS("--json")) c->json = 1;
        else if (IS("--backend")) c->job.backend = VAL();
        else if (IS("--comm")) c->job.comm = VAL();
        else if (IS("--threads")) c->job.threads = (int)tp_parse_long(flag, VAL(), 0, TP_THREADS_MAX);
        else tp_die_all("unknown flag %s for `tpgen bench-comm`\n%s", flag, USAGE);
#undef IS
#undef VAL
    }
    if (c->job.backend && strcmp(c->job.backend, "cpu") && strcmp(c->job.backend, "cuda"))
        tp_die_all("--backend must be cpu or cuda, got \"%s\"", c->job.backend);
    if (c->job.comm && strcmp(c->job.comm, "mpi") && strcmp(c->job.comm, "nccl"))
        tp_die_all("--comm must be mpi or nccl, got \"%s\"", c->job.comm);
}

/* Input of rank r at element i for the check: an integer in [-4, 4]. */
static float check_input(size_t i, int r) { return (float)((int)((i * 7 + (size_t)r * 3) % 9) - 4); }

/* Fills n elements of dt at dev with the check inputs of rank r (zeros when zero != 0), through
 * the host staging buffer. */
static void fill(tp_backend *b, void *dev, void *host, float *f32, size_t n, tp_dtype dt, int r, int zero,
                 long perturb) {
    size_t es = tp_dtype_size(dt);
    for (size_t i0 = 0; i0 < n; i0 += CHECK_CHUNK) {
        size_t m = n - i0 < CHECK_CHUNK ? n - i0 : CHECK_CHUNK;
        for (size_t i = 0; i < m; i++) f32[i] = zero ? 0.0f : check_input(i0 + i, r);
        if (!zero && perturb >= 0 && (size_t)perturb >= i0 && (size_t)perturb < i0 + m) f32[perturb - i0] += 1.0f;
        tp_convert_from_f32((char *)host + i0 * es, dt, f32, m);
    }
    b->to_device(b, dev, host, n * es);
    b->sync(b);
}

/* Elements of the reduced buffer that differ from the exact sum over `size` ranks. */
static long count_wrong(tp_backend *b, const void *dev, void *host, float *f32, size_t n, tp_dtype dt, int size) {
    size_t es = tp_dtype_size(dt);
    b->to_host(b, host, dev, n * es);
    long wrong = 0;
    for (size_t i0 = 0; i0 < n; i0 += CHECK_CHUNK) {
        size_t m = n - i0 < CHECK_CHUNK ? n - i0 : CHECK_CHUNK;
        tp_convert_to_f32(f32, (const char *)host + i0 * es, dt, m);
        for (size_t i = 0; i < m; i++) {
            float want = 0.0f;
            for (int r = 0; r < size; r++) want += check_input(i0 + i, r); /* exact: small integers */
            wrong += f32[i] != want;
        }
    }
    return wrong;
}

int tp_cmd_bench_comm(int argc, char **argv) {
    tp_comm *mpi = tp_comm_mpi_init(&argc, &argv);
    comm_args ca;
    comm_args_parse(&ca, argc, argv);
    if (mpi->size > MAX_CHECK_RANKS)
        tp_die_all("bench-comm checks sums exactly up to %d ranks (bf16 holds integers up to 256); got %d",
                   MAX_CHECK_RANKS, mpi->size);
    long perturb_rank = -1;
    const char *pe = getenv("TPGEN_BENCH_COMM_PERTURB");
    if (pe && *pe) perturb_rank = tp_parse_long("TPGEN_BENCH_COMM_PERTURB", pe, 0, mpi->size - 1);

    tp_backend *b = tp_job_backend(&ca.job, mpi);
    tp_comm_mpi_set_backend(mpi, b);
    tp_comm *comm = mpi;
    int want_nccl = ca.job.comm ? strcmp(ca.job.comm, "nccl") == 0 : strcmp(b->name, "cuda") == 0 && mpi->size > 1;
    if (want_nccl) {
        if (strcmp(b->name, "cuda") != 0) tp_die_all("--comm nccl needs --backend cuda");
        char err[512];
        comm = tp_comm_nccl_create(mpi, b, err, sizeof err);
        if (!comm) tp_die("%s", err);
    }

    void *dev = b->alloc(b, ca.max_bytes, "bench-comm buffer");
    void *host = b->host_alloc(b, ca.max_bytes, "bench-comm staging buffer");
    float *f32 = tp_malloc(CHECK_CHUNK * sizeof(float));
    double *times = tp_malloc(mpi->size * sizeof(double));
    long *wrongs = tp_malloc(mpi->size * sizeof(long));
    double factor = 2.0 * (mpi->size - 1) / mpi->size;
    long total_wrong = 0;
    if (mpi->rank == 0 && !ca.json) {
        printf("# tpgen bench-comm: all-reduce (sum, in place) on %d ranks, comm %s, backend %s\n", mpi->size,
               comm->name, b->name);
        printf("# %d warm-up + %d timed calls per size; time: mean per call, slowest rank; busbw = algbw * 2(n-1)/n\n",
               ca.warmup, ca.iters);
        printf("# #wrong: elements (over all ranks) differing from the exact sum of integer inputs\n");
        printf("%14s %12s %5s %12s %12s %12s %7s\n", "size(B)", "count", "type", "time(us)", "algbw(GB/s)",
               "busbw(GB/s)", "#wrong");
    }
    for (int di = 0; di < ca.n_dtypes; di++) {
        tp_dtype dt = (tp_dtype)ca.dtypes[di];
        size_t es = tp_dtype_size(dt);
        for (unsigned long long bytes = ca.min_bytes; bytes <= ca.max_bytes; bytes *= 2) {
            size_t n = bytes / es, nb = n * es;
            fill(b, dev, host, f32, n, dt, mpi->rank, 1, -1);
            for (int i = 0; i < ca.warmup; i++) comm->allreduce_sum(comm, dev, n, dt);
            b->sync(b);
            mpi->barrier(mpi);
            double t0 = tp_now_seconds();
            for (int i = 0; i < ca.iters; i++) comm->allreduce_sum(comm, dev, n, dt);
            b->sync(b);
            double t = (tp_now_seconds() - t0) / ca.iters;
            mpi->allgather(mpi, &t, times, sizeof t);
            for (int r = 0; r < mpi->size; r++) t = times[r] > t ? times[r] : t;

            fill(b, dev, host, f32, n, dt, mpi->rank, 0, mpi->rank == perturb_rank ? (long)(n - 1) : -1);
            comm->allreduce_sum(comm, dev, n, dt);
            b->sync(b);
            long wrong = count_wrong(b, dev, host, f32, n, dt, mpi->size);
            mpi->allgather(mpi, &wrong, wrongs, sizeof wrong);
            wrong = 0;
            for (int r = 0; r < mpi->size; r++) wrong += wrongs[r];
            total_wrong += wrong;

            double algbw = nb / t / 1e9, busbw = algbw * factor;
            if (mpi->rank == 0) {
                if (ca.json)
                    printf("{\"op\": \"allreduce\", \"size_bytes\": %zu, \"count\": %zu, \"dtype\": \"%s\", \"tp\": %d, "
                           "\"comm\": \"%s\", \"backend\": \"%s\", \"warmup\": %d, \"iters\": %d, \"time_us\": %.3f, "
                           "\"algbw_gb_per_s\": %.4f, \"busbw_gb_per_s\": %.4f, \"wrong\": %ld}\n",
                           nb, n, tp_dtype_flag((tp_dtype)dt), mpi->size, comm->name, b->name, ca.warmup, ca.iters,
                           t * 1e6, algbw, busbw, wrong);
                else
                    printf("%14zu %12zu %5s %12.2f %12.3f %12.3f %7ld\n", nb, n, tp_dtype_flag((tp_dtype)dt), t * 1e6,
                           algbw, busbw, wrong);
                fflush(stdout);
            }
            if (bytes > ca.max_bytes / 2) break; /* no overflow of bytes *= 2 */
        }
    }
    free(f32);
    free(times);
    free(wrongs);
    b->free(b, dev);
    b->host_free(b, host);
    if (comm != mpi) comm->destroy(comm);
    tp_comm_mpi_set_backend(mpi, NULL);
    b->destroy(b);
    if (total_wrong)
        tp_die_all("all-reduce gave %ld wrong element%s (see the #wrong column): the sums are not exact", total_wrong,
                   total_wrong == 1 ? "" : "s");
    tp_comm_finalize(mpi);
    return 0;
}
