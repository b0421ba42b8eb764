#include "bench_probes.h"

#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void tp_bench_zero_device(tp_backend *b, void *dst, size_t bytes) {
    size_t chunk = bytes < (64u << 20) ? bytes : (64u << 20);
    void *z = b->host_alloc(b, chunk, "bench zero buffer");
    memset(z, 0, chunk);
    for (size_t off = 0; off < bytes; off += chunk)
        b->to_device(b, (char *)dst + off, z, bytes - off < chunk ? bytes - off : chunk);
    b->sync(b);
    b->host_free(b, z);
}

double tp_bench_copy_gbs(tp_backend *b) {
    size_t bytes = 256u << 20;
    void *x = b->alloc(b, bytes, "bandwidth probe"), *y = b->alloc(b, bytes, "bandwidth probe");
    tp_bench_zero_device(b, x, bytes);
    tp_bench_zero_device(b, y, bytes);
    double t[7];
    for (int i = 0; i < 8; i++) {
        double t0 = tp_now_seconds();
        b->copy(b, y, x, bytes);
        b->sync(b);
        if (i) t[i - 1] = tp_now_seconds() - t0; /* the first copy warms up */
    }
    qsort(t, 7, sizeof *t, cmp_double);
    b->free(b, x);
    b->free(b, y);
    return 2.0 * bytes / t[3] / 1e9;
}

/* 16-byte integer vectors (SSE2 on x86, NEON on arm64): integer adds are exact and associative,
 * so four independent accumulators keep the loads in flight without -ffast-math. */
typedef uint64_t v2u __attribute__((vector_size(16)));

double tp_bench_read_gbs(tp_backend *b, int threads, size_t *bytes_out) {
    long llc = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
    llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    size_t bytes = llc > 0 ? 8 * (size_t)llc : 0;
    if (bytes < (256u << 20)) bytes = 256u << 20;
    if (bytes > (512u << 20)) bytes = 512u << 20;
    size_t n = bytes / sizeof(v2u);
    /* the backend's allocation, as the weights' and the KV cache's: with 4 KiB pages (an
     * aligned_alloc, before 2026-12-07) the hardware prefetcher stops at every page and the
     * probe read 21 GB/s where the GEMVs stream 30 on huge pages (Xeon, 2 threads) */
    v2u *x = b->alloc(b, n * sizeof(v2u), "read-bandwidth probe");
    if (threads < 1) threads = 1;
    double best = 1e30;
    long bad = 0;
    for (int rep = -1; rep < 7; rep++) { /* rep -1: each thread first-touches its own slice */
        double t0 = tp_now_seconds();
        #pragma omp parallel num_threads(threads) reduction(+ : bad)
        {
            size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
            size_t lo = n * t / nt, hi = n * (t + 1) / nt, i = lo;
            if (rep < 0) {
                for (; i < hi; i++) x[i] = (v2u){i, ~(uint64_t)i};
            } else {
                v2u a0 = {0, 0}, a1 = a0, a2 = a0, a3 = a0;
                for (; i + 4 <= hi; i += 4) {
                    a0 += x[i];
                    a1 += x[i + 1];
                    a2 += x[i + 2];
                    a3 += x[i + 3];
                }
                for (; i < hi; i++) a0 += x[i];
                a0 += a1 + a2 + a3;
                /* i + ~i is all ones, -1: a slice of m elements sums to -m. Checking it keeps
                 * the loads from being optimized away. */
                bad += a0[0] + a0[1] != (uint64_t)0 - (hi - lo);
            }
        }
        double dt = tp_now_seconds() - t0;
        if (rep >= 0 && dt < best) best = dt;
    }
    b->free(b, x);
    if (bad) tp_die("the read-bandwidth probe read back a wrong sum (%ld slices): host memory is not what was written", bad);
    *bytes_out = bytes;
    return (double)bytes / best / 1e9;
}

double tp_bench_gemm_gflops(tp_backend *b, int T, int N, int K) {
    void *W = b->alloc(b, b->matrix_bytes(b, N, K), "GEMM probe weights");
    size_t es = tp_dtype_size(b->act);
    void *x = b->alloc(b, (size_t)T * K * es, "GEMM probe input");
    void *y = b->alloc(b, (size_t)T * N * es, "GEMM probe output");
    if (b->matrix_fill_random) b->matrix_fill_random(b, W, N, K, 1, 0.0f, 0.02f); /* int8, bf16 panels */
    else b->fill_random(b, W, (size_t)N * K, 1, 0.0f, 0.02f);
    b->fill_random(b, x, (size_t)T * K, 2, 0.0f, 1.0f);
    double t[5];
    for (int i = 0; i < 6; i++) {
        double t0 = tp_now_seconds();
        b->matmul(b, y, x, W, NULL, T, N, K, 0);
        b->sync(b);
        if (i) t[i - 1] = tp_now_seconds() - t0; /* the first call warms up */
    }
    qsort(t, 5, sizeof *t, cmp_double);
    b->free(b, W);
    b->free(b, x);
    b->free(b, y);
    return 2.0 * T * N * K / t[2] / 1e9;
}
