/* Op tests of the CPU backend against plain double-precision references written here.
 *
 * Every op runs on fresh seeded random inputs in several shapes, with its outputs poisoned
 * (NaN) before the call, and is compared with naive loops in double: a normalized error
 * NMSE = sum (y - ref)^2 / sum ref^2 and the max abs error, plus NaN/inf checks. Gathers,
 * copies, top-k order and ties are checked exactly. The attention scenario runs several steps
 * (prefills, decodes, and both mixed in one step) over scattered block tables, with every unused
 * cache slot NaN so a wrong slot read shows. One line per check; exit 1 on any failure.
 *
 * Usage: test_cpu_ops [n_threads]   (default 2)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "kernels/backend.h"
#include "kernels/common/tp_kv.h"
#include "kernels/cpu/cpu_isa.h"

/* fp32 ops against double: rounding of O(sqrt(K)) f32 operations gives NMSE ~1e-13; 1e-10 leaves
 * room for longer sums while any indexing or formula error lands near 1. */
#define TOL_F32 1e-10

static int g_fail = 0, g_checks = 0;

/* ---- seeded random numbers (test-local; independent of the backend's fill_random) ---- */
static uint64_t g_rng = 0x1234abcdull;
static uint64_t rng_next(void) { /* xorshift64* */
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545f4914f6cdd1dull;
}
static double rng_unif(void) { return (double)(rng_next() >> 11) * (1.0 / 9007199254740992.0); } /* [0,1) */
static float rng_sym(float a) { return (float)((2.0 * rng_unif() - 1.0) * a); }                /* (-a, a) */
static int rng_int(int n) { return (int)(rng_next() % (uint64_t)n); }

static void fill_sym(float *x, size_t n, float a) {
    for (size_t i = 0; i < n; i++) x[i] = rng_sym(a);
}
static void poison(void *p, size_t n_floats) {
    float *f = p;
    for (size_t i = 0; i < n_floats; i++) f[i] = NAN;
}

/* ---- reporting ---- */
typedef struct {
    double num, den, max_err;
    size_t n_bad; /* NaN/inf in the output */
} errstat;

static void err_add(errstat *e, double y, double ref) {
    if (!isfinite(y)) { e->n_bad++; return; }
    double d = y - ref;
    e->num += d * d;
    e->den += ref * ref;
    if (fabs(d) > e->max_err) e->max_err = fabs(d);
}

static double err_nmse(const errstat *e) { return e->den > 0 ? e->num / e->den : e->num; }

static void report(const char *op, const char *shape, const errstat *e, double tol) {
    double nmse = err_nmse(e);
    int ok = e->n_bad == 0 && nmse <= tol;
    g_checks++;
    if (!ok) g_fail++;
    printf("%-16s %-44s nmse=%.2e max_err=%.2e bad=%zu tol=%.0e %s\n", op, shape, nmse, e->max_err, e->n_bad, tol,
           ok ? "PASS" : "FAIL");
}

static void report_exact(const char *op, const char *shape, size_t n_wrong, size_t n) {
    g_checks++;
    if (n_wrong) g_fail++;
    printf("%-16s %-44s wrong=%zu/%zu exact %s\n", op, shape, n_wrong, n, n_wrong ? "FAIL" : "PASS");
}

static void report_cond(const char *op, const char *shape, int ok, const char *what) {
    g_checks++;
    if (!ok) g_fail++;
    printf("%-16s %-44s %s %s\n", op, shape, what, ok ? "PASS" : "FAIL");
}

/* ---- memory, upload ---- */
static void test_memory(tp_backend *b) {
    int aligned = 1;
    size_t sizes[] = {1, 3, 64, 1000, 1 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        void *p = b->alloc(b, sizes[i], "test buffer");
        aligned &= ((uintptr_t)p % 64) == 0;
        memset(p, 0xab, sizes[i]);
        b->free(b, p);
    }
    report_cond("alloc", "sizes 1..1MiB", aligned, "64-byte aligned");
    size_t avail = b->mem_available(b);
    char s[64];
    snprintf(s, sizeof s, "%.1f GiB", avail / 1073741824.0);
    report_cond("mem_available", s, avail > 0, "> 0");

    /* to_device / to_host round trip */
    size_t n = 1000;
    float *h = malloc(n * 4), *h2 = malloc(n * 4);
    fill_sym(h, n, 3.0f);
    void *d = b->alloc(b, n * 4, "copy test");
    b->to_device(b, d, h, n * 4);
    poison(h2, n);
    b->to_host(b, h2, d, n * 4);
    b->sync(b);
    report_exact("to_device/host", "1000 f32", memcmp(h, h2, n * 4) != 0, 1);
    b->free(b, d);
    free(h);
    free(h2);
}

/* Builds half-precision bit patterns without dtype.h (an independent encoder): values
 * m * 2^e with a short integer mantissa, exactly representable, so the upload must be exact. */
