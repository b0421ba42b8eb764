/* --weights int4 on the CUDA backend (kernels/cuda/cuda_int4.cu) against a host double-precision
 * reference computed from the canonical form (kernels/common/tp_quant4.h), F16 and BF16
 * activations.
 *
 * usage: test_cuda_int4 [SEED [quick]]          the checks below
 *        test_cuda_int4 SEED bad-group|bad-cols|bad-q|bad-zero
 *                                              one bad int4 matrix: the backend must die naming it
 * Exits 77 (ctest SKIPPED) when no CUDA GPU is visible. quick: the smaller shapes only (the
 * emulated device, tests/gpu_emu_faults.cmake: every kernel path at a fraction of the work).
 *
 * Checks, per dtype:
 *  - layout: a matrix from matrix_upload_q4 (random q, zero and scales, one group of scale 0) and
 *    one from matrix_fill_random_q4 hold the canonical form's weights, as the backend's own
 *    matmul_f32out reads them with one-hot rows of x: through the GEMV (T <= 4) exactly
 *    tp_q4_dequant(q, zero, scale) (its f32 sums of one exact product), through the dequantized
 *    tiles and cuBLAS (T > 4) exactly that rounded to the act dtype (tp_round.h, as the host's
 *    tp_convert_from_f32). fill_random_q4's form is the host's: tp_q8_random_row then
 *    tp_q4_quantize_group per group.
 *  - every GEMM (matmul; with bias and accumulate; matmul_gelu with bias; matmul_f32out with bias)
 *    for T = 1, 3, 4 (GEMV), 5, 17, 64 (tiles + cuBLAS), groups of 32, 64 and 128 with several
 *    groups per row, tails of N; weights RTN-quantized from random f32 (tp_q4_quantize_group, as
 *    --weights int4 loads them). Against y = sum_k (q - zero) scale x in double (+ y0) (+ bias)
 *    (GELU), x rounded to the act dtype first:
 *      NMSE <= tol_act(act) (tests/gpu/gpu_test.h; f32 logits through the GEMV: TOL_F32 -- the
 *      tile path rounds each weight to the act dtype, u^2/3 of NMSE, so its f32 logits get
 *      tol_act too), and every element within 2 u_out |y| + 2 (u_w + (K + 64) 2^-24) S, S the sum
 *      of the magnitudes of the terms, u_out the output's unit roundoff, u_w the act's on the tile
 *      path (0 on the GEMV): the worst case of one output rounding, one weight rounding and an
 *      f32 sum of K terms, doubled. Outputs are poisoned with NaN first; each must be finite.
 *  - the chunked tile path: tiles of Q4_BN rows x Q4_BK columns and token chunks of the planned
 *    f32 rows (reserve_scratch with max_tokens 32): N = 2080 (two row tiles), K = 4160 (two
 *    column tiles, 130 GEMV chunks per row), T = 70 (three token chunks).
 *  - int8 beside int4 (lm_head): matrix_upload / matrix_upload_rowmax / matrix_fill_random store
 *    int8 with row scales (tp_quant.h), and the GEMMs read them as int8, also after an int4 matrix
 *    was uploaded at the same address (and an int4 upload after an int8 one is read as int4).
 *  - a CUDA graph of int4 GEMMs (GEMV and tiles) replays on new inputs bit for bit as the ops.
 *  - kernel_name: the int4 GEMV / tile path for the layers' GEMMs, the int8 one for logits. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/backend.h"
#include "kernels/common/tp_quant.h"
#include "kernels/common/tp_quant4.h"
#include "kernels/dtype.h"
#include "tests/gpu/gpu_test.h"

/* One int4 matrix in canonical form, host memory. */
typedef struct {
    int N, K, G;
    uint8_t *q, *zero;
    float *scale;
} q4mat;

static void q4_free_host(q4mat *m) {
    free(m->q);
    free(m->zero);
    free(m->scale);
}

static q4mat q4_alloc_host(int N, int K, int G) {
    q4mat m = {N, K, G, malloc((size_t)N * K), malloc((size_t)N * (K / G)), malloc((size_t)N * (K / G) * 4)};
    if (!m.q || !m.zero || !m.scale) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    return m;
}

