/* Op tests of the CPU backend's int8 weights (kernels/cpu/cpu_int8.c) against a double reference
 * of the dequantized weights, quantized here independently (double division, round half to even,
 * clamp to +-127).
 *
 * usage: test_int8_ops THREADS ISA GEMM
 *   ISA: c | avx2 | avxvnni | avx512 | amx (the tier, forced through TPGEN_CPU_ISA; avx512 runs
 *        avx512vnni; amx runs its GEMM, and avx512vnni's GEMV)
 *   GEMM: gemv | gemm | blas | auto (TPGEN_INT8_GEMM: every T through one path, or by T as in a
 *         job; gemm, the integer GEMM, SKIPs with ISA c)
 * Exits 77 (ctest SKIPPED) when this CPU cannot run the requested ISA.
 *
 * Checks:
 *  - quantization, exactly: x = the identity [K, K] makes y[k, n] = q[n, k] * scale[n], one
 *    product per output (no sum), so every q and scale is seen; from f32, bf16 and f16 sources,
 *    with a zero row (scale 0), with given row maxima (matrix_upload_rowmax) and for
 *    matrix_fill_random (= the f32 backend's draws, quantized).
 *  - GEMMs over shape classes (T 1..33 across the GEMV groups of 4 and the panel path, N and K
 *    with tails past the 8-lane vectors and the 4/2-row blocks), bias, accumulate, GELU, f32 out:
 *    |got - ref| <= (2K + 4) 2^-24 sum_k |x_k wd_k| (f32 summation in any order, the scale and
 *    the epilogue's roundings) + max|x| / 16383 / 2 * sum_k |wd_k| (the GEMV path's int16 grid
 *    for x) + 1e-6 (GELU's expf). y's old contents are NaN where not read.
 *  - every tier's GEMV and GEMM this CPU runs (avx2, avxvnni, avx512vnni, amx's GEMM) gives the
 *    c GEMV's bits (exact integer sums), T from 1 to 131 (the AVX2 GEMM's widened panels from
 *    128 on; amx's 16-token tiles with tails), K to 8200 (odd K, amx's 64-byte k steps).
 *  - a NaN or inf in a token's x makes all its outputs non-finite, a zero token gives the bias,
 *    and neither moves the other tokens' outputs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_int8.h" /* the panel layout, for check_padding */
#include "kernels/cpu/cpu_isa.h"  /* which tiers this CPU runs */
#include "tests/common/check.h"


