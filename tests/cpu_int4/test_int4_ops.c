/* Op tests of the CPU backend's int4 weights (kernels/cpu/cpu_int4.c).
 *
 * usage: test_int4_ops THREADS ISA PATH [a8]
 *   ISA: c | avx2 | avxvnni | avx512 | amx (the tier, forced through TPGEN_CPU_ISA; amx runs its
 *        GEMM, avx512vnni's GEMV) | auto (TPGEN_CPU_ISA unset: the tiers measured per shape)
 *   PATH: gemv | gemm | auto (TPGEN_INT4_GEMM: every T through one path, or by T as in a job)
 *   a8: 8-bit activations (tp_backend_int4_act8) in every backend, the twin's included: the bound
 *        below with x's grid per group (m_g / 254 sum_g |wd|) and one more rounding a group
 *        test_int4_ops bad WHAT N K GROUP: one bad call (the error tests, tests/cpu_int4.cmake)
 * Exits 77 (ctest SKIPPED) when this CPU cannot run the requested tier.
 *
 * Checks:
 *  - RTN (tp_q4_quantize_group) against a double-precision dequantization: every weight within
 *    half a step (s / 2) of (q - zero) * s, 0 exact, q and zero in 0..15, the zeros nonzero;
 *  - the packed layout (cpu_int4_kernels.h) read back from the buffer: every q, scale and zero of
 *    matrix_upload_q4 and of matrix_fill_random_q4 (= the f32 backend's draws, quantized per
 *    group), rows past N zero;
 *  - the tier's kernels against the plain-C twin, bit for bit (memcmp), on odd shapes: N off the
 *    16-row panels, groups 32, 64, 96, 128 and one over CPU_I4_MAX_KG (split), T 1..40 and 131,
 *    accumulate, bias, GELU, f32 out;
 *  - the twin against a double reference of the dequantized weights within the documented bound
 *    (cpu_int4.c): m / 32766 sum|wd| + (G + 2) 2^-24 (sum|wd x| + m / 32766 sum|wd|), plus the
 *    epilogue's roundings;
 *  - the int8 matrices of the int4 backend (lm_head): the int8 backend's bits, kernel_name;
 *  - a NaN in a token's x makes its outputs NaN and leaves the other tokens' alone. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/common/tp_quant4.h"
#include "kernels/cpu/cpu_int4.h"
#include "kernels/cpu/cpu_int4_kernels.h" /* the layout, for test_layout */
#include "kernels/cpu/cpu_isa.h"
#include "tests/common/check.h"

