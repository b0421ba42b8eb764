/* --weights int8 on the CUDA backend against the CPU backend's int8 path (kernels/cpu/cpu_int8.c),
 * F16 and BF16 activations.
 *
 * usage: test_cuda_int8 [SEED [quick]]
 * Exits 77 (ctest SKIPPED) when no CUDA GPU is visible. quick: the smaller shapes only (the
 * emulated device, tests/gpu_emu_faults.cmake: every kernel path at a fraction of the work).
 *
 * Checks, per dtype:
 *  - each backend holds the matrix tp_quant.h says, whatever its buffer's layout (the CPU's
 *    panels, the GPU's rows): from matrix_upload (f32 and bf16 sources), matrix_upload_rowmax
 *    and matrix_fill_random, the dequantized weights scale[n] * q[n, k] as the backend's own
 *    matmul_f32out reads them (one-hot rows of x, exact in every dtype) equal the host's
 *    tp_q8_dequant(tp_q8_quantize(w, scale), scale): exactly on the GPU (its f32 sum of one
 *    product is exact), within 2^-20 relative on the CPU (x on its int16 grid, sx = 1 / 16383);
 *  - every GEMM (matmul, with bias and accumulate; matmul_gelu; matmul_f32out) over the GEMV
 *    kernel's T = 1..4 and the tiled kernel's larger T, K % 16 == 0 and not (the tiled kernel
 *    then serves small T too), tails of N: NMSE of the GPU result against the CPU's within the
 *    bounds of tests/gpu/test_cuda_ops.c (one rounding to the dtype; f32 logits: summation
 *    order only). Inputs are rounded to the dtype first, so both backends see the same numbers;
 *    outputs are poisoned with NaN and every one is checked finite. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/backend.h"
#include "kernels/common/tp_quant.h"
#include "kernels/dtype.h"
#include "tests/gpu/gpu_test.h"

static float *randn(size_t n, float scale, int round_act) {
    float *x = malloc((n ? n : 1) * sizeof(float));
    uint16_t *t = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = scale * rnd_n();
    if (round_act) {
        tp_convert_from_f32(t, g_gpu->act, x, n);
        tp_convert_to_f32(x, t, g_gpu->act, n);
    }
    free(t);
    return x;
}

static void *gpu_put(const float *src, size_t n) { /* act dtype on the device */
    void *d = g_gpu->alloc(g_gpu, (n ? n : 1) * tp_dtype_size(g_gpu->act), "test buffer");
    if (n) g_gpu->upload(g_gpu, d, src, TP_F32, n);
    return d;
}
static float *gpu_get(const void *d, size_t n, tp_dtype dt) { /* to f32 on the host */
    float *h = malloc((n ? n : 1) * sizeof(float));
    uint16_t *t = malloc((n ? n : 1) * 4);
    g_gpu->to_host(g_gpu, t, d, n * tp_dtype_size(dt));
    tp_convert_to_f32(h, t, dt, n);
    free(t);
    return h;
}

static void compare(const char *what, const float *cpu, const float *gpu, size_t n, double tol) {
    double num = 0, den = 0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(gpu[i])) bad++;
        num += ((double)gpu[i] - cpu[i]) * ((double)gpu[i] - cpu[i]);
        den += (double)cpu[i] * cpu[i];
    }
    const double nmse = den > 0 ? num / den : num;
    g_checks++;
    if (bad || !(nmse <= tol)) {
        g_fail++;
        fprintf(stderr, "FAIL %s (%s): NMSE %.3g > %.3g, %d non-finite\n", what, tp_dtype_name(g_gpu->act), nmse, tol,
                bad);
    }
}

/* The columns whose weights are read back: all of them up to 128, else 128 spread from the first
 * to the last. */
static int quant_cols(int K, int *cols) {
    const int nc = K <= 128 ? K : 128;
    for (int j = 0; j < nc; j++) cols[j] = nc == K ? j : (int)((int64_t)j * (K - 1) / (nc - 1));
    return nc;
}

/* The dequantized weights w~[n, cols[j]] a backend's matrix W [N, K] holds, as its own GEMM reads
 * them: matmul_f32out of nc one-hot rows x_j = e_{cols[j]} gives y[j, n] = scale[n] * q[n, cols[j]].
 * Returns [nc, N] f32. */
static float *dequant_by_gemm(tp_backend *b, const void *W, int N, int K, const int *cols, int nc) {
    float *x = calloc((size_t)nc * K, sizeof(float)), *y = malloc((size_t)nc * N * sizeof(float));
    for (int j = 0; j < nc; j++) x[(size_t)j * K + cols[j]] = 1.0f;
    if (b == g_cpu) {
        b->matmul_f32out(b, y, x, W, NULL, nc, N, K);
    } else {
        void *xg = gpu_put(x, (size_t)nc * K);
        void *yg = b->alloc(b, (size_t)nc * N * sizeof(float), "y gpu");
        b->matmul_f32out(b, yg, xg, W, NULL, nc, N, K);
        b->sync(b);
        b->to_host(b, y, yg, (size_t)nc * N * sizeof(float));
        b->free(b, xg);
        b->free(b, yg);
    }
    free(x);
    return y;
}