static void test_upload(tp_backend *b) {
    const size_t n = 4099;
    uint16_t *bf = malloc(n * 2), *hf = malloc(n * 2);
    double *want_bf = malloc(n * sizeof(double)), *want_hf = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) {
        int sign = rng_int(2), e = rng_int(40) - 20, m = 128 + rng_int(128); /* bf16: 8-bit mantissa */
        want_bf[i] = (sign ? -1.0 : 1.0) * ldexp(m / 128.0, e);
        bf[i] = (uint16_t)(sign << 15 | (e + 127) << 7 | (m - 128));
        int e2 = rng_int(28) - 14, m2 = 1024 + rng_int(1024); /* f16 normal: 11-bit mantissa */
        want_hf[i] = (sign ? -1.0 : 1.0) * ldexp(m2 / 1024.0, e2);
        hf[i] = (uint16_t)(sign << 15 | (e2 + 15) << 10 | (m2 - 1024));
    }
    hf[0] = 0x0001; /* smallest f16 subnormal, 2^-24 */
    want_hf[0] = ldexp(1.0, -24);
    hf[1] = 0x8000; /* -0 */
    want_hf[1] = -0.0;
    float *d = b->alloc(b, n * 4, "upload test");
    float *src = malloc(n * 4), *out = malloc(n * 4);
    size_t wrong;

    poison(d, n);
    b->upload(b, d, bf, TP_BF16, n);
    b->to_host(b, out, d, n * 4);
    wrong = 0;
    for (size_t i = 0; i < n; i++) wrong += (double)out[i] != want_bf[i];
    report_exact("upload", "BF16 n=4099", wrong, n);

    poison(d, n);
    b->upload(b, d, hf, TP_F16, n);
    b->to_host(b, out, d, n * 4);
    wrong = 0;
    for (size_t i = 0; i < n; i++) wrong += (double)out[i] != want_hf[i] || !signbit(out[i]) != !signbit(want_hf[i]);
    report_exact("upload", "F16 n=4099 (subnormal, -0)", wrong, n);

    fill_sym(src, n, 10.0f);
    poison(d, n);
    b->upload(b, d, src, TP_F32, n);
    b->to_host(b, out, d, n * 4);
    report_exact("upload", "F32 n=4099", memcmp(src, out, n * 4) != 0, 1);

    /* matrix_upload: [N, K] as given; matmul's test uses it too, this checks the bytes. */
    int rows = 37, cols = 111;
    report_cond("matrix_bytes", "37x111", b->matrix_bytes(b, rows, cols) >= (size_t)rows * cols * 4, ">= N*K*4");
    b->free(b, d);
    free(bf); free(hf); free(want_bf); free(want_hf); free(src); free(out);
}

/* ---- matmul ---- */
static void test_matmul_one(tp_backend *b, int T, int N, int K, int with_bias, int accumulate, int f32out) {
    float *x = malloc((size_t)T * K * 4), *W = malloc((size_t)N * K * 4), *bias = malloc((size_t)N * 4);
    float *y0 = malloc((size_t)T * N * 4), *y = malloc((size_t)T * N * 4);
    fill_sym(x, (size_t)T * K, 1.0f);
    fill_sym(W, (size_t)N * K, 0.5f);
    fill_sym(bias, N, 1.0f);
    fill_sym(y0, (size_t)T * N, 2.0f);

    float *dx = b->alloc(b, (size_t)T * K * 4, "x"), *dy = b->alloc(b, (size_t)T * N * 4, "y");
    float *db = b->alloc(b, (size_t)N * 4, "bias");
    void *dW = b->alloc(b, b->matrix_bytes(b, N, K), "W");
    b->upload(b, dx, x, TP_F32, (size_t)T * K);
    b->upload(b, db, bias, TP_F32, N);
    b->matrix_upload(b, dW, W, TP_F32, N, K);
    if (accumulate) b->upload(b, dy, y0, TP_F32, (size_t)T * N);
    else poison(dy, (size_t)T * N);

    if (f32out) b->matmul_f32out(b, dy, dx, dW, with_bias ? db : NULL, T, N, K);
    else b->matmul(b, dy, dx, dW, with_bias ? db : NULL, T, N, K, accumulate);
    b->to_host(b, y, dy, (size_t)T * N * 4);

    errstat e = {0};
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++) {
            double r = accumulate ? y0[(size_t)t * N + n] : 0.0;
            if (with_bias) r += bias[n];
            for (int k = 0; k < K; k++) r += (double)x[(size_t)t * K + k] * W[(size_t)n * K + k];
            err_add(&e, y[(size_t)t * N + n], r);
        }
    char s[96];
    snprintf(s, sizeof s, "T=%d N=%d K=%d bias=%d acc=%d", T, N, K, with_bias, accumulate);
    report(f32out ? "matmul_f32out" : "matmul", s, &e, TOL_F32);
    b->free(b, dx); b->free(b, dy); b->free(b, db); b->free(b, dW);
    free(x); free(W); free(bias); free(y0); free(y);
}

static void test_matmul(tp_backend *b) {
    /* small shapes run as one call; larger ones are cut into slices of N (GEMV at T = 1, the
     * few-token kernel at 2..16: {8, 515, 100}, {5, 64, 1000}) or, for narrow N, of T; odd N and
     * K % 8 != 0 exercise the kernel's row and column tails */
    static const int shapes[][3] = {{1, 64, 32},    {1, 257, 100}, {2, 33, 65},     {7, 1, 5},
                                    {1, 1000, 256}, {8, 515, 100}, {5, 64, 1000},   {64, 128, 96},
                                    {16, 40, 24},   {17, 300, 256}, {33, 70, 200}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int bias = 0; bias < 2; bias++)
            for (int acc = 0; acc < 2; acc++) test_matmul_one(b, shapes[s][0], shapes[s][1], shapes[s][2], bias, acc, 0);
    test_matmul_one(b, 1, 200, 64, 1, 0, 1);
    test_matmul_one(b, 5, 1001, 48, 1, 0, 1);
    test_matmul_one(b, 3, 50, 20, 0, 0, 1);
}

/* The rows kernel (T = 2..16) on every tier this CPU runs, forced through TPGEN_CPU_ISA (c, avx2,
 * avx512: kernels/cpu/cpu_isa.h), against the double reference; kernel_name names the tier. */
