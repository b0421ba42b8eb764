/* GEMM rates of the CPU backend, f32 weights vs int8 weights (GEMV kernels and the panel path),
 * on the matrices of one CodeGen layer + lm_head (N x K given), for several token counts T.
 * Built, not a test (docs/PERFORMANCE.md): runs interleave the variants, the median of REPS.
 * usage: bench_int8_gemm [THREADS] [E] [VOCAB] [cpu]   (CodeGen-350M: E 1024, vocab 51200)
 * cpu: time the process's CPU time instead of the wall clock (on a machine others load too, the
 * work done, not the share of the cores this process got; THREADS 1 then). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/backend.h"

static clockid_t g_clock = CLOCK_MONOTONIC;
static double now(void) {
    struct timespec ts;
    clock_gettime(g_clock, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define REPS 7
#define NV 5

int main(int argc, char **argv) {
    const int threads = argc > 1 ? atoi(argv[1]) : 2, E = argc > 2 ? atoi(argv[2]) : 1024,
              V = argc > 3 ? atoi(argv[3]) : 51200;
    if (argc > 4 && strcmp(argv[4], "cpu") == 0) g_clock = CLOCK_PROCESS_CPUTIME_ID;
    const int shapes[][2] = {{3 * E, E}, {E, E}, {4 * E, E}, {E, 4 * E}, {V, E}}; /* qkv, out, fc_in, fc_out, lm_head */
    const int n_shapes = 5, Ts[] = {1, 8, 16, 32, 48, 64, 128, 512};
    char err[256];
    tp_backend *bk[NV];
    const char *name[NV] = {"f32", "int8 gemv", "int8 panels", "int8 gemm", "int8 auto"};
    bk[0] = tp_backend_cpu_create(threads);
    const char *gm[NV] = {NULL, "gemv", "blas", "gemm", ""};
    for (int v = 1; v < NV; v++) {
        if (*gm[v]) setenv("TPGEN_INT8_GEMM", gm[v], 1);
        else unsetenv("TPGEN_INT8_GEMM");
        bk[v] = tp_backend_cpu_create(threads);
        if (tp_backend_use_int8(bk[v], 0, err, sizeof err)) {
            if (strcmp(gm[v], "gemm") != 0) { fprintf(stderr, "%s\n", err); return 1; }
            fprintf(stderr, "bench_int8_gemm: no \"%s\" column: %s\n", name[v], err); /* TPGEN_CPU_ISA=c */
            bk[v]->destroy(bk[v]);
            bk[v] = NULL;
        }
    }
    void *W[NV][5];
    for (int v = 0; v < NV; v++)
        for (int s = 0; bk[v] && s < n_shapes; s++) {
            const int N = shapes[s][0], K = shapes[s][1];
            W[v][s] = bk[v]->alloc(bk[v], bk[v]->matrix_bytes(bk[v], N, K), "W");
            if (bk[v]->matrix_fill_random) bk[v]->matrix_fill_random(bk[v], W[v][s], N, K, 1 + s, 0.0f, 0.02f);
            else bk[v]->fill_random(bk[v], W[v][s], (size_t)N * K, 1 + s, 0.0f, 0.02f);
        }
    const int Tmax = 512;
    float *x = bk[0]->alloc(bk[0], (size_t)Tmax * 4 * E * 4, "x"), *y = bk[0]->alloc(bk[0], (size_t)Tmax * V * 4, "y");
    bk[0]->fill_random(bk[0], x, (size_t)Tmax * 4 * E, 9, 0.0f, 1.0f);
    printf("threads %d, E %d, vocab %d: ms (%s) for one layer's 4 GEMMs + lm_head (median of %d); GFLOP/s\n",
           threads, E, V, g_clock == CLOCK_MONOTONIC ? "wall clock" : "process CPU time", REPS);
    printf("%5s", "T");
    for (int v = 0; v < NV; v++) printf(" %14s %8s", name[v], "GF/s");
    printf(" %12s\n", "f32/int8best");
    for (size_t ti = 0; ti < sizeof Ts / sizeof *Ts; ti++) {
        const int T = Ts[ti];
        double t[NV][REPS];
        for (int r = 0; r < REPS + 1; r++)
            for (int v = 0; v < NV; v++) {
                if (!bk[v]) { if (r) t[v][r - 1] = 0; continue; }
                double t0 = now();
                for (int s = 0; s < n_shapes; s++)
                    bk[v]->matmul(bk[v], y, x, W[v][s], NULL, T, shapes[s][0], shapes[s][1], 0);
                if (r) t[v][r - 1] = now() - t0;
            }
        double flops = 0;
        for (int s = 0; s < n_shapes; s++) flops += 2.0 * T * shapes[s][0] * shapes[s][1];
        printf("%5d", T);
        double best = 1e30;
        for (int v = 0; v < NV; v++) {
            qsort(t[v], REPS, sizeof(double), cmp);
            const double m = t[v][REPS / 2];
            if (v && m > 0 && m < best) best = m;
            if (m > 0) printf(" %14.3f %8.1f", m * 1e3, flops / m / 1e9);
            else printf(" %14s %8s", "-", "-");
        }
        printf(" %11.2fx\n", t[0][REPS / 2] / best);
        fflush(stdout);
    }
    return 0;
}