/* w [N, K] quantized by groups as --weights int4 does. */
static q4mat q4_quantize(const float *w, int N, int K, int G) {
    q4mat m = q4_alloc_host(N, K, G);
    for (int n = 0; n < N; n++)
        for (int g = 0; g < K / G; g++) {
            const size_t o = (size_t)n * K + (size_t)g * G, og = (size_t)n * (K / G) + g;
            tp_q4_quantize_group(w + o, G, m.q + o, &m.scale[og], &m.zero[og]);
        }
    return m;
}

/* The weight (n, k) stands for: (q - zero) * scale, in double (exact). */
static double q4_w(const q4mat *m, int n, int k) {
    const size_t og = (size_t)n * (m->K / m->G) + k / m->G;
    return ((double)m->q[(size_t)n * m->K + k] - m->zero[og]) * (double)m->scale[og];
}

static void *q4_to_gpu(const q4mat *m) {
    void *d = g_gpu->alloc(g_gpu, g_gpu->matrix_bytes_q4(g_gpu, m->N, m->K, m->G), "W int4");
    const tp_q4_host h = {m->q, m->scale, m->zero, m->G};
    g_gpu->matrix_upload_q4(g_gpu, d, &h, m->N, m->K);
    return d;
}

static float round_act(float v) {
    uint32_t h; /* room for any dtype: act is F16 or BF16 */
    tp_convert_from_f32(&h, g_gpu->act, &v, 1);
    tp_convert_to_f32(&v, &h, g_gpu->act, 1);
    return v;
}

static float *randn(size_t n, float scale, int act) {
    float *x = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = act ? round_act(scale * rnd_n()) : scale * rnd_n();
    return x;
}

/* src [n] f32 -> act on the device, converted on the host (upload's conversion kernel would be
 * most of this test's time on the emulated device) */
static void *gpu_put_as(const float *src, size_t n, tp_dtype dt) {
    void *d = g_gpu->alloc(g_gpu, (n ? n : 1) * tp_dtype_size(dt), "test buffer");
    void *h = malloc((n ? n : 1) * tp_dtype_size(dt));
    tp_convert_from_f32(h, dt, src, n);
    g_gpu->to_device(g_gpu, d, h, n * tp_dtype_size(dt));
    free(h);
    return d;
}
static void *gpu_put(const float *src, size_t n) { return gpu_put_as(src, n, g_gpu->act); }

static float *gpu_get(const void *d, size_t n, tp_dtype dt) { /* to f32 on the host */
    float *h = malloc((n ? n : 1) * sizeof(float));
    uint16_t *t = malloc((n ? n : 1) * 4);
    g_gpu->to_host(g_gpu, t, d, n * tp_dtype_size(dt));
    tp_convert_to_f32(h, t, dt, n);
    free(t);
    return h;
}

