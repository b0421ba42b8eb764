/* GEMM rates of the CPU backend's int8 and int4 weights on the matrices of LAYERS CodeGen layers
 * (qkv, out_proj, fc_in, fc_out; lm_head stays int8 under int4, so it is left out; 20 layers:
 * CodeGen-350M's, so the weights come from memory as in a decode step, not from L3), for several
 * token counts T, each path by its own backend: int8 (the int8 family's choice), int4 GEMV and
 * int4 GEMM forced (TPGEN_INT4_GEMM), int4 as in a job, and int4 with 8-bit activations
 * (--int4-activations int8) as in a job. Built, not a test: runs interleave the
 * variants, the median of REPS.
 * usage: bench_int4_gemm [THREADS] [E] [GROUP] [LAYERS] [cpu|wall] [I]   (CodeGen-350M: E 1024,
 *        20 layers; AWQ/GPTQ: group 128)
 * cpu: the process's CPU time instead of the wall clock (THREADS 1 then). I: a LLaMA layer's
 * MLP width instead (gate and up as one [2 I, E] matrix, down [E, I], as the engine holds them;
 * CodeGen2.5-7B: 2 4096 128 4 wall 11008, whose 4 layers are 1.2 GB of matrices in int8). */
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
#define NS 4
#define MAXL 64

int main(int argc, char **argv) {
    const int threads = argc > 1 ? atoi(argv[1]) : 2, E = argc > 2 ? atoi(argv[2]) : 1024,
              G = argc > 3 ? atoi(argv[3]) : 128, L = argc > 4 ? atoi(argv[4]) : 20;
    if (argc > 5 && strcmp(argv[5], "cpu") == 0) g_clock = CLOCK_PROCESS_CPUTIME_ID;
    const int I = argc > 6 ? atoi(argv[6]) : 0;
    if (L < 1 || L > 64 || I < 0) {
        fprintf(stderr, "bench_int4_gemm: LAYERS must be 1..64 and I at least 0\n");
        return 2;
    }
    /* qkv, out, fc_in, fc_out (CodeGen); qkv, o, gate+up, down (LLaMA, I > 0) */
    const int shapes[NS][2] = {{3 * E, E}, {E, E}, {I ? 2 * I : 4 * E, E}, {E, I ? I : 4 * E}};
    const int Ts[] = {1, 2, 4, 8, 16, 32, 128, 512};
    const char *name[NV] = {"int8", "int4 gemv", "int4 gemm", "int4 auto", "int4 a8"}, *path[NV] = {NULL, "gemv", "gemm", "", ""};
    char err[256];
    tp_backend *bk[NV];
    static void *W[NV][MAXL][NS];
    /* one arena a backend, as the engine's (engine/model/weights.c): huge pages (cpu_alloc) */
    for (int v = 0; v < NV; v++) {
        if (path[v] && *path[v]) setenv("TPGEN_INT4_GEMM", path[v], 1);
        else unsetenv("TPGEN_INT4_GEMM");
        bk[v] = tp_backend_cpu_create(threads);
        if ((v ? tp_backend_use_int4 : tp_backend_use_int8)(bk[v], 0, err, sizeof err) ||
            (v == 4 && tp_backend_int4_act8(bk[v], err, sizeof err))) {
            fprintf(stderr, "bench_int4_gemm: %s\n", err);
            return 1;
        }
        size_t off[NS + 1] = {0};
        for (int s = 0; s < NS; s++) {
            const int N = shapes[s][0], K = shapes[s][1];
            const size_t mb = v ? bk[v]->matrix_bytes_q4(bk[v], N, K, G) : bk[v]->matrix_bytes(bk[v], N, K);
            off[s + 1] = off[s] + ((mb + 63) & ~(size_t)63);
        }
        char *arena = bk[v]->alloc(bk[v], off[NS] * (size_t)L, "weights");
        for (int l = 0; l < L; l++)
            for (int s = 0; s < NS; s++) {
                const int N = shapes[s][0], K = shapes[s][1];
                void *w = W[v][l][s] = arena + off[NS] * (size_t)l + off[s];
                if (v) bk[v]->matrix_fill_random_q4(bk[v], w, N, K, G, 1 + s, 0.0f, 0.02f);
                else bk[v]->matrix_fill_random(bk[v], w, N, K, 1 + s, 0.0f, 0.02f);
            }
    }
    const int Tmax = 512;
    const size_t wide = (size_t)(2 * I > 4 * E ? 2 * I : 4 * E); /* the widest N or K */
    float *x = malloc((size_t)Tmax * wide * 4), *y = malloc((size_t)Tmax * wide * 4);
    if (!x || !y) {
        fprintf(stderr, "bench_int4_gemm: out of memory for x and y (%zu MiB each)\n", (size_t)Tmax * wide * 4 >> 20);
        return 1;
    }
    for (size_t i = 0; i < (size_t)Tmax * wide; i++) x[i] = (float)((i * 7919) % 2001) / 1000.0f - 1.0f;
    printf("threads %d, E %d, %s %d, group %d, %d layers: ms (%s) for the layers' 4 GEMMs each (median of %d)\n", threads,
           E, I ? "LLaMA MLP" : "CodeGen MLP", I ? I : 4 * E, G, L, g_clock == CLOCK_MONOTONIC ? "wall clock" : "process CPU time",
           REPS);
    printf("%5s", "T");
    for (int v = 0; v < NV; v++) printf(" %12s", name[v]);
    printf(" %14s %12s   kernels\n", "int8/int4auto", "int8/int4a8");
    for (size_t ti = 0; ti < sizeof Ts / sizeof *Ts; ti++) {
        const int T = Ts[ti];
        double t[NV][REPS];
        for (int r = 0; r < REPS + 1; r++)
            for (int v = 0; v < NV; v++) {
                const double t0 = now();
                for (int l = 0; l < (T >= 128 ? 1 : L); l++) /* prefill: one layer (compute-bound) */
                    for (int s = 0; s < NS; s++)
                        bk[v]->matmul(bk[v], y, x, W[v][l][s], NULL, T, shapes[s][0], shapes[s][1], 0);
                if (r) t[v][r - 1] = now() - t0;
            }
        printf("%5d", T);
        for (int v = 0; v < NV; v++) {
            qsort(t[v], REPS, sizeof(double), cmp);
            printf(" %12.3f", t[v][REPS / 2] * 1e3);
        }
        printf(" %13.2fx %11.2fx   %s, %s, %s\n", t[0][REPS / 2] / t[3][REPS / 2], t[0][REPS / 2] / t[4][REPS / 2],
               bk[0]->kernel_name(bk[0], TP_OP_MATMUL, T, 0), bk[3]->kernel_name(bk[3], TP_OP_MATMUL, T, 0),
               bk[4]->kernel_name(bk[4], TP_OP_MATMUL, T, 0));
        fflush(stdout);
    }
    return 0;
}