static float *rand_f32(size_t n, double lo, double hi) {
    float *p = malloc(n * 4 + 4);
    for (size_t i = 0; i < n; i++) p[i] = (float)(lo + (hi - lo) * urand());
    return p;
}
static int g_a8; /* 8-bit activations (argument a8) */
static double gelu_d(double x) { return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

/* A canonical int4 matrix: RTN of random weights (shifted, so the zeros are not 8), with one
 * all-zero group and one row of zeros. Owns its arrays. */
typedef struct {
    uint8_t *q, *zero;
    float *scale;
    int N, K, G;
} q4m;
static q4m q4_random(int N, int K, int G, double lo, double hi) {
    q4m m = {malloc((size_t)N * K), malloc((size_t)N * (K / G)), malloc((size_t)N * (K / G) * 4), N, K, G};
    float *w = rand_f32((size_t)N * K, lo, hi);
    if (N > 2) memset(w + (size_t)2 * K, 0, (size_t)K * 4);       /* a zero row */
    if (N > 3) memset(w + (size_t)3 * K + G, 0, (size_t)(K >= 2 * G ? G : 0) * 4); /* a zero group */
    for (int n = 0; n < N; n++)
        for (int g = 0; g < K / G; g++)
            tp_q4_quantize_group(w + (size_t)n * K + (size_t)g * G, G, m.q + (size_t)n * K + (size_t)g * G,
                                 &m.scale[(size_t)n * (K / G) + g], &m.zero[(size_t)n * (K / G) + g]);
    free(w);
    return m;
}
static void q4_free(q4m *m) { free(m->q), free(m->zero), free(m->scale); }
static double q4_w(const q4m *m, int n, int k) {
    const size_t g = (size_t)n * (m->K / m->G) + (size_t)(k / m->G);
    return ((double)m->q[(size_t)n * m->K + k] - m->zero[g]) * (double)m->scale[g];
}
static void *q4_upload(tp_backend *b, const q4m *m) {
    void *W = b->alloc(b, b->matrix_bytes_q4(b, m->N, m->K, m->G), "W");
    const tp_q4_host h = {m->q, m->scale, m->zero, m->G};
    b->matrix_upload_q4(b, W, &h, m->N, m->K);
    return W;
}

/* ---- RTN against double ---- */
static void test_rtn(void) {
    const int G = 128;
    int nonzero_zero = 0;
    float w[128], s;
    uint8_t q[128], z;
    for (int rep = 0; rep < 200; rep++) {
        const double c = (rep % 5 - 2) * 0.3, r = 0.01 + urand();
        for (int i = 0; i < G; i++) w[i] = (float)(c + r * (2 * urand() - 1));
        if (rep % 7 == 0) w[rep % G] = 0.0f;
        tp_q4_quantize_group(w, G, q, &s, &z);
        CHECK(z <= 15, "RTN zero %d outside 0..15", z);
        nonzero_zero += z != 0 && z != 15;
        for (int i = 0; i < G; i++) {
            CHECK(q[i] <= 15, "RTN q %d outside 0..15", q[i]);
            const double d = ((double)q[i] - z) * (double)s; /* the dequantization, in double */
            /* half a step, plus the f32 division's rounding of w / s (relative 2^-24 of 16 steps) */
            CHECK(fabs(d - w[i]) <= 0.5 * s * (1 + 1e-5), "RTN rep %d i %d: w %.9g dequantized %.9g (scale %.9g)", rep,
                  i, w[i], d, s);
            if (w[i] == 0.0f) CHECK(d == 0.0, "RTN: 0 must be a level (got %.9g)", d);
        }
    }
    CHECK(nonzero_zero > 50, "RTN: only %d groups of 200 have a zero point inside 1..14", nonzero_zero);
    for (int i = 0; i < G; i++) w[i] = 0.0f; /* all zeros: scale 0, q = zero = 0 */
    tp_q4_quantize_group(w, G, q, &s, &z);
    CHECK(s == 0.0f && z == 0 && q[5] == 0, "RTN of zeros: scale %g zero %d", s, z);
    w[3] = NAN; /* a NaN: the scale carries it */
    tp_q4_quantize_group(w, G, q, &s, &z);
    CHECK(isnan(s), "RTN with a NaN: scale %g, not NaN", s);
}

/* ---- the layout, read back ---- */
static unsigned panel_q(const uint8_t *panel, int j, int k) {
    const int s = k / 8, i = (k % 8) / 2, h = k % 2;
    const unsigned u = panel[(size_t)s * 64 + 2 * (2 * j + h)] | (unsigned)panel[(size_t)s * 64 + 2 * (2 * j + h) + 1] << 8;
    return u >> (4 * i) & 15;
}
/* The buffer holds m's q, scale, zero at kernel group KG; rows past N zero. */
static void check_layout(const char *what, const void *W, const q4m *m, int KG) {
    const cpu_i4_head *h = W;
    CHECK(h->magic == CPU_I4_MAGIC && h->kind == CPU_I4_KIND_INT4 && h->N == m->N && h->K == m->K && h->group == m->G &&
              h->kgroup == KG,
          "%s: header %x kind %u [%d x %d] group %d kgroup %d", what, h->magic, h->kind, h->N, h->K, h->group, h->kgroup);
    const uint8_t *q = (const uint8_t *)W + CPU_I4_HEAD;
    int bad = 0;
    for (int P = 0; P < cpu_i4_panels(m->N); P++) {
        const uint8_t *panel = cpu_i4_panel(q, m->K, KG, P);
        const float *sc = cpu_i4_scales(panel, m->K);
        const uint8_t *zp = cpu_i4_zeros(panel, m->K, KG);
        for (int j = 0; j < CPU_I4_NR; j++) {
            const int n = P * CPU_I4_NR + j;
            for (int k = 0; k < m->K; k++) {
                const unsigned want = n < m->N ? m->q[(size_t)n * m->K + k] : 0;
                if (panel_q(panel, j, k) != want && bad++ < 3)
                    CHECK(0, "%s: q[%d, %d] stored %u, want %u", what, n, k, panel_q(panel, j, k), want);
            }
            for (int gk = 0; gk < m->K / KG; gk++) {
                const size_t g = (size_t)n * (m->K / m->G) + (size_t)(gk * KG / m->G);
                const float ws = n < m->N ? m->scale[g] : 0.0f;
                const unsigned wz = n < m->N ? m->zero[g] : 0;
                if ((memcmp(&sc[gk * CPU_I4_NR + j], &ws, 4) != 0 || zp[gk * CPU_I4_NR + j] != wz) && bad++ < 3)
                    CHECK(0, "%s: row %d group %d: scale %g zero %u, want %g %u", what, n, gk, sc[gk * CPU_I4_NR + j],
                          zp[gk * CPU_I4_NR + j], ws, wz);
            }
        }
    }
    g_checks++;
}
static void test_layout(tp_backend *b) {
    q4m m = q4_random(37, 256, 64, -0.2, 0.5);
    void *W = q4_upload(b, &m);
    check_layout("upload", W, &m, 64);
    b->free(b, W);
    q4_free(&m);
    /* a group over CPU_I4_MAX_KG: split into its largest divisor <= it, a multiple of 32 */
    m = q4_random(5, 8256, 8256, -0.3, 0.4);
    W = q4_upload(b, &m);
    check_layout("upload, group 8256", W, &m, 4128);
    b->free(b, W);
    q4_free(&m);
    /* fill_random_q4 = the f32 backend's draws of the same matrix, RTN per group */
    const int N = 21, K = 192, G = 32;
    tp_backend *f = tp_backend_cpu_create(1);
    float *wf = malloc((size_t)N * K * 4);
    f->fill_random(f, wf, (size_t)N * K, 7, 0.01f, 0.02f);
    q4m r = {malloc((size_t)N * K), malloc((size_t)N * (K / G)), malloc((size_t)N * (K / G) * 4), N, K, G};
    for (int n = 0; n < N; n++)
        for (int g = 0; g < K / G; g++)
            tp_q4_quantize_group(wf + (size_t)n * K + (size_t)g * G, G, r.q + (size_t)n * K + (size_t)g * G,
                                 &r.scale[n * (K / G) + g], &r.zero[n * (K / G) + g]);
    W = b->alloc(b, b->matrix_bytes_q4(b, N, K, G), "W");
    b->matrix_fill_random_q4(b, W, N, K, G, 7, 0.01f, 0.02f);
    check_layout("fill_random_q4", W, &r, G);
    b->free(b, W);
    q4_free(&r);
    free(wf);
    f->destroy(f);
}

/* ---- the op on backend b: y for (T, m), epilogue epi: 0 plain, 1 bias + accumulate, 2 bias +
 * GELU, 3 f32 out with bias ---- */
static float *run_op(tp_backend *b, const void *W, const float *x, const float *bias, const float *y0, int T, int N,
                     int K, int epi) {
    float *y = malloc((size_t)T * N * 4 + 4);
    if (epi == 1) memcpy(y, y0, (size_t)T * N * 4);
    else for (size_t i = 0; i < (size_t)T * N; i++) y[i] = NAN; /* must not be read */
    if (epi == 0) b->matmul(b, y, x, W, NULL, T, N, K, 0);
    else if (epi == 1) b->matmul(b, y, x, W, bias, T, N, K, 1);
    else if (epi == 2) b->matmul_gelu(b, y, x, W, bias, T, N, K);
    else b->matmul_f32out(b, y, x, W, bias, T, N, K);
    return y;
}

/* The twin (bc) against the double reference within the bound (file comment). */
static void check_ref(const float *y, const q4m *m, const float *x, const float *bias, const float *y0, int T,
                      int epi) {
    int kg = m->G; /* the kernels' group (cpu_int4_kernels.h, CPU_I4_MAX_KG) */
    if (kg > CPU_I4_MAX_KG)
        for (kg = CPU_I4_MAX_KG; m->G % kg != 0; kg -= TP_Q4_GROUP_ALIGN) {}
    const int N = m->N, K = m->K, ng = K / kg;
    const double u = ldexp(1, -24);
    int bad = 0;
    for (int t = 0; t < T; t++) {
        double mx = 0, mg[1024] = {0}; /* max |x| of the token; of each kernel group (a8) */
        for (int k = 0; k < K; k++) {
            mx = fmax(mx, fabs(x[(size_t)t * K + k]));
            mg[k / kg] = fmax(mg[k / kg], fabs(x[(size_t)t * K + k]));
        }
        for (int n = 0; n < N; n++) {
            double s = 0, mag = 0, wsum = 0, xe8 = 0;
            for (int k = 0; k < K; k++) {
                const double wd = q4_w(m, n, k), p = wd * x[(size_t)t * K + k];
                s += p, mag += fabs(p), wsum += fabs(wd);
                xe8 += mg[k / kg] / 254 * (1 + ldexp(1, -14)) * fabs(wd); /* half a step of 127, x * inv's rounding */
            }
            const double xe = g_a8 ? xe8 : mx / 32766 * wsum;
            double tol = xe + (ng + (g_a8 ? 3 : 2)) * u * (mag + xe), ref = s;
            if (epi == 1) { ref += y0[(size_t)t * N + n]; tol += u * (fabs(s) + tol + fabs(y0[(size_t)t * N + n])); }
            if (epi >= 1) { ref += bias[n]; tol += u * (fabs(ref) + tol + fabs(bias[n])); }
            if (epi == 2) { const double pre = ref; ref = gelu_d(pre); tol = 1.13 * tol + 2 * u * fabs(ref) + 1e-6; }
            tol *= 1 + 1e-9;
            const double got = y[(size_t)t * N + n];
            if (!(fabs(got - ref) <= tol) && bad++ < 3)
                CHECK(0, "twin vs double: T=%d N=%d K=%d G=%d epi %d at (%d, %d): got %.9g want %.9g (tol %.3g)", T, N,
                      K, m->G, epi, t, n, got, ref, tol);
            g_checks++;
        }
    }
}

/* The tier's backend b against the twin bc: the same bits; the twin against double. */
static void test_shapes(tp_backend *b, tp_backend *bc, const char *label) {
    static const int shapes[][4] = {/* T, N, K, G */
        {1, 35, 256, 32},   {2, 67, 192, 64},  {3, 16, 384, 128}, {4, 9, 96, 32},    {5, 130, 288, 96},
        {7, 33, 512, 128},  {8, 48, 1024, 64}, {13, 17, 640, 128}, {16, 50, 128, 32}, {17, 35, 256, 128},
        {24, 100, 160, 32}, {40, 23, 512, 64}, {131, 37, 384, 128}, {3, 19, 8256, 8256}, {33, 64, 4096, 128},
        {2, 1030, 1024, 128}, {40, 1030, 1024, 128}}; /* 2^20 weights and more: measured at upload (auto) */
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const int T = shapes[i][0], N = shapes[i][1], K = shapes[i][2], G = shapes[i][3];
        q4m m = q4_random(N, K, G, -0.3 + 0.1 * (int)(i % 4), 0.4);
        float *x = rand_f32((size_t)T * K, -2.0, 2.0), *bias = rand_f32(N, -0.3, 0.3), *y0 = rand_f32((size_t)T * N, -1, 1);
        for (int k = 0; k < K; k += 3) x[k] *= 0.01f; /* a spread of magnitudes */
        void *W = q4_upload(b, &m), *Wc = b == bc ? W : q4_upload(bc, &m);
        for (int epi = 0; epi < 4; epi++) {
            float *y = run_op(b, W, x, bias, y0, T, N, K, epi), *yc = b == bc ? y : run_op(bc, Wc, x, bias, y0, T, N, K, epi);
            if (b != bc)
                CHECK(memcmp(y, yc, (size_t)T * N * 4) == 0, "%s and the c twin differ at T=%d N=%d K=%d G=%d epilogue %d",
                      label, T, N, K, G, epi);
            if ((T <= 40 && (size_t)N * K < 1 << 20) || epi == 0) check_ref(yc, &m, x, bias, y0, T, epi); /* the large: once */
            if (yc != y) free(yc);
            free(y);
        }
        if (Wc != W) bc->free(bc, Wc);
        b->free(b, W);
        q4_free(&m);
        free(x), free(bias), free(y0);
    }
}