static void fail(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(const char *what, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL %s (%s): ", what, tp_dtype_name(g_gpu->act));
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    g_fail++;
}

static double unit_roundoff(tp_dtype dt) { return dt == TP_F16 ? ldexp(1, -11) : dt == TP_BF16 ? ldexp(1, -8) : ldexp(1, -24); }

/* ---- the layout: weights as the backend's GEMM reads them ---- */

/* y[j, n] = matmul_f32out of nc one-hot rows x_j = e_{cols[j]} in batches of T rows. */
static float *read_by_gemm(const void *W, int N, int K, const int *cols, int nc, int T) {
    float *y = malloc((size_t)nc * N * sizeof(float));
    float *x = calloc((size_t)T * K, sizeof(float));
    void *yg = g_gpu->alloc(g_gpu, (size_t)T * N * sizeof(float), "y gpu");
    for (int j0 = 0; j0 < nc; j0 += T) {
        const int t = nc - j0 < T ? nc - j0 : T;
        memset(x, 0, (size_t)T * K * sizeof(float));
        for (int j = 0; j < t; j++) x[(size_t)j * K + cols[j0 + j]] = 1.0f;
        void *xg = gpu_put(x, (size_t)t * K);
        g_gpu->matmul_f32out(g_gpu, yg, xg, W, NULL, t, N, K);
        g_gpu->sync(g_gpu);
        g_gpu->to_host(g_gpu, y + (size_t)j0 * N, yg, (size_t)t * N * sizeof(float));
        g_gpu->free(g_gpu, xg);
    }
    g_gpu->free(g_gpu, yg);
    free(x);
    return y;
}

/* Columns read back. Through the tiles (one product): every one up to 256, else 256 spread from
 * the first to the last. Through the GEMV (a product per 4): the first 32 (every nibble of the
 * 16 bytes a lane reads), one in each group at another offset, and the last. */
static int some_cols(int K, int G, int gemv, int *cols) {
    if (gemv) {
        int nc = 0;
        for (int k = 0; k < 32; k++) cols[nc++] = k;
        for (int g = 1; g < K / G; g++) cols[nc++] = g * G + (g * 13) % G;
        cols[nc++] = K - 1;
        return nc;
    }
    const int nc = K <= 256 ? K : 256;
    for (int j = 0; j < nc; j++) cols[j] = nc == K ? j : (int)((int64_t)j * (K - 1) / (nc - 1));
    return nc;
}

static void check_layout(const char *what, const q4mat *m, const void *W) {
    int *cols = malloc((size_t)(m->K + 64) * sizeof(int));
    for (int path = 0; path < 2; path++) { /* 0: GEMV (T = 4), 1: tiles (T = nc > 4) */
        const int nc = some_cols(m->K, m->G, !path, cols), T = path ? nc : 4;
        float *y = read_by_gemm(W, m->N, m->K, cols, nc, T);
        long bad = 0;
        for (int n = 0; n < m->N; n++)
            for (int j = 0; j < nc; j++) {
                const int k = cols[j];
                const size_t og = (size_t)n * (m->K / m->G) + k / m->G;
                float e = tp_q4_dequant(m->q[(size_t)n * m->K + k], m->zero[og], m->scale[og]);
                if (path) e = round_act(e);
                const float g = y[(size_t)j * m->N + n];
                if (!(g == e) && !bad++)
                    fprintf(stderr, "  w~[%d, %d] = %.9g, expected %.9g (q %d zero %d scale %.9g)\n", n, k, g, e,
                            m->q[(size_t)n * m->K + k], m->zero[og], m->scale[og]);
            }
        g_checks++;
        if (bad)
            fail(what, "[%d, %d] group %d, %s: %ld of %d x %d weights differ from tp_quant4.h's", m->N, m->K, m->G,
                 path ? "tiles" : "GEMV", bad, m->N, nc);
        free(y);
    }
    free(cols);
}

static void test_layout(int N, int K, int G) {
    q4mat m = q4_alloc_host(N, K, G);
    for (size_t i = 0; i < (size_t)N * K; i++) m.q[i] = (uint8_t)rnd_int(16);
    for (size_t i = 0; i < (size_t)N * (K / G); i++) {
        m.zero[i] = (uint8_t)rnd_int(16);
        m.scale[i] = (float)(0.01 * (0.5 + rnd_u()));
    }
    m.scale[(size_t)(N / 2) * (K / G)] = 0.0f; /* a group of zeros: its weights read as 0 */
    void *W = q4_to_gpu(&m);
    check_layout("matrix_upload_q4", &m, W);
    /* fill_random_q4: the host's draws, quantized by the host's function */
    g_gpu->matrix_fill_random_q4(g_gpu, W, N, K, G, 11, 0.0f, 0.02f);
    float *w = malloc((size_t)N * K * sizeof(float));
    const uint64_t key = tp_rng_key(11);
    for (int n = 0; n < N; n++) tp_q8_random_row(w + (size_t)n * K, key, n, K, 0.0f, 0.02f);
    q4mat r = q4_quantize(w, N, K, G);
    check_layout("matrix_fill_random_q4", &r, W);
    g_gpu->free(g_gpu, W);
    q4_free_host(&m);
    q4_free_host(&r);
    free(w);
}

/* ---- the GEMMs against the double reference ---- */

/* got [T, N] (f32 from the device) against the reference; S: the terms' magnitudes per output. */
static void compare(const char *what, const double *ref, const double *S, const float *got, size_t n, double tol,
                    double u_out, double u_w, int K) {
    double num = 0, den = 0;
    long nonfinite = 0, outside = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) {
            nonfinite++;
            continue;
        }
        const double d = (double)got[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
        const double bound = 2 * u_out * fabs(ref[i]) + 2 * (u_w + (K + 64) * ldexp(1, -24)) * S[i];
        if (!(fabs(d) <= bound) && !outside++)
            fprintf(stderr, "  %s: element %zu = %.9g, reference %.9g, bound %.3g\n", what, i, got[i], ref[i], bound);
    }
    const double nmse = den > 0 ? num / den : num;
    g_checks++;
    if (nonfinite || outside || !(nmse <= tol))
        fail(what, "NMSE %.3g (bound %.3g), %ld non-finite, %ld outside the element bound", nmse, tol, nonfinite,
             outside);
}