/* Both backends' W against tp_quant.h's quantization of w [N, K] (row absmax, or mx[n] when given). */
static void check_quant(const char *what, const float *w, const float *mx, const void *wc, const void *wg, int N,
                        int K) {
    int *cols = malloc((size_t)(K < 128 ? K : 128) * sizeof(int));
    const int nc = quant_cols(K, cols);
    float *yc = dequant_by_gemm(g_cpu, wc, N, K, cols, nc), *yg = dequant_by_gemm(g_gpu, wg, N, K, cols, nc);
    long bad[2] = {0, 0};
    for (int n = 0; n < N; n++) {
        const float *row = w + (size_t)n * K, s = tp_q8_scale(mx ? mx[n] : tp_q8_absmax(row, K));
        for (int j = 0; j < nc; j++) {
            const float e = tp_q8_dequant(tp_q8_quantize(row[cols[j]], s), s);
            const float c = yc[(size_t)j * N + n], g = yg[(size_t)j * N + n];
            if (!(fabsf(c - e) <= ldexpf(fabsf(e), -20))) {
                if (!bad[0]++) fprintf(stderr, "  cpu w~[%d, %d] = %.9g, tp_quant.h: %.9g\n", n, cols[j], c, e);
            }
            if (!(g == e)) {
                if (!bad[1]++) fprintf(stderr, "  gpu w~[%d, %d] = %.9g, tp_quant.h: %.9g\n", n, cols[j], g, e);
            }
        }
    }
    for (int k = 0; k < 2; k++) {
        g_checks++;
        if (bad[k]) {
            g_fail++;
            fprintf(stderr, "FAIL %s [%d, %d] (%s): %ld of %d x %d weights on the %s differ from tp_quant.h's\n", what, N,
                    K, tp_dtype_name(g_gpu->act), bad[k], N, nc, k ? "GPU" : "CPU");
        }
    }
    free(cols); free(yc); free(yg);
}

static void test_quant(int N, int K) {
    float *w = randn((size_t)N * K, 0.05f, 0);
    void *wc = g_cpu->alloc(g_cpu, g_cpu->matrix_bytes(g_cpu, N, K), "W cpu");
    void *wg = g_gpu->alloc(g_gpu, g_gpu->matrix_bytes(g_gpu, N, K), "W gpu");
    g_cpu->matrix_upload(g_cpu, wc, w, TP_F32, N, K);
    g_gpu->matrix_upload(g_gpu, wg, w, TP_F32, N, K);
    check_quant("matrix_upload f32", w, NULL, wc, wg, N, K);
    uint16_t *h = malloc((size_t)N * K * 2);
    float *wb = malloc((size_t)N * K * sizeof(float)); /* the bf16 source's values */
    tp_convert_from_f32(h, TP_BF16, w, (size_t)N * K);
    tp_convert_to_f32(wb, h, TP_BF16, (size_t)N * K);
    g_cpu->matrix_upload(g_cpu, wc, h, TP_BF16, N, K);
    g_gpu->matrix_upload(g_gpu, wg, h, TP_BF16, N, K);
    check_quant("matrix_upload bf16", wb, NULL, wc, wg, N, K);
    float *mx = malloc((size_t)N * 4);
    for (int n = 0; n < N; n++) mx[n] = 0.3f + 0.001f * n;
    g_cpu->matrix_upload_rowmax(g_cpu, wc, w, TP_F32, N, K, mx);
    g_gpu->matrix_upload_rowmax(g_gpu, wg, w, TP_F32, N, K, mx);
    check_quant("matrix_upload_rowmax", w, mx, wc, wg, N, K);
    g_cpu->matrix_fill_random(g_cpu, wc, N, K, 7, 0.0f, 0.02f);
    g_gpu->matrix_fill_random(g_gpu, wg, N, K, 7, 0.0f, 0.02f);
    const uint64_t key = tp_rng_key(7);
    for (int n = 0; n < N; n++) tp_q8_random_row(wb + (size_t)n * K, key, n, K, 0.0f, 0.02f);
    check_quant("matrix_fill_random", wb, NULL, wc, wg, N, K);
    g_cpu->free(g_cpu, wc);
    g_gpu->free(g_gpu, wg);
    free(w); free(h); free(wb); free(mx);
}