/* Every T from 1 to 40 on one shape: the tier against the twin (GEMV tiles, GEMM tiles, tails). */
static void test_every_t(tp_backend *b, tp_backend *bc, const char *label) {
    if (b == bc) return;
    const int N = 45, K = 320, G = 64;
    q4m m = q4_random(N, K, G, -0.1, 0.3);
    float *x = rand_f32((size_t)40 * K, -1.0, 3.0), *bias = rand_f32(N, -0.3, 0.3);
    void *W = q4_upload(b, &m), *Wc = q4_upload(bc, &m);
    for (int T = 1; T <= 40; T++) {
        float *y = run_op(b, W, x, bias, NULL, T, N, K, 2), *yc = run_op(bc, Wc, x, bias, NULL, T, N, K, 2);
        CHECK(memcmp(y, yc, (size_t)T * N * 4) == 0, "%s and the c twin differ at T=%d (GELU)", label, T);
        free(y), free(yc);
    }
    b->free(b, W), bc->free(bc, Wc);
    q4_free(&m);
    free(x), free(bias);
}

static tp_backend *make(int threads, const char *isa, const char *path);

/* lm_head and the other int8 matrices of a fresh int4 backend (tier isa, path): the int8
 * backend's bits; kernel_name says int4 for the layers, int8 for lm_head. */