/* kind: 0 matmul, 1 matmul + bias + accumulate, 2 matmul_gelu + bias, 3 matmul_f32out + bias */
static const char *kind_name(int kind) {
    return kind == 0 ? "matmul" : kind == 1 ? "matmul+bias+acc" : kind == 2 ? "matmul_gelu+bias" : "matmul_f32out+bias";
}

/* Runs one GEMM of kind on the device (W: int4 or int8 buffer) and returns y as f32. */
static float *run_gemm(const void *W, const float *x, const float *bias, const float *y0, int T, int N, int K,
                       int kind) {
    const tp_dtype odt = kind == 3 ? TP_F32 : g_gpu->act;
    void *xg = gpu_put(x, (size_t)T * K), *bg = gpu_put(bias, N);
    void *yg;
    if (kind == 1) yg = gpu_put(y0, (size_t)T * N);
    else {
        yg = g_gpu->alloc(g_gpu, (size_t)T * N * 4 + 4, "y gpu");
        unsigned char *nan = malloc((size_t)T * N * 4 + 4);
        memset(nan, 0xff, (size_t)T * N * 4 + 4); /* NaN in every dtype */
        g_gpu->to_device(g_gpu, yg, nan, (size_t)T * N * tp_dtype_size(odt));
        free(nan);
    }
    switch (kind) {
    case 0: g_gpu->matmul(g_gpu, yg, xg, W, NULL, T, N, K, 0); break;
    case 1: g_gpu->matmul(g_gpu, yg, xg, W, bg, T, N, K, 1); break;
    case 2: g_gpu->matmul_gelu(g_gpu, yg, xg, W, bg, T, N, K); break;
    default: g_gpu->matmul_f32out(g_gpu, yg, xg, W, bg, T, N, K);
    }
    g_gpu->sync(g_gpu);
    float *got = gpu_get(yg, (size_t)T * N, odt);
    g_gpu->free(g_gpu, xg);
    g_gpu->free(g_gpu, bg);
    g_gpu->free(g_gpu, yg);
    return got;
}

static double gelu_new(double v) { return 0.5 * v * (1 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); }

/* The reference of one GEMM of kind with weights w(n, k), and the bound's S. */
static void reference(double (*w)(const void *, int, int), const void *wm, const float *x, const float *bias,
                      const float *y0, int T, int N, int K, int kind, double *ref, double *S) {
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++) {
            double v = 0, s = 0;
            for (int k = 0; k < K; k++) {
                const double p = w(wm, n, k) * x[(size_t)t * K + k];
                v += p;
                s += fabs(p);
            }
            if (kind == 1) v += y0[(size_t)t * N + n], s += fabs(y0[(size_t)t * N + n]);
            if (kind >= 1) v += bias[n], s += fabs(bias[n]);
            if (kind == 2) v = gelu_new(v); /* |gelu'| <= 1.13: the bound's factor 2 covers it */
            ref[(size_t)t * N + n] = v;
            S[(size_t)t * N + n] = s;
        }
}

static double q4_w_fn(const void *m, int n, int k) { return q4_w((const q4mat *)m, n, k); }

static void check_gemm(const char *what, double (*w)(const void *, int, int), const void *wm, const void *W, int T,
                       int N, int K, int kind, double u_w) {
    float *x = randn((size_t)T * K, 1.0f, 1), *bias = randn(N, 0.1f, 1), *y0 = randn((size_t)T * N, 1.0f, 1);
    float *got = run_gemm(W, x, bias, y0, T, N, K, kind);
    double *ref = malloc((size_t)T * N * sizeof(double)), *S = malloc((size_t)T * N * sizeof(double));
    reference(w, wm, x, bias, y0, T, N, K, kind, ref, S);
    const int f32 = kind == 3;
    const double tol = f32 && u_w == 0 ? TOL_F32 : tol_act(g_gpu->act);
    char name[160];
    snprintf(name, sizeof name, "%s %s T=%d N=%d K=%d", what, kind_name(kind), T, N, K);
    compare(name, ref, S, got, (size_t)T * N, tol, unit_roundoff(f32 ? TP_F32 : g_gpu->act), u_w, K);
    free(x); free(bias); free(y0); free(got); free(ref); free(S);
}

