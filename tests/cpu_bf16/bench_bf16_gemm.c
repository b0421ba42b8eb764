/* GEMM rates of the CPU backend, f32 vs bf16, and oneDNN's own bf16 matmul, in one run
 * (docs/PERFORMANCE.md). Built, not a test.
 *
 * usage: bench_bf16_gemm [THREADS] [REPS]   (M x N x K = 2048 x 4096 x 4096 and 32 x 4096 x 4096)
 * Prints the median GFLOP/s of REPS (default 5) runs of each: the f32 backend's matmul
 * (OpenBLAS), the bf16 backend's matmul (its batched path: oneDNN or OpenBLAS on widened
 * panels, whichever --verbose names), and oneDNN's bf16 matmul called directly on its reordered
 * weights ("unavailable" with the reason when oneDNN has no native bf16 matmul on this CPU). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_bf16.h"
#include "util/log.h"

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_gflops(tp_backend *b, tp_dnnl *d, void *y, const void *x, const void *W, int M, int N, int K,
                            int reps) {
    double t[64];
    for (int r = 0; r < reps + 1; r++) { /* the first run warms up (and reorders once) */
        const double t0 = tp_now_seconds();
        if (d) tp_dnnl_matmul(d, y, x, W, NULL, M, N, K, 0, 0, 0);
        else b->matmul(b, y, x, W, NULL, M, N, K, 0);
        if (r) t[r - 1] = tp_now_seconds() - t0;
    }
    qsort(t, reps, sizeof t[0], cmp_d);
    return 2.0 * M * N * K / t[reps / 2] / 1e9;
}

int main(int argc, char **argv) {
    const int threads = argc > 1 ? atoi(argv[1]) : 0, reps = argc > 2 ? atoi(argv[2]) : 5;
    if (reps < 1 || reps > 63) { fprintf(stderr, "REPS must be 1..63\n"); return 2; }
    const int N = 4096, K = 4096, Ms[2] = {2048, 32};
    char err[512];
    tp_backend *f = tp_backend_cpu_create(threads);
    tp_backend *h = tp_backend_cpu_bf16_create(threads, 1, err, sizeof err);
    if (!h) { fprintf(stderr, "bf16 backend: %s\n", err); return 1; }
    tp_dnnl *d = tp_dnnl_create(threads, 0, err, sizeof err);
    float *wf = malloc((size_t)N * K * 4);
    for (size_t i = 0; i < (size_t)N * K; i++) wf[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    void *Wf = f->alloc(f, f->matrix_bytes(f, N, K), "W f32"), *Wh = h->alloc(h, h->matrix_bytes(h, N, K), "W bf16");
    f->matrix_upload(f, Wf, wf, TP_F32, N, K);
    h->matrix_upload(h, Wh, wf, TP_F32, N, K);
    void *Wd = NULL;
    if (d) {
        Wd = h->alloc(h, tp_dnnl_weights_bytes(d, N, K), "W oneDNN");
        uint16_t *plain = malloc((size_t)N * K * 2);
        h->upload(h, plain, wf, TP_F32, (size_t)N * K);
        tp_dnnl_reorder(d, Wd, plain, N, K);
        free(plain);
    }
    const int Mmax = Ms[0];
    float *xf = f->alloc(f, (size_t)Mmax * K * 4, "x"), *yf = f->alloc(f, (size_t)Mmax * N * 4, "y");
    for (size_t i = 0; i < (size_t)Mmax * K; i++) xf[i] = (float)((i * 40503u) % 997) / 997.0f - 0.5f;
    void *xh = h->alloc(h, (size_t)Mmax * K * 2, "x bf16"), *yh = h->alloc(h, (size_t)Mmax * N * 2, "y bf16");
    h->upload(h, xh, xf, TP_F32, (size_t)Mmax * K);
    printf("GEMM M x %d x %d, median of %d, GFLOP/s\n", N, K, reps);
    printf("%6s %12s %12s %14s\n", "M", "f32 OpenBLAS", "bf16 backend", "oneDNN bf16");
    for (int i = 0; i < 2; i++) {
        const int M = Ms[i];
        const double gf = median_gflops(f, NULL, yf, xf, Wf, M, N, K, reps);
        const double gh = median_gflops(h, NULL, yh, xh, Wh, M, N, K, reps);
        if (d) printf("%6d %12.1f %12.1f %14.1f\n", M, gf, gh, median_gflops(h, d, yh, xh, Wd, M, N, K, reps));
        else printf("%6d %12.1f %12.1f %14s\n", M, gf, gh, "unavailable");
    }
    if (!d) printf("oneDNN bf16 matmul unavailable: %s\n", err);
    else printf("oneDNN implementation: %s\n", tp_dnnl_impl(d));
    tp_dnnl_destroy(d);
    return 0;
}