static void test_int8_matrices(int threads, const char *isa, const char *path) {
    tp_backend *b = make(threads, isa, path), *b8 = tp_backend_cpu_create(threads);
    char err[256];
    if (tp_backend_use_int8(b8, 0, err, sizeof err)) { CHECK(0, "%s", err); return; }
    const int T = 3, N = 70, K = 100;
    float *w = rand_f32((size_t)N * K, -0.5, 0.5), *x = rand_f32((size_t)T * K, -1, 1), *bias = rand_f32(N, -1, 1);
    void *W = b->alloc(b, b->matrix_bytes(b, N, K), "W"), *W8 = b8->alloc(b8, b8->matrix_bytes(b8, N, K), "W8");
    CHECK(b->matrix_bytes(b, N, K) == b8->matrix_bytes(b8, N, K) + CPU_I4_HEAD, "int8 matrix bytes: %zu, int8 backend %zu",
          b->matrix_bytes(b, N, K), b8->matrix_bytes(b8, N, K));
    for (int how = 0; how < 3; how++) {
        if (how == 0) { b->matrix_upload(b, W, w, TP_F32, N, K); b8->matrix_upload(b8, W8, w, TP_F32, N, K); }
        if (how == 1) {
            float mx[70];
            for (int n = 0; n < N; n++) mx[n] = 0.7f;
            b->matrix_upload_rowmax(b, W, w, TP_F32, N, K, mx);
            b8->matrix_upload_rowmax(b8, W8, w, TP_F32, N, K, mx);
        }
        if (how == 2) { b->matrix_fill_random(b, W, N, K, 3, 0, 0.1f); b8->matrix_fill_random(b8, W8, N, K, 3, 0, 0.1f); }
        for (int epi = 0; epi < 4; epi++) {
            float *y = run_op(b, W, x, bias, x, T, N, K, epi), *y8 = run_op(b8, W8, x, bias, x, T, N, K, epi);
            CHECK(memcmp(y, y8, (size_t)T * N * 4) == 0, "int8 matrix (upload %d, epilogue %d): the int4 backend's "
                  "output differs from the int8 backend's", how, epi);
            free(y), free(y8);
        }
    }
    /* kernel_name: the layers' int4 kernel (a GEMM at T 1 where TPGEN_INT4_GEMM=gemm), lm_head's int8 one */
    const char *mm = b->kernel_name(b, TP_OP_MATMUL, 1, 0), *lg = b->kernel_name(b, TP_OP_LOGITS, 1, 0);
    const char *kind = g_a8 ? "int4a8-" : "int4-";
    CHECK(strncmp(mm, strcmp(path, "gemm") == 0 ? "gemm-" : "gemv-", 5) == 0 && strncmp(mm + 5, kind, strlen(kind)) == 0,
          "kernel_name(MATMUL, T 1) = %s (want %s)", mm, kind);
    CHECK(strncmp(lg, "gemv-int8-", 10) == 0, "kernel_name(LOGITS, T 1) = %s (lm_head is int8)", lg);
    CHECK(strstr(b->kernel_name(b, TP_OP_MATMUL, 64, 0), g_a8 ? "-int4a8-" : "-int4-") != NULL, "kernel_name(MATMUL, T 64) = %s",
          b->kernel_name(b, TP_OP_MATMUL, 64, 0));
    printf("test_int4_ops: isa %s: matmul %s, logits %s, attention %s\n", isa, mm, lg,
           b->kernel_name(b, TP_OP_ATTENTION, 1, 64));
    b->free(b, W), b8->free(b8, W8);
    b8->destroy(b8);
    b->destroy(b);
    free(w), free(x), free(bias);
}