/* The path the backend takes for T tokens with aligned operands: 0 GEMV, else the act's roundoff. */
static double path_u(int T) { return T <= 4 ? 0.0 : unit_roundoff(g_gpu->act); }

static void test_gemm(int T, int N, int K, int G, int kind) {
    float *wf = randn((size_t)N * K, 0.05f, 0);
    for (int k = 0; k < G; k++) wf[k] = 0.0f; /* row 0's first group: all zeros (scale 0) */
    q4mat m = q4_quantize(wf, N, K, G);
    void *W = q4_to_gpu(&m);
    char what[48];
    snprintf(what, sizeof what, "int4 G=%d", G);
    check_gemm(what, q4_w_fn, &m, W, T, N, K, kind, path_u(T));
    g_gpu->free(g_gpu, W);
    q4_free_host(&m);
    free(wf);
}

/* ---- int8 matrices beside the int4 ones ---- */

typedef struct {
    int K;
    const int8_t *q;
    const float *scale;
} q8mat;
static double q8_w_fn(const void *p, int n, int k) {
    const q8mat *m = p;
    return (double)m->q[(size_t)n * m->K + k] * m->scale[n];
}

/* w [N, K] as int8 the way tp_quant.h quantizes it (row absmax, or mx[n]). */
static void q8_quantize(const float *w, const float *mx, int N, int K, int8_t *q, float *scale) {
    for (int n = 0; n < N; n++) {
        scale[n] = tp_q8_scale(mx ? mx[n] : tp_q8_absmax(w + (size_t)n * K, K));
        for (int k = 0; k < K; k++) q[(size_t)n * K + k] = tp_q8_quantize(w[(size_t)n * K + k], scale[n]);
    }
}

static void test_int8(int N, int K) {
    float *w = randn((size_t)N * K, 0.05f, 0), *mx = malloc((size_t)N * sizeof(float));
    for (int n = 0; n < N; n++) mx[n] = 0.3f + 0.001f * n;
    int8_t *q = malloc((size_t)N * K);
    float *scale = malloc((size_t)N * sizeof(float));
    const q8mat m = {K, q, scale};
    /* one buffer big enough for either kind: int4 first, then int8 at the same address */
    const size_t b8 = g_gpu->matrix_bytes(g_gpu, N, K), b4 = g_gpu->matrix_bytes_q4(g_gpu, N, K, 32);
    void *W = g_gpu->alloc(g_gpu, b8 > b4 ? b8 : b4, "W");
    q4mat m4 = q4_quantize(w, N, K, 32);
    const tp_q4_host h = {m4.q, m4.scale, m4.zero, 32};
    g_gpu->matrix_upload_q4(g_gpu, W, &h, N, K);
    g_gpu->matrix_upload(g_gpu, W, w, TP_F32, N, K);
    q8_quantize(w, NULL, N, K, q, scale);
    static const int Ts[] = {1, 3, 17};
    for (int i = 0; i < 3; i++) {
        check_gemm("int8 matrix_upload after int4", q8_w_fn, &m, W, Ts[i], N, K, 3, 0.0);
        check_gemm("int8 matrix_upload after int4", q8_w_fn, &m, W, Ts[i], N, K, 1, 0.0);
    }
    g_gpu->matrix_upload_rowmax(g_gpu, W, w, TP_F32, N, K, mx);
    q8_quantize(w, mx, N, K, q, scale);
    check_gemm("int8 matrix_upload_rowmax", q8_w_fn, &m, W, 3, N, K, 3, 0.0);
    g_gpu->matrix_fill_random(g_gpu, W, N, K, 5, 0.0f, 0.02f);
    const uint64_t key = tp_rng_key(5);
    for (int n = 0; n < N; n++) tp_q8_random_row(w + (size_t)n * K, key, n, K, 0.0f, 0.02f);
    q8_quantize(w, NULL, N, K, q, scale);
    check_gemm("int8 matrix_fill_random", q8_w_fn, &m, W, 17, N, K, 0, 0.0);
    /* and int4 again at that address: read as int4 */
    g_gpu->matrix_upload_q4(g_gpu, W, &h, N, K);
    check_gemm("int4 after int8", q4_w_fn, &m4, W, 3, N, K, 3, 0.0);
    g_gpu->free(g_gpu, W);
    q4_free_host(&m4);
    free(w); free(mx); free(q); free(scale);
}