static float *rand_f32(size_t n, double s) {
    float *p = malloc(n * 4 + 4);
    for (size_t i = 0; i < n; i++) p[i] = (float)((2 * urand() - 1) * s);
    return p;
}
static double gelu_d(double x) { return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

/* The reference quantization of one row in double: wd[k] = q * scale, scale = absmax / 127 (f32,
 * as stored). ambiguous[k] = 1 where w / scale is within 1e-5 of a rounding tie (f32 division
 * may land on either side); the exact checks skip those elements. */
static void ref_quant_row(const float *w, int K, float absmax, double *wd, int *ambiguous) {
    const float s = absmax / 127.0f;
    for (int k = 0; k < K; k++) {
        if (!(s > 0)) { wd[k] = 0; if (ambiguous) ambiguous[k] = 0; continue; }
        const double r = (double)(w[k] / s); /* f32 division, as specified (tp_quant.h) */
        double q = nearbyint(r); /* default rounding mode: half to even */
        if (q > 127) q = 127;
        if (q < -127) q = -127;
        wd[k] = q * (double)s;
        if (ambiguous) ambiguous[k] = fabs(fabs(r - floor(r)) - 0.5) < 1e-5;
    }
}
static float absmax_f(const float *w, int K) {
    float m = 0;
    for (int k = 0; k < K; k++) m = fabsf(w[k]) > m ? fabsf(w[k]) : m;
    return m;
}

/* y = I_K @ W^T: y[k, n] must be exactly f32(q[n,k] * s[n]). W given as f32 values w (already
 * representable in the source dtype st, which src holds). rowmax: NULL or the absmax per row. */
static void check_identity(tp_backend *b, const char *what, const void *W, const float *w, int N, int K,
                           const float *rowmax) {
    float *x = calloc((size_t)K * K, 4), *y = malloc((size_t)K * N * 4 + 4);
    for (int k = 0; k < K; k++) x[(size_t)k * K + k] = 1.0f;
    b->matmul(b, y, x, W, NULL, K, N, K, 0);
    double *wd = malloc((size_t)K * sizeof(double));
    int *amb = malloc((size_t)K * sizeof(int)), bad = 0;
    for (int n = 0; n < N; n++) {
        const float *wr = w + (size_t)n * K;
        ref_quant_row(wr, K, rowmax ? rowmax[n] : absmax_f(wr, K), wd, amb);
        for (int k = 0; k < K; k++) {
            const float got = y[(size_t)k * N + n];
            if (amb[k]) continue;
            if (got != (float)wd[k] && bad++ < 3)
                CHECK(0, "%s: [%d x %d] q*scale at (%d, %d): got %.9g, want %.9g (w %.9g)", what, N, K, n, k, got,
                      (float)wd[k], wr[k]);
            g_checks++;
        }
    }
    free(x); free(y); free(wd); free(amb);
}

/* The layout's padding (cpu_int8.h): the last panel's rows past N and, on odd K, the last pair's
 * second element of every row are zero (the kernels read them). */
static void check_padding(const char *what, const void *W, int N, int K) {
    const int P = cpu_i8_panels(N) - 1, KP = (K + 1) / 2;
    const int8_t *bp = cpu_i8_panel(W, K, P);
    for (int p = 0; p < KP; p++)
        for (int j = 0; j < CPU_I8_NR; j++)
            for (int h = 0; h < 2; h++)
                if (P * CPU_I8_NR + j >= N || 2 * p + h >= K)
                    CHECK(bp[(size_t)p * 2 * CPU_I8_NR + 2 * j + h] == 0, "%s: padding of row %d, k %d is %d", what,
                          P * CPU_I8_NR + j, 2 * p + h, bp[(size_t)p * 2 * CPU_I8_NR + 2 * j + h]);
}

static void test_quant(tp_backend *b) {
    const int N = 45, K = 37;
    float *w = rand_f32((size_t)N * K, 0.7);
    for (int k = 0; k < K; k++) w[2 * K + k] = 0.0f;           /* a zero row: scale 0 */
    w[5 * K + 3] = 1e-30f;                                      /* a tiny value next to normal ones */
    for (int k = 0; k < K; k++) w[7 * K + k] = (float)(k - 18) * 0.25f; /* exact ties at some k */
    void *W = b->alloc(b, b->matrix_bytes(b, N, K), "W");
    /* one byte a weight, rows padded to panels of 16 and K to pairs (cpu_int8.h), + the scales */
    const size_t padded = (size_t)(N + 15) / 16 * 16 * (size_t)(K + K % 2);
    CHECK(b->matrix_bytes(b, N, K) <= padded + 4 * (size_t)N + 64, "int8 matrix of %d x %d takes %zu bytes", N, K,
          b->matrix_bytes(b, N, K));
    /* f32 source */
    b->matrix_upload(b, W, w, TP_F32, N, K);
    check_identity(b, "from f32", W, w, N, K, NULL);
    check_padding("from f32", W, N, K);
    /* bf16 and f16 sources: the values they hold, quantized */
    uint16_t *h = malloc((size_t)N * K * 2);
    float *wr = malloc((size_t)N * K * 4);
    for (size_t i = 0; i < (size_t)N * K; i++) { h[i] = tp_f32_to_bf16(w[i]); wr[i] = tp_bf16_to_f32(h[i]); }
    b->matrix_upload(b, W, h, TP_BF16, N, K);
    check_identity(b, "from bf16", W, wr, N, K, NULL);
    for (size_t i = 0; i < (size_t)N * K; i++) { h[i] = tp_f32_to_f16(w[i]); wr[i] = tp_f16_to_f32(h[i]); }
    b->matrix_upload(b, W, h, TP_F16, N, K);
    check_identity(b, "from f16", W, wr, N, K, NULL);
    /* given row maxima (a column slice of a wider row): 1.5x this slice's own */
    float *mx = malloc((size_t)N * 4);
    for (int n = 0; n < N; n++) mx[n] = 1.5f * absmax_f(w + (size_t)n * K, K);
    b->matrix_upload_rowmax(b, W, w, TP_F32, N, K, mx);
    check_identity(b, "rowmax", W, w, N, K, mx);
    /* fill_random = the f32 backend's draws of the same buffer, quantized */
    tp_backend *f = tp_backend_cpu_create(1);
    float *wf = malloc((size_t)N * K * 4);
    f->fill_random(f, wf, (size_t)N * K, 42, 0.0f, 0.02f);
    b->matrix_fill_random(b, W, N, K, 42, 0.0f, 0.02f);
    check_identity(b, "fill_random", W, wf, N, K, NULL);
    check_padding("fill_random", W, N, K);
    f->destroy(f);
    b->free(b, W);
    free(w); free(h); free(wr); free(mx); free(wf);
}

static void test_matmul(tp_backend *b, int T, int N, int K, int bias_on, int acc, int gelu, int f32out) {
    float *x = rand_f32((size_t)T * K, 1.0), *w = rand_f32((size_t)N * K, 0.5), *bias = rand_f32(N, 0.3);
    float *y0 = rand_f32((size_t)T * N, 2.0);
    if (N > 2) for (int k = 0; k < K; k++) w[(size_t)1 * K + k] = 0.0f; /* a zero row */
    void *W = b->alloc(b, b->matrix_bytes(b, N, K), "W");
    b->matrix_upload(b, W, w, TP_F32, N, K);
    float *y = malloc((size_t)T * N * 4 + 4);
    if (acc) memcpy(y, y0, (size_t)T * N * 4);
    else for (size_t i = 0; i < (size_t)T * N; i++) y[i] = NAN; /* must not be read */
    if (f32out) b->matmul_f32out(b, y, x, W, bias_on ? bias : NULL, T, N, K);
    else if (gelu) b->matmul_gelu(b, y, x, W, bias_on ? bias : NULL, T, N, K);
    else b->matmul(b, y, x, W, bias_on ? bias : NULL, T, N, K, acc);
    double *wd = malloc((size_t)N * K * sizeof(double));
    for (int n = 0; n < N; n++) ref_quant_row(w + (size_t)n * K, K, absmax_f(w + (size_t)n * K, K), wd + (size_t)n * K, NULL);
    int bad = 0;
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++) {
            double s = 0, mag = 0, wsum = 0, xmax = 0;
            for (int k = 0; k < K; k++) xmax = fmax(xmax, fabs(x[(size_t)t * K + k]));
            for (int k = 0; k < K; k++) {
                wsum += fabs(wd[(size_t)n * K + k]);
                const double p = (double)x[(size_t)t * K + k] * wd[(size_t)n * K + k];
                s += p;
                mag += fabs(p);
            }
            if (acc) { s += y0[(size_t)t * N + n]; mag += fabs(y0[(size_t)t * N + n]); }
            if (bias_on) { s += bias[n]; mag += fabs(bias[n]); }
            /* the GEMV path rounds x to int16 on a grid of max|x| / 16383: half a step per element */
            double ref = s, tol = (2.0 * K + 4) * ldexp(1, -24) * mag + ldexp(1, -24) * fabs(s) +
                                  0.5 * xmax / 16383 * wsum * (1 + ldexp(1, -20));
            if (gelu) { ref = gelu_d(s); tol = 1.13 * tol + 2 * ldexp(1, -24) * fabs(ref) + 1e-6; }
            const double got = y[(size_t)t * N + n];
            if (!(fabs(got - ref) <= tol) && bad++ < 3)
                CHECK(0, "matmul T=%d N=%d K=%d bias=%d acc=%d gelu=%d f32out=%d at (%d,%d): got %.9g want %.9g (tol %.3g)",
                      T, N, K, bias_on, acc, gelu, f32out, t, n, got, ref, tol);
            g_checks++;
        }
    b->free(b, W);
    free(x); free(w); free(bias); free(y0); free(y); free(wd);
}