/* A NaN in one token's x: that token's outputs NaN, the others' bits unchanged. */
static void test_nonfinite(tp_backend *b) {
    const int T = 6, N = 20, K = 128;
    q4m m = q4_random(N, K, 32, -0.2, 0.2);
    float *x = rand_f32((size_t)T * K, -1, 1), *bias = rand_f32(N, -1, 1);
    void *W = q4_upload(b, &m);
    float *y1 = run_op(b, W, x, bias, NULL, T, N, K, 0);
    x[(size_t)2 * K + 77] = NAN;
    float *y = run_op(b, W, x, bias, NULL, T, N, K, 0);
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++) {
            const float got = y[(size_t)t * N + n];
            if (t == 2) CHECK(isnan(got), "token 2 has a NaN in x: output %d is %g", n, got);
            else CHECK(memcmp(&got, &y1[(size_t)t * N + n], 4) == 0, "token %d output %d moved next to a NaN token", t, n);
        }
    b->free(b, W);
    q4_free(&m);
    free(x), free(bias), free(y), free(y1);
}

static int have_tier(const char *isa) {
    const cpu_features *f = cpu_features_get();
    if (strcmp(isa, "auto") == 0) return 1;
    if (strcmp(isa, "avx2") == 0) return f->avx2_fma;
    if (strcmp(isa, "avxvnni") == 0) return f->avxvnni;
    if (strcmp(isa, "avx512") == 0) return f->avx512vnni;
    if (strcmp(isa, "amx") == 0) return f->amx_int8 && f->avx512vnni;
    return strcmp(isa, "c") == 0;
}