/* ---- the chunked tile path: row and column tiles, token chunks of the planned rows ---- */
static void test_chunks(void) {
    const tp_step_limits lim = {.max_tokens = 32, .max_seqs = 1, .max_ctx = 16, .max_rows = 1, .max_k = 1,
                                .n_heads = 1, .head_dim = 8};
    g_gpu->reserve_scratch(g_gpu, &lim);
    static const int shapes[][3] = {{2080, 96, 32}, {40, 4160, 64}};
    for (int s = 0; s < 2; s++)
        for (int kind = 0; kind < 4; kind++) {
            test_gemm(70, shapes[s][0], shapes[s][1], shapes[s][2], kind);
            if (kind == 1) test_gemm(2, shapes[s][0], shapes[s][1], shapes[s][2], kind);
        }
}

/* Captured in a CUDA graph (the engine's decode steps, T <= 32): matmul_gelu at T = 2 (GEMV) and
 * 9 (tiles + cuBLAS) recorded, replayed on new x, bit for bit the ops run one by one. Runs after
 * reserve_scratch (graphs must come after it). */
static void test_graph(void) {
    const int N = 130, K = 256, G = 64;
    float *wf = randn((size_t)N * K, 0.05f, 0);
    q4mat m = q4_quantize(wf, N, K, G);
    void *W = q4_to_gpu(&m);
    for (int T = 2; T <= 9; T += 7) {
        float *x = randn((size_t)T * K, 1.0f, 1), *bias = randn(N, 0.1f, 1);
        void *xg = gpu_put(x, (size_t)T * K), *bg = gpu_put(bias, N);
        const size_t yb = (size_t)T * N * tp_dtype_size(g_gpu->act);
        void *yg = g_gpu->alloc(g_gpu, yb, "y graph"), *yd = g_gpu->alloc(g_gpu, yb, "y direct");
        g_gpu->graph_begin(g_gpu, T);
        g_gpu->matmul_gelu(g_gpu, yg, xg, W, bg, T, N, K);
        g_gpu->graph_end(g_gpu, T);
        free(x);
        x = randn((size_t)T * K, 1.0f, 1); /* new x at the same address, then the replay */
        void *h = malloc(yb * 2 + (size_t)T * K * 4);
        tp_convert_from_f32(h, g_gpu->act, x, (size_t)T * K);
        g_gpu->to_device(g_gpu, xg, h, (size_t)T * K * tp_dtype_size(g_gpu->act));
        g_checks++;
        if (!g_gpu->graph_launch(g_gpu, T)) fail("graph", "graph_launch(%d) found no graph", T);
        g_gpu->matmul_gelu(g_gpu, yd, xg, W, bg, T, N, K);
        g_gpu->sync(g_gpu);
        uint8_t *a = h, *d = a + yb;
        g_gpu->to_host(g_gpu, a, yg, yb);
        g_gpu->to_host(g_gpu, d, yd, yb);
        g_checks++;
        if (memcmp(a, d, yb) != 0) fail("graph", "matmul_gelu T=%d replayed differs from the op run directly", T);
        g_gpu->free(g_gpu, xg); g_gpu->free(g_gpu, bg); g_gpu->free(g_gpu, yg); g_gpu->free(g_gpu, yd);
        free(x); free(bias); free(h);
    }
    g_gpu->free(g_gpu, W);
    q4_free_host(&m);
    free(wf);
}