/* Whether this CPU runs the tier (TPGEN_CPU_ISA's name) and, for int8, its kernel there. */
static int have_tier(const char *isa) {
    const cpu_features *f = cpu_features_get(); /* CPUID (kernels/cpu/cpu_isa.c) */
    if (strcmp(isa, "avx2") == 0) return f->avx2_fma;
    if (strcmp(isa, "avxvnni") == 0) return f->avxvnni;
    if (strcmp(isa, "avx512") == 0) return f->avx512vnni;
    if (strcmp(isa, "amx") == 0) return f->amx_int8 && f->avx512vnni;
    return strcmp(isa, "c") == 0;
}

/* The c GEMV against every other tier's GEMV and GEMM this CPU runs: the same bits (exact
 * integer sums; K past the kernels' 1024-element int32 blocks, odd K, T and N off every tile),
 * with bias, accumulation and GELU in the same epilogue. */
static void test_isa_bits(int threads) {
    char err[256];
    enum { NB = 8 };
    tp_backend *bk[NB];
    const char *isa[NB] = {"c", "avx2", "avx2", "avxvnni", "avxvnni", "avx512", "avx512", "amx"};
    const char *path[NB] = {"gemv", "gemv", "gemm", "gemv", "gemm", "gemv", "gemm", "gemm"};
    /* the GEMV each tier runs (amx has none: its GEMV is avx512vnni's) */
    const char *kern[NB] = {"c", "avx2", "avx2", "avxvnni", "avxvnni", "avx512vnni", "avx512vnni", "avx512vnni"};
    int on[NB], n_on = 0;
    for (int i = 0; i < NB; i++) {
        on[i] = have_tier(isa[i]);
        if (!on[i]) { printf("test_isa_bits: %s %s SKIPPED (not on this CPU)\n", isa[i], path[i]); continue; }
        n_on++;
        setenv("TPGEN_CPU_ISA", isa[i], 1);
        setenv("TPGEN_INT8_GEMM", path[i], 1);
        bk[i] = tp_backend_cpu_create(threads);
        if (tp_backend_use_int8(bk[i], 0, err, sizeof err)) { CHECK(0, "%s", err); return; }
        const char *how, *k = cpu_int8_gemv_choice(bk[i], 64, 64, &how);
        CHECK(k && strcmp(k, kern[i]) == 0, "TPGEN_CPU_ISA=%s: the int8 GEMV is %s, not %s", isa[i], k ? k : "(none)",
              kern[i]);
    }
    if (n_on < 2) return;
    /* T >= 128: the GEMM on its int16 copy of the panels (cpu_int8_gemm.c, WIDEN_T) */
    static const int shapes[][3] = {{1, 130, 8200}, {5, 67, 100}, {3, 9, 4097}, {16, 33, 257},
                                    {13, 35, 2049}, {40, 50, 1024}, {7, 16, 2}, {12, 17, 1},
                                    {131, 35, 2049}, {128, 48, 63}};
    for (size_t j = 0; j < sizeof shapes / sizeof *shapes; j++)
        for (int epi = 0; epi < 3; epi++) { /* plain; bias + accumulate; bias + GELU */
            const int T = shapes[j][0], N = shapes[j][1], K = shapes[j][2];
            float *x = rand_f32((size_t)T * K, 3.0), *w = rand_f32((size_t)N * K, 0.5), *bias = rand_f32(N, 0.3);
            float *y0 = rand_f32((size_t)T * N, 1.0), *y[NB] = {NULL};
            for (int i = 0; i < NB; i++) {
                if (!on[i]) continue;
                void *W = bk[i]->alloc(bk[i], bk[i]->matrix_bytes(bk[i], N, K), "W");
                bk[i]->matrix_upload(bk[i], W, w, TP_F32, N, K);
                y[i] = malloc((size_t)T * N * 4);
                memcpy(y[i], y0, (size_t)T * N * 4);
                if (epi == 0) bk[i]->matmul(bk[i], y[i], x, W, NULL, T, N, K, 0);
                else if (epi == 1) bk[i]->matmul(bk[i], y[i], x, W, bias, T, N, K, 1);
                else bk[i]->matmul_gelu(bk[i], y[i], x, W, bias, T, N, K);
                bk[i]->free(bk[i], W);
            }
            for (int i = 1; i < NB; i++)
                if (on[i]) CHECK(memcmp(y[0], y[i], (size_t)T * N * 4) == 0, "%s %s and the c GEMV differ at T=%d N=%d K=%d epilogue %d",
                      path[i], isa[i], T, N, K, epi);
            free(x); free(w); free(bias); free(y0);
            for (int i = 0; i < NB; i++) free(y[i]);
        }
    for (int i = 0; i < NB; i++)
        if (on[i]) bk[i]->destroy(bk[i]);
}