static tp_backend *make(int threads, const char *isa, const char *path) {
    if (strcmp(isa, "auto") == 0) unsetenv("TPGEN_CPU_ISA"); /* measured per shape (cpu_tune.h) */
    else setenv("TPGEN_CPU_ISA", isa, 1);
    if (strcmp(path, "auto") == 0) unsetenv("TPGEN_INT4_GEMM");
    else setenv("TPGEN_INT4_GEMM", path, 1);
    tp_backend *b = tp_backend_cpu_create(threads);
    char err[512];
    if (tp_backend_use_int4(b, 0, err, sizeof err) || (g_a8 && tp_backend_int4_act8(b, err, sizeof err))) {
        fprintf(stderr, "test_int4_ops: %s\n", err);
        exit(1);
    }
    return b;
}

/* One bad call, for the error tests: it must end the process with a message naming the shape. */
static int bad_call(const char *what, int N, int K, int G) {
    tp_backend *b = make(1, "c", "auto");
    if (strcmp(what, "bytes") == 0) b->matrix_bytes_q4(b, N, K, G);
    else if (strcmp(what, "fill") == 0) {
        void *W = b->alloc(b, (size_t)N * K + 4096, "W");
        b->matrix_fill_random_q4(b, W, N, K, G, 1, 0, 1);
    } else if (strcmp(what, "shape") == 0) { /* matmul of [N, K] on a matrix stored as [N, K + G] */
        q4m m = q4_random(N, K + G, G, -1, 1);
        void *W = q4_upload(b, &m);
        float *x = calloc((size_t)K, 4), *y = calloc((size_t)N, 4);
        b->matmul(b, y, x, W, NULL, 1, N, K, 0);
    }
    fprintf(stderr, "test_int4_ops: bad %s [%d x %d] group %d was accepted\n", what, N, K, G);
    return 3;
}