static void test_matmul_tiers(int nt) {
    const cpu_features *f = cpu_features_get();
    static const char *const tiers[] = {"c", "avx2", "avx512"};
    const int have[] = {1, f->avx2_fma, f->avx512};
    for (int i = 0; i < 3; i++) {
        if (!have[i]) { printf("matmul tier %s: SKIPPED (not on this CPU)\n", tiers[i]); continue; }
        setenv("TPGEN_CPU_ISA", tiers[i], 1);
        tp_backend *b = tp_backend_cpu_create(nt);
        test_matmul(b);
        char want[32];
        snprintf(want, sizeof want, "rows-f32-%s", tiers[i]);
        const char *k = b->kernel_name(b, TP_OP_MATMUL, 4, 64);
        g_checks++;
        if (strcmp(k, want) != 0) {
            g_fail++;
            printf("FAIL: TPGEN_CPU_ISA=%s: the rows kernel is %s, not %s\n", tiers[i], k, want);
        }
        b->destroy(b);
        unsetenv("TPGEN_CPU_ISA");
    }
}

/* ---- layernorm, gelu_new, add, embed, gather_rows ---- */
static void test_layernorm_one(tp_backend *b, int T, int E, float offset, int in_place) {
    const float eps = 1e-5f;
    size_t n = (size_t)T * E;
    float *x = malloc(n * 4), *g = malloc(E * 4), *be = malloc(E * 4), *y = malloc(n * 4);
    for (size_t i = 0; i < n; i++) x[i] = offset + rng_sym(2.0f);
    fill_sym(g, E, 1.5f);
    fill_sym(be, E, 0.5f);
    float *dx = b->alloc(b, n * 4, "x"), *dg = b->alloc(b, E * 4, "g"), *db = b->alloc(b, E * 4, "b");
    float *dy = in_place ? dx : b->alloc(b, n * 4, "y");
    b->upload(b, dx, x, TP_F32, n);
    b->upload(b, dg, g, TP_F32, E);
    b->upload(b, db, be, TP_F32, E);
    if (!in_place) poison(dy, n);
    b->layernorm(b, dy, dx, dg, db, T, E, eps);
    b->to_host(b, y, dy, n * 4);
    errstat e = {0};
    for (int t = 0; t < T; t++) {
        const float *xr = x + (size_t)t * E;
        double m = 0, v = 0;
        for (int i = 0; i < E; i++) m += xr[i];
        m /= E;
        for (int i = 0; i < E; i++) v += (xr[i] - m) * (xr[i] - m);
        v /= E;
        for (int i = 0; i < E; i++) err_add(&e, y[(size_t)t * E + i], (xr[i] - m) / sqrt(v + eps) * g[i] + be[i]);
    }
    char s[96];
    snprintf(s, sizeof s, "T=%d E=%d offset=%g%s", T, E, offset, in_place ? " in-place" : "");
    report("layernorm", s, &e, TOL_F32);
    b->free(b, dx); b->free(b, dg); b->free(b, db);
    if (!in_place) b->free(b, dy);
    free(x); free(g); free(be); free(y);
}

/* HF LlamaRMSNorm: x / sqrt(mean(x^2) + eps) * g (in f32 the rounding to act before g is none). */
static void test_rmsnorm_one(tp_backend *b, int T, int E, float offset, float eps, int in_place) {
    size_t n = (size_t)T * E;
    float *x = malloc(n * 4), *g = malloc(E * 4), *y = malloc(n * 4);
    for (size_t i = 0; i < n; i++) x[i] = offset + rng_sym(2.0f);
    fill_sym(g, E, 1.5f);
    float *dx = b->alloc(b, n * 4, "x"), *dg = b->alloc(b, E * 4, "g");
    float *dy = in_place ? dx : b->alloc(b, n * 4, "y");
    b->upload(b, dx, x, TP_F32, n);
    b->upload(b, dg, g, TP_F32, E);
    if (!in_place) poison(dy, n);
    b->rmsnorm(b, dy, dx, dg, T, E, eps);
    b->to_host(b, y, dy, n * 4);
    errstat e = {0};
    for (int t = 0; t < T; t++) {
        const float *xr = x + (size_t)t * E;
        double ss = 0;
        for (int i = 0; i < E; i++) ss += (double)xr[i] * xr[i];
        const double r = 1.0 / sqrt(ss / E + eps);
        for (int i = 0; i < E; i++) err_add(&e, y[(size_t)t * E + i], xr[i] * r * g[i]);
    }
    char s[96];
    snprintf(s, sizeof s, "T=%d E=%d offset=%g eps=%g%s", T, E, offset, eps, in_place ? " in-place" : "");
    report("rmsnorm", s, &e, TOL_F32);
    b->free(b, dx); b->free(b, dg);
    if (!in_place) b->free(b, dy);
    free(x); free(g); free(y);
}

/* y = silu(gate) * up, gu = [T, 2N] (gate then up per row), against double; |x| up to 30 and 100
 * (exp overflowing to inf: silu(-100) = -0, silu(100) = 100). */
static void test_silu_mul(tp_backend *b) {
    const int shapes[][2] = {{1, 8}, {3, 1000}, {17, 2752}, {2, 33}};
    const float ranges[] = {8.0f, 8.0f, 30.0f, 100.0f};
    for (int si = 0; si < 4; si++) {
        const int T = shapes[si][0], N = shapes[si][1];
        const size_t n = (size_t)T * N;
        float *gu = malloc(2 * n * 4), *y = malloc(n * 4);
        fill_sym(gu, 2 * n, ranges[si]);
        float *dgu = b->alloc(b, 2 * n * 4, "gu"), *dy = b->alloc(b, n * 4, "y");
        b->upload(b, dgu, gu, TP_F32, 2 * n);
        poison(dy, n);
        b->silu_mul(b, dy, dgu, T, N);
        b->to_host(b, y, dy, n * 4);
        errstat e = {0};
        for (int t = 0; t < T; t++)
            for (int i = 0; i < N; i++) {
                const double z = gu[(size_t)t * 2 * N + i], u = gu[(size_t)t * 2 * N + N + i];
                err_add(&e, y[(size_t)t * N + i], z / (1.0 + exp(-z)) * u);
            }
        char s[96];
        snprintf(s, sizeof s, "T=%d N=%d x in (-%g,%g)", T, N, ranges[si], ranges[si]);
        report("silu_mul", s, &e, TOL_F32);
        b->free(b, dgu); b->free(b, dy);
        free(gu); free(y);
    }
}