/* A token with a NaN anywhere in x gives NaN in every output, one with +-inf a non-finite output
 * (NaN on the int16 paths, +-inf or NaN on the f32 panels, as f32 weights give); an all-zero
 * token gives the bias alone; the other tokens are
 * unchanged by their neighbours (x is rounded per token). One bad element at a time, at the
 * start, the middle and the end of its row (the rounding's vector loop and its tail). */
static void test_nonfinite(tp_backend *b) {
    const int T = 24, N = 19, K = 37;
    float *x = rand_f32((size_t)T * K, 1.0), *w = rand_f32((size_t)N * K, 0.5), *bias = rand_f32(N, 0.3);
    const float badv[] = {NAN, INFINITY, -INFINITY};
    const int at[] = {0, K / 2, K - 1};
    for (int t = 0; t < 9; t++) x[(size_t)(2 * t + 1) * K + at[t % 3]] = badv[t / 3]; /* odd tokens 1..17 */
    for (int k = 0; k < K; k++) x[(size_t)20 * K + k] = k % 2 ? 0.0f : -0.0f;
    void *W = b->alloc(b, b->matrix_bytes(b, N, K), "W");
    b->matrix_upload(b, W, w, TP_F32, N, K);
    float *y = malloc((size_t)T * N * 4), *y1 = malloc((size_t)T * N * 4);
    b->matmul(b, y, x, W, bias, T, N, K, 0);
    for (int t = 1; t < 18; t += 2) /* the same batch (the same path) with the bad tokens finite */
        for (int k = 0; k < K; k++) x[(size_t)t * K + k] = 0.25f;
    b->matmul(b, y1, x, W, bias, T, N, K, 0);
    for (int t = 0; t < T; t++) {
        const int bad = t % 2 == 1 && t < 18;
        for (int n = 0; n < N; n++) {
            const float got = y[(size_t)t * N + n];
            if (bad && t < 6) CHECK(isnan(got), "token %d has a NaN in x: output %d is %g, not NaN", t, n, got);
            else if (bad) CHECK(!isfinite(got), "token %d has an inf in x: output %d is %g, finite", t, n, got);
            else if (t == 20) CHECK(got == bias[n], "the zero token: output %d is %g, bias %g", n, got, bias[n]);
            else CHECK(memcmp(&got, &y1[(size_t)t * N + n], 4) == 0, "token %d, output %d: %g next to non-finite tokens, %g without",
                       t, n, got, y1[(size_t)t * N + n]);
        }
    }
    b->free(b, W);
    free(x); free(w); free(bias); free(y); free(y1);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: test_int8_ops THREADS c|avx2|avxvnni|avx512|amx gemv|gemm|blas|auto\n");
        return 2;
    }
    const int threads = atoi(argv[1]);
    const char *isa = argv[2], *gemm = argv[3];
    if (!have_tier(isa)) {
        printf("SKIPPED: this CPU does not run the int8 %s tier\n", isa);
        return 77;
    }
    if (strcmp(gemm, "gemm") == 0 && strcmp(isa, "c") == 0) {
        printf("SKIPPED: the int8 GEMM kernels need AVX2 or better\n");
        return 77;
    }
    setenv("TPGEN_CPU_ISA", isa, 1);
    if (strcmp(gemm, "auto") == 0) unsetenv("TPGEN_INT8_GEMM");
    else setenv("TPGEN_INT8_GEMM", gemm, 1);
    tp_backend *b = tp_backend_cpu_create(threads);
    char err[512];
    if (tp_backend_use_int8(b, 1, err, sizeof err)) {
        fprintf(stderr, "test_int8_ops: %s\n", err);
        return 1;
    }
    if (!b->weights || strcmp(b->weights, "int8") != 0 || b->act != TP_F32) {
        fprintf(stderr, "test_int8_ops: the backend does not say int8 weights / f32 activations\n");
        return 1;
    }
    test_quant(b);
    test_isa_bits(threads);
    test_nonfinite(b);
    static const int Ts[] = {1, 2, 3, 4, 5, 7, 16, 17, 33, 65};
    static const int NKs[][2] = {{1, 1}, {3, 7}, {16, 8}, {45, 9}, {130, 64}, {67, 100}, {33, 257}, {200, 1024}};
    for (size_t i = 0; i < sizeof Ts / sizeof *Ts; i++)
        for (size_t j = 0; j < sizeof NKs / sizeof *NKs; j++) {
            const int T = Ts[i], N = NKs[j][0], K = NKs[j][1];
            test_matmul(b, T, N, K, 0, 0, 0, 0);
            test_matmul(b, T, N, K, 1, 1, 0, 0);
            test_matmul(b, T, N, K, 1, 0, 1, 0);
            test_matmul(b, T, N, K, 1, 0, 0, 1);
        }
    /* K = 0 (an empty product: bias only) */
    test_matmul(b, 3, 5, 0, 1, 0, 0, 0);
    b->destroy(b);
    printf("test_int8_ops (%d threads, isa %s, gemm %s): %d checks, %d failed\n", threads, isa, gemm, g_checks, g_fail);
    return g_fail ? 1 : 0;
}