int main(int argc, char **argv) {
    if (argc == 6 && strcmp(argv[1], "bad") == 0) return bad_call(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
    g_a8 = argc == 5 && strcmp(argv[4], "a8") == 0;
    if (argc != 4 && !g_a8) {
        fprintf(stderr, "usage: test_int4_ops THREADS c|avx2|avxvnni|avx512|amx gemv|gemm|auto [a8]\n"
                        "       test_int4_ops bad bytes|fill|shape N K GROUP\n");
        return 2;
    }
    const int threads = atoi(argv[1]);
    const char *isa = argv[2], *path = argv[3];
    if (!have_tier(isa)) {
        printf("SKIPPED: this CPU does not run the int4 %s tier\n", isa);
        return 77;
    }
    tp_backend *bc = make(threads, "c", "gemv"), *b = strcmp(isa, "c") == 0 && strcmp(path, "gemv") == 0 ? bc : make(threads, isa, path);
    if (!b->weights || strcmp(b->weights, "int4") != 0 || b->act != TP_F32 || !b->matrix_upload_q4) {
        fprintf(stderr, "test_int4_ops: the backend does not say int4 weights / f32 activations\n");
        return 1;
    }
    char label[64];
    snprintf(label, sizeof label, "%s %s%s", isa, path, g_a8 ? " a8" : "");
    const char *how, *kern = cpu_int4_choice(b, 64, 64, 32, strcmp(path, "gemm") == 0 ? 64 : 1, &how);
    printf("test_int4_ops: %s runs the %s kernels (%s)\n", label, kern ? kern : "(none)", how);
    CHECK(kern && (strcmp(isa, "auto") == 0 || strcmp(isa, "c") == 0 || strncmp(kern, isa, strlen(isa)) == 0 ||
                   (strcmp(isa, "amx") == 0 && (strcmp(path, "gemv") == 0 || g_a8) && strcmp(kern, "avx512vnni") == 0)),
          "TPGEN_CPU_ISA=%s: the int4 kernels are %s", isa, kern ? kern : "(none)");
    test_rtn();
    test_layout(b);
    test_shapes(b, bc, label);
    for (int T = 1; T <= 64; T *= 8) { /* the large shape's choices (auto: measured at its upload) */
        kern = cpu_int4_choice(b, 1030, 1024, 128, T, &how);
        printf("test_int4_ops: %s [1030 x 1024] group 128 at T %d: %s (%s)\n", label, T, kern ? kern : "(none)", how);
    }
    test_every_t(b, bc, label);
    test_int8_matrices(threads, isa, path);
    test_nonfinite(b);
    if (b != bc) b->destroy(b);
    bc->destroy(bc);
    printf("test_int4_ops (%d threads, isa %s, path %s%s): %d checks, %d failed\n", threads, isa, path,
           g_a8 ? ", 8-bit activations" : "", g_checks, g_fail);
    return g_fail ? 1 : 0;
}