static void test_gelu_add(tp_backend *b) {
    size_t sizes[] = {1, 1000, 100003, 5000};
    float ranges[] = {8.0f, 8.0f, 8.0f, 30.0f}; /* +-30: exp under/overflow inside the formula */
    for (size_t si = 0; si < 4; si++) {
        size_t n = sizes[si];
        float *x = malloc(n * 4), *y = malloc(n * 4), *z = malloc(n * 4);
        fill_sym(x, n, ranges[si]);
        float *d = b->alloc(b, n * 4, "gelu"), *d2 = b->alloc(b, n * 4, "add");
        b->upload(b, d, x, TP_F32, n);
        b->gelu_new(b, d, n);
        b->to_host(b, y, d, n * 4);
        errstat e = {0};
        for (size_t i = 0; i < n; i++) {
            double a = x[i];
            err_add(&e, y[i], 0.5 * a * (1.0 + tanh(sqrt(2.0 / M_PI) * (a + 0.044715 * a * a * a))));
        }
        char s[64];
        snprintf(s, sizeof s, "n=%zu x in (-%g,%g)", n, ranges[si], ranges[si]);
        report("gelu_new", s, &e, TOL_F32);

        /* add: a single f32 rounding of an exact sum, so equal to the double sum rounded. */
        fill_sym(z, n, 100.0f);
        b->upload(b, d, x, TP_F32, n);
        b->upload(b, d2, z, TP_F32, n);
        b->add(b, d, d2, n);
        b->to_host(b, y, d, n * 4);
        size_t wrong = 0;
        for (size_t i = 0; i < n; i++) wrong += y[i] != (float)((double)x[i] + (double)z[i]);
        snprintf(s, sizeof s, "n=%zu", n);
        report_exact("add", s, wrong, n);
        b->free(b, d); b->free(b, d2);
        free(x); free(y); free(z);
    }
}

static void test_embed_gather(tp_backend *b) {
    const int V = 300, E = 96, T = 57;
    float *wte = malloc((size_t)V * E * 4), *x = malloc((size_t)T * E * 4);
    int32_t ids[57];
    fill_sym(wte, (size_t)V * E, 1.0f);
    for (int t = 0; t < T; t++) ids[t] = rng_int(V);
    ids[0] = 0;
    ids[1] = V - 1;
    float *dw = b->alloc(b, (size_t)V * E * 4, "wte"), *dx = b->alloc(b, (size_t)T * E * 4, "x");
    int32_t *did = b->alloc(b, sizeof ids, "ids");
    b->upload(b, dw, wte, TP_F32, (size_t)V * E);
    b->to_device(b, did, ids, sizeof ids);
    poison(dx, (size_t)T * E);
    b->embed(b, dx, dw, did, T, E);
    b->to_host(b, x, dx, (size_t)T * E * 4);
    size_t wrong = 0;
    for (int t = 0; t < T; t++)
        for (int e = 0; e < E; e++) wrong += x[(size_t)t * E + e] != wte[(size_t)ids[t] * E + e];
    report_exact("embed", "V=300 E=96 T=57", wrong, (size_t)T * E);

    /* gather_rows: out of place, then in place with rows[i] >= i (row compaction). */
    int32_t rows[5] = {56, 3, 3, 0, 20}, rows_ip[4] = {2, 5, 6, 56};
    float *dg = b->alloc(b, 5 * (size_t)E * 4, "gather"), *g = malloc(5 * (size_t)E * 4);
    poison(dg, 5 * (size_t)E);
    b->gather_rows(b, dg, dx, rows, 5, E);
    b->to_host(b, g, dg, 5 * (size_t)E * 4);
    wrong = 0;
    for (int i = 0; i < 5; i++)
        for (int e = 0; e < E; e++) wrong += g[(size_t)i * E + e] != x[(size_t)rows[i] * E + e];
    report_exact("gather_rows", "n=5 E=96", wrong, 5 * (size_t)E);
    b->gather_rows(b, dx, dx, rows_ip, 4, E);
    b->to_host(b, g, dx, 4 * (size_t)E * 4);
    wrong = 0;
    for (int i = 0; i < 4; i++)
        for (int e = 0; e < E; e++) wrong += g[(size_t)i * E + e] != x[(size_t)rows_ip[i] * E + e];
    report_exact("gather_rows", "n=4 E=96 in place", wrong, 4 * (size_t)E);
    b->free(b, dw); b->free(b, dx); b->free(b, did); b->free(b, dg);
    free(wte); free(x); free(g);
}

/* ---- rotary + KV cache write + attention over several steps ----
 * The reference keeps every sequence's rotated K and V by logical position in double; the
 * backend's cache is physical blocks in a scattered order, NaN wherever nothing was written. */
typedef struct {
    int Hl, Hkl, D, R, bs, S, max_blocks, n_blocks; /* Hkl < Hl: grouped-query attention */
    tp_rope_style style;
    float theta;
    int32_t *block_table; /* [S, max_blocks] */
    int *len;             /* [S] tokens written so far */
    double *refk, *refv;  /* [S, max_blocks*bs, Hkl, D] */
    float *kc, *vc;       /* backend caches [n_blocks, Hkl, bs, D] (kernels/common/tp_kv.h) */
} attn_case;

/* Rotary as the spec defines it: inv_freq = theta^(-2i/R) and the angle are f32 quantities (as
 * HF's sinusoid tables), the rotation itself in double, of the pairs (2i, 2i+1) (GPT-J, CodeGen)
 * or (i, i + R/2) (NeoX rotate-half, LLaMA). */