/* kind: 0 matmul, 1 matmul + bias + accumulate, 2 matmul_gelu + bias, 3 matmul_f32out + bias */
static void test_gemm(int T, int N, int K, int kind) {
    float *x = randn((size_t)T * K, 1.0f, 1), *w = randn((size_t)N * K, 0.05f, 0), *bias = randn(N, 0.1f, 1);
    float *y0 = randn((size_t)T * N, 1.0f, 1);
    void *wc = g_cpu->alloc(g_cpu, g_cpu->matrix_bytes(g_cpu, N, K), "W cpu");
    void *wg = g_gpu->alloc(g_gpu, g_gpu->matrix_bytes(g_gpu, N, K), "W gpu");
    g_cpu->matrix_upload(g_cpu, wc, w, TP_F32, N, K);
    g_gpu->matrix_upload(g_gpu, wg, w, TP_F32, N, K);
    float *yc = malloc((size_t)T * N * 4 + 4);
    memcpy(yc, y0, (size_t)T * N * 4);
    void *xg = gpu_put(x, (size_t)T * K), *bg = gpu_put(bias, N);
    const tp_dtype odt = kind == 3 ? TP_F32 : g_gpu->act;
    void *yg = g_gpu->alloc(g_gpu, (size_t)T * N * 4 + 4, "y gpu");
    if (kind == 1) g_gpu->upload(g_gpu, yg, y0, TP_F32, (size_t)T * N);
    else {
        unsigned char *nan = malloc((size_t)T * N * 4 + 4);
        memset(nan, 0xff, (size_t)T * N * 4 + 4); /* NaN in every dtype */
        g_gpu->to_device(g_gpu, yg, nan, (size_t)T * N * tp_dtype_size(odt));
        free(nan);
    }
    switch (kind) {
    case 0: g_cpu->matmul(g_cpu, yc, x, wc, NULL, T, N, K, 0); g_gpu->matmul(g_gpu, yg, xg, wg, NULL, T, N, K, 0); break;
    case 1: g_cpu->matmul(g_cpu, yc, x, wc, bias, T, N, K, 1); g_gpu->matmul(g_gpu, yg, xg, wg, bg, T, N, K, 1); break;
    case 2: g_cpu->matmul_gelu(g_cpu, yc, x, wc, bias, T, N, K); g_gpu->matmul_gelu(g_gpu, yg, xg, wg, bg, T, N, K); break;
    default: g_cpu->matmul_f32out(g_cpu, yc, x, wc, bias, T, N, K); g_gpu->matmul_f32out(g_gpu, yg, xg, wg, bg, T, N, K);
    }
    g_gpu->sync(g_gpu);
    float *got = gpu_get(yg, (size_t)T * N, odt);
    char what[96];
    snprintf(what, sizeof what, "int8 %s T=%d N=%d K=%d", kind == 0 ? "matmul" : kind == 1 ? "matmul+bias+acc"
                                                          : kind == 2 ? "matmul_gelu" : "matmul_f32out", T, N, K);
    compare(what, yc, got, (size_t)T * N, kind == 3 ? TOL_F32 : tol_act(g_gpu->act));
    g_cpu->free(g_cpu, wc);
    g_gpu->free(g_gpu, wg); g_gpu->free(g_gpu, xg); g_gpu->free(g_gpu, bg); g_gpu->free(g_gpu, yg);
    free(x); free(w); free(bias); free(y0); free(yc); free(got);
}

int main(int argc, char **argv) {
    if (gpu_test_module_loads()) return 1;
    if (tp_backend_cuda_device_count() <= 0) {
        printf("SKIPPED: no CUDA GPU\n");
        return 77;
    }
    const uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 10) : (uint64_t)time(NULL);
    const int quick = argc > 2 && strcmp(argv[2], "quick") == 0;
    if (argc > 3 || (argc > 2 && !quick)) {
        fprintf(stderr, "usage: test_cuda_int8 [SEED [quick]]\n");
        return 2;
    }
    printf("test_cuda_int8 seed %llu%s\n", (unsigned long long)seed, quick ? " (quick: the smaller shapes)" : "");
    char err[512];
    g_cpu = tp_backend_cpu_create(2);
    if (tp_backend_use_int8(g_cpu, 0, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
    const tp_dtype dts[2] = {TP_F16, TP_BF16};
    for (int d = 0; d < 2; d++) {
        g_rng = seed * 2 + 1 + (uint64_t)d;
        g_gpu = tp_backend_cuda_create(0, dts[d], err, sizeof err);
        if (!g_gpu) { fprintf(stderr, "%s\n", err); return 1; }
        if (tp_backend_use_int8(g_gpu, 1, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
        test_quant(45, 37);
        test_quant(300, 1024);
        static const int Ts[] = {1, 2, 3, 4, 5, 70, 17};
        static const int NKs[][2] = {{45, 16}, {130, 64}, {67, 96}, {33, 100}, {300, 1024}, {1024, 4096}};
        /* quick: T 1..5 and 70 (GEMV for every T it has, the tiled kernel on 2 x 3 blocks), N, K up to 130 */
        const size_t nT = sizeof Ts / sizeof *Ts - (quick ? 1 : 0), nNK = sizeof NKs / sizeof *NKs - (quick ? 2 : 0);
        for (size_t i = 0; i < nT; i++)
            for (size_t j = 0; j < nNK; j++)
                for (int kind = 0; kind < 4; kind++) test_gemm(Ts[i], NKs[j][0], NKs[j][1], kind);
        g_gpu->destroy(g_gpu);
    }
    g_cpu->destroy(g_cpu);
    printf("test_cuda_int8: %d checks, %d failed\n", g_checks, g_fail);
    return g_fail ? 1 : 0;
}