static void test_kernel_names(void) {
    const int f16 = g_gpu->act == TP_F16;
    const char *want[3] = {f16 ? "gemv-int4-f16" : "gemv-int4-bf16",
                           f16 ? "dequant-cublas-int4-f16" : "dequant-cublas-int4-bf16",
                           f16 ? "gemv-int8-f16" : "gemv-int8-bf16"};
    const char *got[3] = {g_gpu->kernel_name(g_gpu, TP_OP_MATMUL, 1, 0), g_gpu->kernel_name(g_gpu, TP_OP_MATMUL, 64, 0),
                          g_gpu->kernel_name(g_gpu, TP_OP_LOGITS, 1, 0)};
    for (int i = 0; i < 3; i++) {
        g_checks++;
        if (strcmp(got[i], want[i]) != 0) fail("kernel_name", "%s, expected %s", got[i], want[i]);
    }
}

/* One bad matrix (mode): the backend dies naming it; returning is a failure. */
static int bad_input(const char *mode) {
    char err[512];
    g_gpu = tp_backend_cuda_create(0, TP_F16, err, sizeof err);
    if (!g_gpu || tp_backend_use_int4(g_gpu, 0, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (strcmp(mode, "bad-group") == 0) g_gpu->matrix_bytes_q4(g_gpu, 8, 96, 48);
    else if (strcmp(mode, "bad-cols") == 0) g_gpu->matrix_bytes_q4(g_gpu, 8, 96, 64);
    else {
        q4mat m = q4_alloc_host(8, 64, 32);
        memset(m.q, 3, 8 * 64);
        memset(m.zero, 8, 8 * 2);
        for (int i = 0; i < 16; i++) m.scale[i] = 0.01f;
        if (strcmp(mode, "bad-q") == 0) m.q[5 * 64 + 33] = 16;
        else m.zero[3 * 2 + 1] = 200;
        q4_to_gpu(&m);
    }
    fprintf(stderr, "FAIL: %s: the backend accepted it\n", mode);
    return 1;
}

int main(int argc, char **argv) {
    (void)g_cpu; /* gpu_test.h's; the reference here is computed on the host */
    if (gpu_test_module_loads()) return 1;
    if (tp_backend_cuda_device_count() <= 0) {
        printf("SKIPPED: no CUDA GPU\n");
        return 77;
    }
    const char *mode = argc > 2 ? argv[2] : "";
    if (strncmp(mode, "bad-", 4) == 0) return bad_input(mode);
    const uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 10) : (uint64_t)time(NULL);
    const int quick = strcmp(mode, "quick") == 0;
    if (argc > 3 || (argc > 2 && !quick)) {
        fprintf(stderr, "usage: test_cuda_int4 [SEED [quick|bad-group|bad-cols|bad-q|bad-zero]]\n");
        return 2;
    }
    printf("test_cuda_int4 seed %llu%s\n", (unsigned long long)seed, quick ? " (quick: the smaller shapes)" : "");
    const tp_dtype dts[2] = {TP_F16, TP_BF16};
    for (int d = 0; d < 2; d++) {
        char err[512];
        g_rng = seed * 2 + 1 + (uint64_t)d;
        g_gpu = tp_backend_cuda_create(0, dts[d], err, sizeof err);
        if (!g_gpu) { fprintf(stderr, "%s\n", err); return 1; }
        if (tp_backend_use_int4(g_gpu, 1, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
        test_kernel_names();
        test_layout(45, 96, 32);
        test_layout(40, 512, 128);
        static const int Ts[] = {1, 3, 4, 5, 17, 64, 256};
        static const int NKGs[][3] = {{45, 64, 32}, {130, 256, 64}, {67, 384, 128}, {33, 128, 128}, {300, 1024, 64},
                                      {1024, 4096, 128}};
        /* quick: T up to 64, N and K up to 384 */
        const size_t nT = sizeof Ts / sizeof *Ts - (quick ? 1 : 0), nS = sizeof NKGs / sizeof *NKGs - (quick ? 2 : 0);
        for (size_t i = 0; i < nT; i++)
            for (size_t j = 0; j < nS; j++)
                for (int kind = 0; kind < 4; kind++) test_gemm(Ts[i], NKGs[j][0], NKGs[j][1], NKGs[j][2], kind);
        test_int8(67, 96);
        test_chunks();
        test_graph();
        g_gpu->destroy(g_gpu);
    }
    printf("test_cuda_int4: %d checks, %d failed\n", g_checks, g_fail);
    return g_fail ? 1 : 0;
}