static void ref_rotate(double *x, const float *src, int D, int R, int pos, tp_rope_style style, float theta) {
    for (int d = 0; d < D; d++) x[d] = src[d];
    for (int i = 0; i < R / 2; i++) {
        float inv = 1.0f / (float)pow((double)theta, (double)((float)(2 * i) / (float)R));
        float ang = (float)pos * inv;
        double c = cos((double)ang), s = sin((double)ang);
        const int ia = style == TP_ROPE_NEOX ? i : 2 * i, ib = style == TP_ROPE_NEOX ? i + R / 2 : 2 * i + 1;
        double a = src[ia], bb = src[ib];
        x[ia] = a * c - bb * s;
        x[ib] = bb * c + a * s;
    }
}

static void attn_case_init(attn_case *c, int Hl, int D, int R, int bs, int S, int max_len) {
    memset(c, 0, sizeof *c);
    c->Hl = Hl; c->Hkl = Hl; c->D = D; c->R = R; c->bs = bs; c->S = S;
    c->style = TP_ROPE_GPTJ;
    c->theta = 10000.0f;
    c->max_blocks = (max_len + bs - 1) / bs;
    c->n_blocks = S * c->max_blocks + 3; /* a few blocks nobody owns */
    c->block_table = malloc((size_t)S * c->max_blocks * sizeof(int32_t));
    int32_t *perm = malloc((size_t)c->n_blocks * sizeof(int32_t));
    for (int i = 0; i < c->n_blocks; i++) perm[i] = i;
    for (int i = c->n_blocks - 1; i > 0; i--) { /* shuffle: tables point all over the cache */
        int j = rng_int(i + 1);
        int32_t tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
    for (int i = 0; i < S * c->max_blocks; i++) c->block_table[i] = perm[i];
    free(perm);
    c->len = calloc(S, sizeof(int));
    c->refk = c->refv = NULL;
    c->kc = c->vc = NULL;
}

/* The case's KV heads (Hkl), rotary style and base; allocates the caches. */
static void attn_case_kv(tp_backend *b, attn_case *c, int Hkl, tp_rope_style style, float theta) {
    c->Hkl = Hkl;
    c->style = style;
    c->theta = theta;
    const int bs = c->bs, S = c->S;
    size_t per_seq = (size_t)c->max_blocks * bs * Hkl * c->D;
    c->refk = calloc(S * per_seq, sizeof(double));
    c->refv = calloc(S * per_seq, sizeof(double));
    size_t cache_n = (size_t)c->n_blocks * bs * Hkl * c->D;
    c->kc = b->alloc(b, cache_n * 4, "k cache");
    c->vc = b->alloc(b, cache_n * 4, "v cache");
    poison(c->kc, cache_n);
    poison(c->vc, cache_n);
}

static void attn_case_free(tp_backend *b, attn_case *c) {
    free(c->block_table); free(c->len); free(c->refk); free(c->refv);
    b->free(b, c->kc); b->free(b, c->vc);
}

/* One step: n_new[s] new tokens for each sequence s (0 = not in this step), tokens of the
 * sequences interleaved in the step order given by a shuffle. */
static void attn_step(tp_backend *b, attn_case *c, const int *n_new, const char *label) {
    const int Hl = c->Hl, Hkl = c->Hkl, D = c->D, S = c->S, grp = Hl / Hkl;
    const size_t HD = (size_t)Hl * D, KD = (size_t)Hkl * D, QKV = HD + 2 * KD;
    const size_t per_seq = (size_t)c->max_blocks * c->bs * KD;
    const tp_attn_shape shape = {Hl, Hkl, D, c->R, c->style, c->theta};
    int T = 0;
    for (int s = 0; s < S; s++) T += n_new[s];
    int32_t *pos = malloc(T * sizeof(int32_t)), *seq = malloc(T * sizeof(int32_t));
    /* tokens in sequence order, then shuffled (the op may not assume grouping or order) */
    int t = 0, max_pos = 0;
    for (int s = 0; s < S; s++)
        for (int i = 0; i < n_new[s]; i++, t++) {
            seq[t] = s;
            pos[t] = c->len[s] + i;
            if (pos[t] > max_pos) max_pos = pos[t];
        }
    for (int i = T - 1; i > 0; i--) {
        int j = rng_int(i + 1);
        int32_t a = pos[i], bb = seq[i];
        pos[i] = pos[j]; seq[i] = seq[j];
        pos[j] = a; seq[j] = bb;
    }
    float *qkv = malloc((size_t)T * QKV * 4), *out = malloc((size_t)T * HD * 4);
    float *qkv_after = malloc((size_t)T * QKV * 4);
    fill_sym(qkv, (size_t)T * QKV, 1.5f);

    float *dqkv = b->alloc(b, (size_t)T * QKV * 4, "qkv"), *dout = b->alloc(b, (size_t)T * HD * 4, "att out");
    int32_t *dpos = b->alloc(b, T * 4, "pos"), *dseq = b->alloc(b, T * 4, "seq");
    int32_t *dbt = b->alloc(b, (size_t)S * c->max_blocks * 4, "block table");
    b->upload(b, dqkv, qkv, TP_F32, (size_t)T * QKV);
    b->to_device(b, dpos, pos, T * 4);
    b->to_device(b, dseq, seq, T * 4);
    b->to_device(b, dbt, c->block_table, (size_t)S * c->max_blocks * 4);
    tp_step st = {.n_tokens = T, .n_seqs = S, .block_size = c->bs, .max_blocks = c->max_blocks,
                  .max_pos = max_pos, .pos = dpos, .seq = dseq, .block_table = dbt};

    b->rotary_kv_write(b, dqkv, c->kc, c->vc, &st, &shape);
    b->to_host(b, qkv_after, dqkv, (size_t)T * QKV * 4);

    /* reference rotary; record rotated k and v into the reference history */
    double *rq = malloc((size_t)T * HD * sizeof(double));
    errstat eq = {0}, ev = {0}, ecache = {0};
    for (t = 0; t < T; t++) {
        const float *q = qkv + (size_t)t * QKV, *k = q + HD, *v = k + KD;
        const float *qa = qkv_after + (size_t)t * QKV;
        double *hk = c->refk + seq[t] * per_seq + (size_t)pos[t] * KD;
        double *hv = c->refv + seq[t] * per_seq + (size_t)pos[t] * KD;
        for (int h = 0; h < Hl; h++) {
            ref_rotate(rq + (size_t)t * HD + (size_t)h * D, q + (size_t)h * D, D, c->R, pos[t], c->style, c->theta);
            for (int d = 0; d < D; d++) err_add(&eq, qa[(size_t)h * D + d], rq[(size_t)t * HD + (size_t)h * D + d]);
        }
        for (int h = 0; h < Hkl; h++) {
            ref_rotate(hk + (size_t)h * D, k + (size_t)h * D, D, c->R, pos[t], c->style, c->theta);
            for (int d = 0; d < D; d++) {
                hv[(size_t)h * D + d] = v[(size_t)h * D + d];
                err_add(&eq, qa[HD + (size_t)h * D + d], hk[(size_t)h * D + d]);
                err_add(&ev, qa[HD + KD + (size_t)h * D + d], v[(size_t)h * D + d]);
            }
        }
        /* the cache slot of this token holds its rotated k and its v */
        for (size_t i = 0; i < KD; i++) { /* KV head i / D, dim i % D (kernels/common/tp_kv.h) */
            const size_t at = tp_kv_pos_row(c->block_table + (size_t)seq[t] * c->max_blocks, pos[t], (int)(i / D),
                                            Hkl, c->bs, D) + i % D;
            err_add(&ecache, c->kc[at], hk[i]);
            err_add(&ecache, c->vc[at], hv[i]);
        }
    }
    for (int s = 0; s < S; s++) c->len[s] += n_new[s];
    char sh[128];
    snprintf(sh, sizeof sh, "%s T=%d Hl=%d/%d D=%d R=%d bs=%d%s", label, T, Hl, Hkl, D, c->R, c->bs,
             c->style == TP_ROPE_NEOX ? " neox" : "");
    report("rotary q,k", sh, &eq, TOL_F32);
    report("rotary v same", sh, &ev, 0.0);
    report("kv_write", sh, &ecache, TOL_F32);

    poison(dout, (size_t)T * HD);
    b->attention(b, dout, dqkv, c->kc, c->vc, &st, &shape);
    b->to_host(b, out, dout, (size_t)T * HD * 4);

    errstat ea = {0};
    double *sc = malloc((size_t)(max_pos + 1) * sizeof(double));
    for (t = 0; t < T; t++)
        for (int h = 0; h < Hl; h++) {
            const double *q = rq + (size_t)t * HD + (size_t)h * D;
            const int g = h / grp; /* the KV head query head h reads */
            const double *hk = c->refk + seq[t] * per_seq + (size_t)g * D, *hv = c->refv + seq[t] * per_seq + (size_t)g * D;
            double mx = -INFINITY, sum = 0;
            for (int p = 0; p <= pos[t]; p++) {
                double s = 0;
                for (int d = 0; d < D; d++) s += q[d] * hk[(size_t)p * KD + d];
                sc[p] = s / sqrt((double)D);
                if (sc[p] > mx) mx = sc[p];
            }
            for (int p = 0; p <= pos[t]; p++) sum += sc[p] = exp(sc[p] - mx);
            for (int d = 0; d < D; d++) {
                double o = 0;
                for (int p = 0; p <= pos[t]; p++) o += sc[p] / sum * hv[(size_t)p * KD + d];
                err_add(&ea, out[(size_t)t * HD + (size_t)h * D + d], o);
            }
        }
    snprintf(sh, sizeof sh, "%s T=%d Hl=%d/%d D=%d bs=%d max_pos=%d", label, T, Hl, Hkl, D, c->bs, max_pos);
    report("attention", sh, &ea, TOL_F32);

    b->free(b, dqkv); b->free(b, dout); b->free(b, dpos); b->free(b, dseq); b->free(b, dbt);
    free(pos); free(seq); free(qkv); free(out); free(qkv_after); free(rq); free(sc);
}

static void test_attention(tp_backend *b) {
    attn_case c;
    /* several sequences, block size 4, R < D: prefills, then a mixed step, then decodes */
    attn_case_init(&c, 3, 16, 8, 4, 3, 40);
    attn_case_kv(b, &c, c.Hl, TP_ROPE_GPTJ, 10000.0f);
    attn_step(b, &c, (int[]){5, 9, 0}, "prefill");
    attn_step(b, &c, (int[]){1, 1, 7}, "mixed");
    attn_step(b, &c, (int[]){1, 1, 1}, "decode");
    attn_step(b, &c, (int[]){6, 0, 13}, "chunked prefill");
    attn_case_free(b, &c);

    /* one head, D = R = 8, block size 16 */
    attn_case_init(&c, 1, 8, 8, 16, 2, 64);
    attn_case_kv(b, &c, c.Hl, TP_ROPE_GPTJ, 10000.0f);
    attn_step(b, &c, (int[]){1, 0}, "T=1 prefill");
    attn_step(b, &c, (int[]){1, 33}, "mixed");
    attn_step(b, &c, (int[]){1, 1}, "decode");
    attn_case_free(b, &c);

    /* six heads, D = 64, R = 32, block size 16, four sequences of different lengths */
    attn_case_init(&c, 6, 64, 32, 16, 4, 80);
    attn_case_kv(b, &c, c.Hl, TP_ROPE_GPTJ, 10000.0f);
    attn_step(b, &c, (int[]){17, 3, 40, 1}, "prefill");
    attn_step(b, &c, (int[]){1, 1, 1, 30}, "mixed");
    attn_case_free(b, &c);

    /* Hl * D = 2560 floats per cache row: decode items split the heads into groups (<= 2048) */
    attn_case_init(&c, 5, 512, 64, 16, 2, 40);
    attn_case_kv(b, &c, c.Hl, TP_ROPE_GPTJ, 10000.0f);
    attn_step(b, &c, (int[]){9, 2}, "prefill");
    attn_step(b, &c, (int[]){1, 1}, "decode");
    attn_case_free(b, &c);

    /* D = 12 (not a multiple of 8: the scalar kernel), R = 4 */
    attn_case_init(&c, 2, 12, 4, 4, 2, 24);
    attn_case_kv(b, &c, c.Hl, TP_ROPE_GPTJ, 10000.0f);
    attn_step(b, &c, (int[]){7, 2}, "prefill");
    attn_step(b, &c, (int[]){1, 5}, "mixed");
    attn_step(b, &c, (int[]){1, 1}, "decode");
    attn_case_free(b, &c);

    /* long context: positions up to 2100 (large rotary angles), block size 16 */
    attn_case_init(&c, 2, 16, 16, 16, 1, 2112);
    attn_case_kv(b, &c, c.Hl, TP_ROPE_GPTJ, 10000.0f);
    attn_step(b, &c, (int[]){2048}, "long prefill");
    attn_step(b, &c, (int[]){1}, "long decode");
    attn_step(b, &c, (int[]){50}, "long chunk");
    attn_case_free(b, &c);

    /* LLaMA: rotate-half rotary on all of D, base 500000, grouped-query attention (8 query heads
     * on 2 KV heads, and 4 on 1), over prefill, mixed and decode steps */
    attn_case_init(&c, 8, 16, 16, 4, 3, 48);
    attn_case_kv(b, &c, 2, TP_ROPE_NEOX, 500000.0f);
    attn_step(b, &c, (int[]){5, 9, 0}, "gqa prefill");
    attn_step(b, &c, (int[]){1, 1, 7}, "gqa mixed");
    attn_step(b, &c, (int[]){1, 1, 1}, "gqa decode");
    attn_case_free(b, &c);
    attn_case_init(&c, 4, 64, 64, 16, 2, 300);
    attn_case_kv(b, &c, 1, TP_ROPE_NEOX, 10000.0f);
    attn_step(b, &c, (int[]){260, 3}, "mqa prefill");
    attn_step(b, &c, (int[]){1, 1}, "mqa decode");
    attn_case_free(b, &c);
    /* rotate-half on part of D (R < D), Hkl = Hl */
    attn_case_init(&c, 3, 16, 8, 4, 2, 24);
    attn_case_kv(b, &c, 3, TP_ROPE_NEOX, 10000.0f);
    attn_step(b, &c, (int[]){7, 2}, "neox R<D prefill");
    attn_step(b, &c, (int[]){1, 1}, "neox R<D decode");
    attn_case_free(b, &c);
}

/* ---- logits_stats ---- */
static const float *g_sort_l;
static int cmp_desc(const void *a, const void *b) { /* value descending, then column ascending */
    int i = *(const int *)a, j = *(const int *)b;
    if (g_sort_l[i] != g_sort_l[j]) return g_sort_l[i] > g_sort_l[j] ? -1 : 1;
    return i - j;
}

static void test_logits_one(tp_backend *b, int rows, int ld, int n_valid, int k, int coarse) {
    float *l = malloc((size_t)rows * ld * 4);
    for (size_t i = 0; i < (size_t)rows * ld; i++) {
        float v = rng_sym(12.0f);
        l[i] = coarse ? roundf(v * 2.0f) / 2.0f : v; /* coarse: many exact ties */
    }
    for (int r = 0; r < rows; r++)
        for (int c = n_valid; c < ld; c++) l[(size_t)r * ld + c] = 1e30f; /* padding must be ignored */
    int32_t *tg = malloc(rows * 4);
    for (int r = 0; r < rows; r++) tg[r] = r % 3 == 0 ? rng_int(n_valid) : r % 3 == 1 ? -1 : n_valid + (r % 2);
    if (rows > 3) tg[3] = n_valid - 1;
    float *dl = b->alloc(b, (size_t)rows * ld * 4, "logits");
    b->to_device(b, dl, l, (size_t)rows * ld * 4);
    float *mx = malloc(rows * 4), *se = malloc(rows * 4), *tv = malloc((size_t)rows * k * 4), *tgv = malloc(rows * 4);
    int32_t *ti = malloc((size_t)rows * k * 4);
    poison(mx, rows); poison(se, rows); poison(tv, (size_t)rows * k); poison(tgv, rows);
    memset(ti, 0xff, (size_t)rows * k * 4);
    b->logits_stats(b, dl, rows, ld, n_valid, k, tg, mx, se, tv, ti, tgv);

    errstat e = {0};
    size_t wrong = 0, wrong_tgt = 0;
    int *idx = malloc(n_valid * sizeof(int));
    for (int r = 0; r < rows; r++) {
        const float *lr = l + (size_t)r * ld;
        double m = -INFINITY, s = 0;
        for (int c = 0; c < n_valid; c++) m = lr[c] > m ? lr[c] : m;
        for (int c = 0; c < n_valid; c++) s += exp(lr[c] - m);
        wrong += mx[r] != (float)m;
        err_add(&e, se[r], s);
        for (int c = 0; c < n_valid; c++) idx[c] = c;
        g_sort_l = lr;
        qsort(idx, n_valid, sizeof(int), cmp_desc);
        for (int j = 0; j < k; j++) {
            int want_i = j < n_valid ? idx[j] : -1;
            float want_v = j < n_valid ? lr[idx[j]] : -INFINITY;
            wrong += ti[(size_t)r * k + j] != want_i || tv[(size_t)r * k + j] != want_v;
        }
        if (tg[r] >= 0 && tg[r] < n_valid) wrong_tgt += tgv[r] != lr[tg[r]];
        else wrong_tgt += !isnan(tgv[r]);
    }
    char s[96];
    snprintf(s, sizeof s, "rows=%d ld=%d n_valid=%d k=%d%s", rows, ld, n_valid, k, coarse ? " ties" : "");
    report_exact("logits max+topk", s, wrong, (size_t)rows * (k + 1));
    report_exact("logits target", s, wrong_tgt, rows);
    report("logits sumexp", s, &e, TOL_F32);

    /* targets NULL: every tgt_val NaN */
    poison(tgv, rows);
    for (int r = 0; r < rows; r++) tgv[r] = 0.0f;
    b->logits_stats(b, dl, rows, ld, n_valid, k, NULL, mx, se, tv, ti, tgv);
    wrong = 0;
    for (int r = 0; r < rows; r++) wrong += !isnan(tgv[r]);
    report_exact("logits no target", s, wrong, rows);

    b->free(b, dl);
    free(l); free(tg); free(mx); free(se); free(tv); free(tgv); free(ti); free(idx);
}

static void test_logits(tp_backend *b) {
    test_logits_one(b, 1, 1000, 997, 1, 0);
    test_logits_one(b, 5, 1000, 997, 5, 1);
    test_logits_one(b, 7, 51200, 51200, 64, 1);
    test_logits_one(b, 4, 520, 513, 64, 0);
    test_logits_one(b, 3, 8, 3, 5, 1); /* fewer valid columns than k: the rest -inf / -1 */
    test_logits_one(b, 1, 51200, 51197, 64, 1); /* one row cut into parts over the threads (cpu_logits.c) */
    test_logits_one(b, 1, 40000, 39999, 5, 0);
}

/* ---- fill_random ---- */
static void test_fill_random(tp_backend *b, tp_backend *b1) {
    const size_t n = 1 << 20;
    float *a = b->alloc(b, n * 4, "rand a"), *c = b->alloc(b, n * 4, "rand c"), *s = b->alloc(b, 999 * 4, "rand s");
    const float mean = 0.25f, sd = 0.02f;
    poison(a, n);
    poison(c, n);
    b->fill_random(b, a, n, 42, mean, sd);
    b1->fill_random(b1, c, n, 42, mean, sd); /* one thread */
    report_exact("fill_random", "same seed, 2 vs 1 threads", memcmp(a, c, n * 4) != 0, 1);
    b->fill_random(b, s, 999, 42, mean, sd); /* odd length: the last pair half-used */
    report_exact("fill_random", "prefix of a longer fill", memcmp(a, s, 999 * 4) != 0, 1);
    b->fill_random(b, c, n, 43, mean, sd);
    size_t same = 0;
    for (size_t i = 0; i < n; i++) same += a[i] == c[i];
    report_cond("fill_random", "seed 43 vs 42", same < n / 1000, "differs");
    double m = 0, v = 0, m3 = 0;
    size_t bad = 0, tail = 0;
    for (size_t i = 0; i < n; i++) {
        bad += !isfinite(a[i]);
        m += a[i];
    }
    m /= n;
    for (size_t i = 0; i < n; i++) {
        double z = (a[i] - m) / sd;
        v += z * z;
        m3 += z * z * z;
        tail += fabs(z) > 3.0;
    }
    v /= n;
    m3 /= n;
    /* N(0,1) moments for n = 2^20: mean within 5 sigma/sqrt(n), variance within 1%, skew small,
     * P(|z| > 3) = 0.0027 */
    char msg[160];
    int ok = bad == 0 && fabs(m - mean) < 5 * sd / sqrt((double)n) && fabs(v - 1.0) < 0.01 && fabs(m3) < 0.02 &&
             fabs(tail / (double)n - 0.0027) < 0.0005;
    snprintf(msg, sizeof msg, "mean=%.6f var/sd^2=%.4f skew=%.4f P(|z|>3)=%.5f", m, v, m3, tail / (double)n);
    report_cond("fill_random", "n=2^20 mean=0.25 std=0.02", ok, msg);
    b->free(b, a); b->free(b, c); b->free(b, s);
}

int main(int argc, char **argv) {
    int nt = argc > 1 ? atoi(argv[1]) : 2;
    tp_backend *b = tp_backend_cpu_create(nt);
    tp_backend *b1 = tp_backend_cpu_create(1);
    printf("cpu backend '%s', act %s, %d threads\n", b->name, tp_dtype_name(b->act), nt);
    if (b->act != TP_F32) {
        printf("cpu backend act dtype is %s, expected F32: FAIL\n", tp_dtype_name(b->act));
        return 1;
    }
    test_memory(b);
    test_upload(b);
    test_matmul(b);
    test_matmul_tiers(nt);
    test_layernorm_one(b, 1, 8, 0.0f, 0);
    test_layernorm_one(b, 5, 64, 3.0f, 0);
    test_layernorm_one(b, 33, 1000, 100.0f, 0);
    test_layernorm_one(b, 40, 1024, -1.0f, 1);
    test_rmsnorm_one(b, 1, 8, 0.0f, 1e-6f, 0);
    test_rmsnorm_one(b, 5, 64, 3.0f, 1e-5f, 0);
    test_rmsnorm_one(b, 33, 4096, 0.0f, 1e-6f, 0);
    test_rmsnorm_one(b, 40, 1000, -1.0f, 1e-6f, 1);
    test_rmsnorm_one(b, 2, 64, 0.0f, 0.5f, 0); /* eps large against mean(x^2): an ignored eps shows */
    test_silu_mul(b);
    test_gelu_add(b);
    test_embed_gather(b);
    test_attention(b);
    test_logits(b);
    test_fill_random(b, b1);
    b->destroy(b);
    b1->destroy(b1);
    printf("%d checks, %d failed\n", g_checks, g_fail);
    return g_fail ? 1 : 0;
}
