/* GEMM rates of the CPU backend's int8 and int4 weights on the matrices of one CodeGen layer
 * (qkv, out_proj, fc_in, fc_out; lm_head stays int8 under int4, so it is left out), for several
 * token counts T, each path by its own backend: int8 (the int8 family's choice), int4 GEMV and
 * int4 GEMM forced (TPGEN_INT4_GEMM), int4 as in a job. Built, not a test: runs interleave the
 * variants, the median of REPS.
 * usage: bench_int4_gemm [THREADS] [E] [GROUP] [cpu]   (CodeGen-350M: E 1024; AWQ/GPTQ: group 128)
 * cpu: the process's CPU time instead of the wall clock (THREADS 1 then). */
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
#define NV 4
#define NS 4

int main(int argc, char **argv) {
    const int threads = argc > 1 ? atoi(argv[1]) : 2, E = argc > 2 ? atoi(argv[2]) : 1024,
              G = argc > 3 ? atoi(argv[3]) : 128;
    if (argc > 4 && strcmp(argv[4], "cpu") == 0) g_clock = CLOCK_PROCESS_CPUTIME_ID;
    const int shapes[NS][2] = {{3 * E, E}, {E, E}, {4 * E, E}, {E, 4 * E}}; /* qkv, out, fc_in, fc_out */
    const int Ts[] = {1, 2, 4, 8, 16, 32, 128, 512};
    const char *name[NV] = {"int8", "int4 gemv", "int4 gemm", "int4 auto"}, *path[NV] = {NULL, "gemv", "gemm", ""};
    char err[256];
    tp_backend *bk[NV];
    void *W[NV][NS];
    for (int v = 0; v < NV; v++) {
        if (path[v] && *path[v]) setenv("TPGEN_INT4_GEMM", path[v], 1);
        else unsetenv("TPGEN_INT4_GEMM");
        bk[v] = tp_backend_cpu_create(threads);
        if ((v ? tp_backend_use_int4 : tp_backend_use_int8)(bk[v], 0, err, sizeof err)) {
            fprintf(stderr, "bench_int4_gemm: %s\n", err);
            return 1;
        }
        for (int s = 0; s < NS; s++) {
            const int N = shapes[s][0], K = shapes[s][1];
            if (v) {
                W[v][s] = bk[v]->alloc(bk[v], bk[v]->matrix_bytes_q4(bk[v], N, K, G), "W");
                bk[v]->matrix_fill_random_q4(bk[v], W[v][s], N, K, G, 1 + s, 0.0f, 0.02f);
            } else {
                W[v][s] = bk[v]->alloc(bk[v], bk[v]->matrix_bytes(bk[v], N, K), "W");
                bk[v]->matrix_fill_random(bk[v], W[v][s], N, K, 1 + s, 0.0f, 0.02f);
            }
        }
    }
    const int Tmax = 512;
    float *x = malloc((size_t)Tmax * 4 * E * 4), *y = malloc((size_t)Tmax * 4 * E * 4);
    for (size_t i = 0; i < (size_t)Tmax * 4 * E; i++) x[i] = (float)((i * 7919) % 2001) / 1000.0f - 1.0f;
    printf("threads %d, E %d, group %d: ms (%s) for one layer's 4 GEMMs (median of %d)\n", threads, E, G,
           g_clock == CLOCK_MONOTONIC ? "wall clock" : "process CPU time", REPS);
    printf("%5s", "T");
    for (int v = 0; v < NV; v++) printf(" %12s", name[v]);
    printf(" %14s   kernels\n", "int8/int4auto");
    for (size_t ti = 0; ti < sizeof Ts / sizeof *Ts; ti++) {
        const int T = Ts[ti];
        double t[NV][REPS];
        for (int r = 0; r < REPS + 1; r++)
            for (int v = 0; v < NV; v++) {
                const double t0 = now();
                for (int s = 0; s < NS; s++) bk[v]->matmul(bk[v], y, x, W[v][s], NULL, T, shapes[s][0], shapes[s][1], 0);
                if (r) t[v][r - 1] = now() - t0;
            }
        printf("%5d", T);
        for (int v = 0; v < NV; v++) {
            qsort(t[v], REPS, sizeof(double), cmp);
            printf(" %12.3f", t[v][REPS / 2] * 1e3);
        }
        printf(" %13.2fx   %s, %s\n", t[0][REPS / 2] / t[3][REPS / 2], bk[0]->kernel_name(bk[0], TP_OP_MATMUL, T, 0),
               bk[3]->kernel_name(bk[3], TP_OP_MATMUL, T, 0));
        fflush(stdout);
    }
    return 0;
}
