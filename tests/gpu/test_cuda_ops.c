/* Every op of the CUDA backend against the CPU backend (the f32 reference), for F16 and BF16.
 *
 * usage: test_cuda_ops [SEED]      (default: a fresh seed, printed so a failure can be rerun)
 *        test_cuda_ops SEED gemms  (the GEMMs of run_gemms only: the emulated device runs them
 *                                  with cuBLASLt finding no algorithm, the module's fallback)
 *        test_cuda_ops --oom       (alloc far more than the device has: must die with the sizes)
 * Exits 77 (ctest SKIPPED) when no CUDA GPU is visible.
 *
 * Each case draws fresh random inputs, rounds them to the GPU's dtype (so both backends see the
 * same numbers), runs the op on both, and compares the GPU result with the normalised mean
 * square error NMSE = sum (gpu - cpu)^2 / sum cpu^2 against a bound set per dtype (see
 * tol_act). Output buffers are poisoned with NaN bytes before the GPU runs, and every output is
 * checked for NaN/inf, so an element the GPU never wrote cannot pass. Shapes cover the GEMV and
 * cuBLAS paths, vector and scalar element paths, paged KV caches with scattered block tables,
 * decode with split contexts up to 2048, prefill tiles, mixed prefill + decode steps, grouped-query
 * heads and both rotary styles (CodeGen's GPT-J pairs, LLaMA's rotate-half), LLaMA's rmsnorm and
 * silu_mul, and CUDA-graph capture and replay. Where the CPU backend lacks an op (rmsnorm and
 * silu_mul are NULL until its LLaMA ops land; it has no grouped-query attention), the reference is
 * HF's formula in double, or the CPU's multi-head attention on widened heads (cpu_attention_ref). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/backend.h"
#include "kernels/common/tp_kv.h"
#include "kernels/dtype.h"
#include "tests/gpu/gpu_test.h"


static float *randn_act(size_t n, float scale) { /* N(0, scale^2), rounded to the GPU dtype */
    float *x = malloc((n ? n : 1) * sizeof(float));
    uint16_t *t = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = scale * rnd_n();
    tp_convert_from_f32(t, g_gpu->act, x, n);
    tp_convert_to_f32(x, t, g_gpu->act, n);
    free(t);
    return x;
}

/* ---- buffers on a backend ---- */
static size_t es(tp_backend *b) { return tp_dtype_size(b->act); }
static void *dev_from(tp_backend *b, const float *h, size_t n) {
    void *d = b->alloc(b, n * es(b) + 16, "test buffer");
    b->upload(b, d, h, TP_F32, n);
    return d;
}
static void dev_to(tp_backend *b, float *h, const void *d, size_t n) {
    void *t = malloc(n * sizeof(float) + 1); /* room for any dtype (keeps -Warray-bounds quiet) */
    b->to_host(b, t, d, n * es(b));
    tp_convert_to_f32(h, t, b->act, n);
    free(t);
}
static void *dev_raw(tp_backend *b, const void *h, size_t bytes) {
    void *d = b->alloc(b, bytes + 16, "test buffer");
    if (bytes) b->to_device(b, d, h, bytes);
    return d;
}
static void poison(tp_backend *b, void *d, size_t bytes) { /* 0xFF bytes: NaN in F32, F16 and BF16 */
    void *t = malloc(bytes + 1);
    memset(t, 0xff, bytes);
    b->to_device(b, d, t, bytes);
    free(t);
}

/* ---- checks ---- */
/* NMSE of got against ref. Differences within half the act dtype's subnormal spacing count as 0:
 * a reference value in F16's subnormal range (|x| < 6.1e-5) has ~1e-2 relative resolution, and a
 * correctly rounded one-element case there (gelu_new of a tiny x) alone was 1e-4 "NMSE" (seed
 * 1796432601 of cuda_emu). */
static void check_nmse(const char *what, const float *got, const float *ref, size_t n, double tol) {
    size_t bad = 0, first_bad = 0;
    double num = 0, den = 0, worst = 0;
    const double floor_d = g_gpu->act == TP_F16 ? 0x1p-25 : 0x1p-134; /* F16 / BF16 subnormal step / 2 */
    size_t worst_i = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i]) || !isfinite(ref[i])) {
            if (!bad) first_bad = i;
            bad++;
            continue;
        }
        double d = (double)got[i] - ref[i];
        const double dq = fabs(d) > floor_d ? fabs(d) - floor_d : 0.0;
        num += dq * dq;
        den += (double)ref[i] * ref[i];
        if (fabs(d) > worst) { worst = fabs(d); worst_i = i; }
    }
    double nmse = den > 0 ? num / den : num;
    int ok = bad == 0 && nmse <= tol;
    g_checks++;
    if (!ok) g_fail++;
    printf("%-5s %-58s nmse %.2e (<= %.0e) max|d| %.2e %s\n", tp_dtype_name(g_gpu->act), what, nmse, tol, worst,
           ok ? "ok" : "FAIL");
    if (bad)
        printf("      %zu non-finite values, first at %zu: gpu %g cpu %g\n", bad, first_bad, got[first_bad],
               ref[first_bad]);
    else if (!ok)
        printf("      worst at %zu: gpu %.6g cpu %.6g\n", worst_i, got[worst_i], ref[worst_i]);
}

static void check_true(const char *what, int ok, const char *detail) {
    g_checks++;
    if (!ok) g_fail++;
    printf("%-5s %-58s %s%s%s\n", tp_dtype_name(g_gpu->act), what, ok ? "ok" : "FAIL", ok ? "" : ": ",
           ok ? "" : detail);
}

/* ---- element-wise ops ---- */
static void test_embed(int T, int E, int V) {
    float *wte = randn_act((size_t)V * E, 1.0f);
    int32_t *ids = malloc(T * sizeof(int32_t));
    for (int t = 0; t < T; t++) ids[t] = rnd_int(V);
    float *ref = malloc((size_t)T * E * sizeof(float)), *got = malloc((size_t)T * E * sizeof(float));
    tp_backend *bs[2] = {g_cpu, g_gpu};
    for (int k = 0; k < 2; k++) {
        tp_backend *b = bs[k];
        void *w = dev_from(b, wte, (size_t)V * E), *x = b->alloc(b, (size_t)T * E * es(b), "x");
        int32_t *di = dev_raw(b, ids, T * sizeof(int32_t));
        poison(b, x, (size_t)T * E * es(b));
        b->embed(b, x, w, di, T, E);
        dev_to(b, k ? got : ref, x, (size_t)T * E);
        b->free(b, w); b->free(b, x); b->free(b, di);
    }
    char what[96];
    snprintf(what, sizeof what, "embed T=%d E=%d V=%d (exact)", T, E, V);
    check_nmse(what, got, ref, (size_t)T * E, 0.0);
    free(wte); free(ids); free(ref); free(got);
}

static void test_layernorm(int T, int E, int in_place) {
    float *x = randn_act((size_t)T * E, 2.0f), *g = randn_act(E, 1.0f), *be = randn_act(E, 0.5f);
    for (size_t i = 0; i < (size_t)T * E; i++) x[i] += 3.0f; /* a mean to remove */
    float *ref = malloc((size_t)T * E * sizeof(float)), *got = malloc((size_t)T * E * sizeof(float));
    tp_backend *bs[2] = {g_cpu, g_gpu};
    for (int k = 0; k < 2; k++) {
        tp_backend *b = bs[k];
        void *dx = dev_from(b, x, (size_t)T * E), *dg = dev_from(b, g, E), *db = dev_from(b, be, E);
        void *dy = in_place ? dx : b->alloc(b, (size_t)T * E * es(b), "y");
        if (!in_place) poison(b, dy, (size_t)T * E * es(b));
        b->layernorm(b, dy, dx, dg, db, T, E, 1e-5f);
        dev_to(b, k ? got : ref, dy, (size_t)T * E);
        b->free(b, dx); b->free(b, dg); b->free(b, db);
        if (!in_place) b->free(b, dy);
    }
    char what[96];
    snprintf(what, sizeof what, "layernorm T=%d E=%d%s", T, E, in_place ? " in place" : "");
    check_nmse(what, got, ref, (size_t)T * E, tol_act(g_gpu->act));
    free(x); free(g); free(be); free(ref); free(got);
}

/* RMSNorm (LLaMA), offset elements into the buffers (an offset that breaks 16-byte alignment takes
 * the scalar path); x of size ~scale (at 1e-3, mean(x^2) ~ eps: a wrong eps shows). The reference
 * is the CPU backend's rmsnorm, or, where the CPU backend has none (it is NULL there), HF's
 * formula in double written here: y = x / sqrt(mean(x^2) + eps) * g. */
static void test_rmsnorm(int T, int E, int in_place, size_t offset, float scale) {
    const size_t n = (size_t)T * E + offset;
    float *x = randn_act(n, 2.0f * scale), *g = randn_act(E + offset, 1.0f);
    for (size_t i = 0; i < n; i++) x[i] += 0.5f * scale; /* a mean RMSNorm keeps (unlike layernorm) */
    float *ref = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    const float eps = 1e-6f;
    tp_backend *bs[2] = {g_cpu, g_gpu};
    for (int k = 0; k < 2; k++) {
        tp_backend *b = bs[k];
        if (!k && !b->rmsnorm) {
            for (int t = 0; t < T; t++) {
                const float *xr = x + offset + (size_t)t * E;
                double ss = 0;
                for (int i = 0; i < E; i++) ss += (double)xr[i] * xr[i];
                const double inv = 1.0 / sqrt(ss / E + (double)eps);
                for (int i = 0; i < E; i++) ref[offset + (size_t)t * E + i] = (float)(xr[i] * inv * g[offset + i]);
            }
            continue;
        }
        void *dx = dev_from(b, x, n), *dg = dev_from(b, g, E + offset);
        void *dy = in_place ? dx : b->alloc(b, n * es(b) + 16, "y");
        if (!in_place) poison(b, dy, n * es(b));
        b->rmsnorm(b, (char *)dy + offset * es(b), (char *)dx + offset * es(b), (char *)dg + offset * es(b), T, E,
                   eps);
        dev_to(b, k ? got : ref, dy, n);
        b->free(b, dx); b->free(b, dg);
        if (!in_place) b->free(b, dy);
    }
    char what[96];
    snprintf(what, sizeof what, "rmsnorm T=%d E=%d%s offset=%zu x~%g%s", T, E, in_place ? " in place" : "", offset,
             scale, g_cpu->rmsnorm ? "" : " (vs double)");
    check_nmse(what, got + offset, ref + offset, n - offset, tol_act(g_gpu->act));
    free(x); free(g); free(ref); free(got);
}

/* silu_mul (LLaMA's gated MLP): gu [T, 2N] = gate then up per row, y [T, N]; offset elements into
 * both buffers (scalar path when it breaks alignment, as N % 8 != 0 does). The reference is the CPU
 * backend's silu_mul, or where it has none, silu(g) u = g u / (1 + exp(-g)) in double written here. */
static void test_silu_mul(int T, int N, size_t offset) {
    const size_t ngu = (size_t)T * 2 * N + offset, ny = (size_t)T * N + offset;
    float *gu = randn_act(ngu, 3.0f);
    float *ref = malloc(ny * sizeof(float)), *got = malloc(ny * sizeof(float));
    tp_backend *bs[2] = {g_cpu, g_gpu};
    for (int k = 0; k < 2; k++) {
        tp_backend *b = bs[k];
        if (!k && !b->silu_mul) {
            for (int t = 0; t < T; t++)
                for (int i = 0; i < N; i++) {
                    const double gt = gu[offset + (size_t)t * 2 * N + i], up = gu[offset + (size_t)t * 2 * N + N + i];
                    ref[offset + (size_t)t * N + i] = (float)(gt * up / (1.0 + exp(-gt)));
                }
            continue;
        }
        void *dgu = dev_from(b, gu, ngu), *dy = b->alloc(b, ny * es(b) + 16, "y");
        poison(b, dy, ny * es(b));
        b->silu_mul(b, (char *)dy + offset * es(b), (char *)dgu + offset * es(b), T, N);
        dev_to(b, k ? got : ref, dy, ny);
        b->free(b, dgu); b->free(b, dy);
    }
    char what[96];
    snprintf(what, sizeof what, "silu_mul T=%d N=%d offset=%zu%s", T, N, offset, g_cpu->silu_mul ? "" : " (vs double)");
    check_nmse(what, got + offset, ref + offset, ny - offset, tol_act(g_gpu->act));
    free(gu); free(ref); free(got);
}

static void test_gelu_add(size_t n, size_t offset) {
    float *x = randn_act(n + offset, 3.0f), *y = randn_act(n + offset, 1.0f);
    float *ref = malloc((n + offset) * sizeof(float)), *got = malloc((n + offset) * sizeof(float));
    float *ref2 = malloc((n + offset) * sizeof(float)), *got2 = malloc((n + offset) * sizeof(float));
    tp_backend *bs[2] = {g_cpu, g_gpu};
    for (int k = 0; k < 2; k++) { /* offset elements in: unaligned pointers take the scalar paths */
        tp_backend *b = bs[k];
        void *dx = dev_from(b, x, n + offset), *dy = dev_from(b, y, n + offset);
        b->gelu_new(b, (char *)dx + offset * es(b), n);
        dev_to(b, k ? got : ref, dx, n + offset);
        b->add(b, (char *)dy + offset * es(b), (char *)dx + offset * es(b), n);
        dev_to(b, k ? got2 : ref2, dy, n + offset);
        b->free(b, dx); b->free(b, dy);
    }
    char what[96];
    snprintf(what, sizeof what, "gelu_new n=%zu offset=%zu", n, offset);
    check_nmse(what, got, ref, n + offset, tol_act(g_gpu->act));
    snprintf(what, sizeof what, "add n=%zu offset=%zu", n, offset);
    check_nmse(what, got2, ref2, n + offset, tol_act(g_gpu->act));
    free(x); free(y); free(ref); free(got); free(ref2); free(got2);
}

static void test_gather_rows(int n_src, int n, int E, int in_place) {
    float *src = randn_act((size_t)n_src * E, 1.0f);
    int32_t *rows = malloc(n * sizeof(int32_t));
    for (int i = 0; i < n; i++) /* in place: rows[i] >= i, increasing (the engine's compaction) */
        rows[i] = in_place ? (i == 0 ? rnd_int(2) : rows[i - 1] + 1 + rnd_int(2)) : rnd_int(n_src);
    if (in_place && rows[n - 1] >= n_src) { fprintf(stderr, "bad gather case\n"); exit(1); }
    size_t out_n = (size_t)(in_place ? n_src : n) * E;
    float *ref = malloc(out_n * sizeof(float)), *got = malloc(out_n * sizeof(float));
    tp_backend *bs[2] = {g_cpu, g_gpu};
    for (int k = 0; k < 2; k++) {
        tp_backend *b = bs[k];
        void *ds = dev_from(b, src, (size_t)n_src * E);
        void *dd = in_place ? ds : b->alloc(b, (size_t)n * E * es(b), "dst");
        if (!in_place) poison(b, dd, (size_t)n * E * es(b));
        b->gather_rows(b, dd, ds, rows, n, E);
        dev_to(b, k ? got : ref, dd, in_place ? (size_t)n * E : out_n);
        b->free(b, ds);
        if (!in_place) b->free(b, dd);
    }
    char what[96];
    snprintf(what, sizeof what, "gather_rows %d of %d rows E=%d%s (exact)", n, n_src, E, in_place ? " in place" : "");
    check_nmse(what, got, ref, (size_t)n * E, 0.0);
    free(src); free(rows); free(ref); free(got);
}

/* ---- GEMM ---- */
static void test_matmul(int T, int N, int K, int with_bias, int accumulate, int f32out) {
    float *x = randn_act((size_t)T * K, 1.0f), *W = randn_act((size_t)N * K, (float)(1.0 / sqrt(K > 0 ? K : 1)));
    float *bias = randn_act(N, 0.5f), *y0 = randn_act((size_t)T * N, 1.0f);
    size_t ny = (size_t)T * N;
    float *ref = malloc(ny * sizeof(float)), *got = malloc(ny * sizeof(float));
    tp_backend *bs[2] = {g_cpu, g_gpu};
    for (int k = 0; k < 2; k++) {
        tp_backend *b = bs[k];
        void *dx = dev_from(b, x, (size_t)T * K);
        void *dW = b->alloc(b, b->matrix_bytes(b, N, K), "W");
        b->matrix_upload(b, dW, W, TP_F32, N, K);
        void *db = with_bias ? dev_from(b, bias, N) : NULL;
        if (f32out) {
            float *dy = b->alloc(b, ny * sizeof(float), "y");
            if (k) poison(b, dy, ny * sizeof(float));
            b->matmul_f32out(b, dy, dx, dW, db, T, N, K);
            b->to_host(b, k ? got : ref, dy, ny * sizeof(float));
            b->free(b, dy);
        } else {
            void *dy = dev_from(b, y0, ny);
            if (k && !accumulate) poison(b, dy, ny * es(b));
            b->matmul(b, dy, dx, dW, db, T, N, K, accumulate);
            dev_to(b, k ? got : ref, dy, ny);
            b->free(b, dy);
        }
        b->free(b, dx); b->free(b, dW);
        if (db) b->free(b, db);
    }
    char what[96];
    snprintf(what, sizeof what, "%s T=%d N=%d K=%d%s%s", f32out ? "matmul_f32out" : "matmul", T, N, K,
             with_bias ? " +bias" : "", accumulate ? " +=y" : "");
    check_nmse(what, got, ref, ny, f32out ? TOL_F32 : tol_act(g_gpu->act));
    free(x); free(W); free(bias); free(y0); free(ref); free(got);
}

/* fc_in + GELU in one op (cuBLASLt GELU_BIAS epilogue, or the GEMV epilogue for T <= 4): one
 * rounding of gelu_new(x W^T + b), so the act-dtype bound of one rounding holds. */
static void test_matmul_gelu(int T, int N, int K) {
    float *x = randn_act((size_t)T * K, 1.0f), *W = randn_act((size_t)N * K, (float)(1.0 / sqrt(K)));
    float *bias = randn_act(N, 0.5f);
    size_t ny = (size_t)T * N;
    float *ref = malloc(ny * sizeof(float)), *got = malloc(ny * sizeof(float));
    tp_backend *bs[2] = {g_cpu, g_gpu};
    for (int k = 0; k < 2; k++) {
        tp_backend *b = bs[k];
        void *dx = dev_from(b, x, (size_t)T * K), *db = dev_from(b, bias, N);
        void *dW = b->alloc(b, b->matrix_bytes(b, N, K), "W");
        b->matrix_upload(b, dW, W, TP_F32, N, K);
        void *dy = b->alloc(b, ny * es(b) + 16, "y");
        if (k) poison(b, dy, ny * es(b));
        b->matmul_gelu(b, dy, dx, dW, db, T, N, K);
        dev_to(b, k ? got : ref, dy, ny);
        b->free(b, dx); b->free(b, dW); b->free(b, db); b->free(b, dy);
    }
    char what[96];
    snprintf(what, sizeof what, "matmul_gelu T=%d N=%d K=%d +bias", T, N, K);
    check_nmse(what, got, ref, ny, tol_act(g_gpu->act));
    free(x); free(W); free(bias); free(ref); free(got);
}

/* Half an ulp of v in the act dtype (F16: 10 stored bits, subnormal step 2^-24; BF16: 7 bits). */
static double half_ulp_act(double v) {
    const int mant = g_gpu->act == TP_F16 ? 10 : 7, emin = g_gpu->act == TP_F16 ? -14 : -126;
    int e = v != 0 ? (int)floor(log2(fabs(v))) : emin;
    if (e < emin) e = emin;
    return ldexp(1.0, e - mant - 1);
}

/* The bias is added in f32 before the one rounding (cuBLASLt BIAS epilogue; the GEMV epilogue).
 * Row 0's bias cancels most of its product (bias[n] = -(x W^T)[0,n] rounded, plus a small
 * offset), so its results are ~30x smaller than the products. Per element the error must stay
 * within half an ulp of the result in the act dtype, plus any f32 summation order (even with
 * truncating alignment: (K-1) 2^-23 sum|x_k w_k|), plus 2^-24 |bias|. Rounding the product first
 * (the former GemmEx + bias kernel) errs by up to half an ulp of the product: 20-60x more. */
static void test_bias_epilogue(int T, int N, int K) {
    float *x = randn_act((size_t)T * K, 1.0f), *W = randn_act((size_t)N * K, (float)(1.0 / sqrt(K)));
    float *bias = malloc(N * sizeof(float)), *got = malloc((size_t)T * N * sizeof(float));
    uint16_t *t16 = malloc(N * sizeof(float)); /* room for any dtype (keeps -Warray-bounds quiet) */
    for (int n = 0; n < N; n++) {
        double p = 0;
        for (int k = 0; k < K; k++) p += (double)x[k] * W[(size_t)n * K + k];
        bias[n] = (float)(-p + 0.03 * rnd_n());
    }
    tp_convert_from_f32(t16, g_gpu->act, bias, N); /* the bias as the GPU stores it */
    tp_convert_to_f32(bias, t16, g_gpu->act, N);
    void *dx = dev_from(g_gpu, x, (size_t)T * K), *db = dev_from(g_gpu, bias, N);
    void *dW = g_gpu->alloc(g_gpu, g_gpu->matrix_bytes(g_gpu, N, K), "W");
    g_gpu->matrix_upload(g_gpu, dW, W, TP_F32, N, K);
    void *dy = g_gpu->alloc(g_gpu, (size_t)T * N * es(g_gpu) + 16, "y");
    poison(g_gpu, dy, (size_t)T * N * es(g_gpu));
    g_gpu->matmul(g_gpu, dy, dx, dW, db, T, N, K, 0);
    dev_to(g_gpu, got, dy, (size_t)T * N);
    size_t bad = 0;
    double worst = 0;
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++) {
            double r = bias[n], abs_sum = 0;
            for (int k = 0; k < K; k++) {
                const double pk = (double)x[(size_t)t * K + k] * W[(size_t)n * K + k];
                r += pk;
                abs_sum += fabs(pk);
            }
            const double bound = half_ulp_act(r) * (1 + 1e-3) + (K - 1) * ldexp(abs_sum, -23) + ldexp(fabs(bias[n]), -24);
            const double e = fabs(got[(size_t)t * N + n] - r);
            if (!(e <= bound)) bad++;
            if (e / bound > worst) worst = e / bound;
        }
    char what[96], det[128];
    snprintf(what, sizeof what, "matmul T=%d N=%d K=%d bias in f32 (one rounding)", T, N, K);
    snprintf(det, sizeof det, "%zu of %d elements over half an ulp + f32 sum bound (worst %.2fx)", bad, T * N, worst);
    check_true(what, bad == 0, det);
    g_gpu->free(g_gpu, dx); g_gpu->free(g_gpu, dW); g_gpu->free(g_gpu, db); g_gpu->free(g_gpu, dy);
    free(x); free(W); free(bias); free(got); free(t16);
}

/* ---- paged KV cache ----
 * S sequences; sequence s has ctx[s] positions, in blocks placed at random physical ids. */
typedef struct {
    int S, bs, max_blocks, n_blocks, T, max_pos;
    int32_t *bt;        /* [S, max_blocks] */
    int32_t *pos, *seq; /* [T] */
} kv_case;

static void kv_case_make(kv_case *c, int S, const int *ctx, int bs, int max_blocks) {
    c->S = S;
    c->bs = bs;
    c->max_blocks = max_blocks;
    int total = 0;
    for (int s = 0; s < S; s++) total += (ctx[s] + bs - 1) / bs;
    c->n_blocks = total + 3; /* a few blocks nobody owns */
    int *perm = malloc(c->n_blocks * sizeof(int));
    for (int i = 0; i < c->n_blocks; i++) perm[i] = i;
    for (int i = c->n_blocks - 1; i > 0; i--) {
        int j = rnd_int(i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    c->bt = malloc((size_t)S * max_blocks * sizeof(int32_t));
    int next = 0;
    for (int s = 0; s < S; s++) {
        int nb = (ctx[s] + bs - 1) / bs;
        if (nb > max_blocks) { fprintf(stderr, "kv case: context %d > table\n", ctx[s]); exit(1); }
        for (int j = 0; j < max_blocks; j++) c->bt[s * max_blocks + j] = j < nb ? perm[next++] : -1;
    }
    free(perm);
    c->T = 0;
    c->pos = NULL;
    c->seq = NULL;
}

static void kv_case_tokens(kv_case *c, int T, const int *seq, const int *pos) {
    c->T = T;
    c->pos = malloc(T * sizeof(int32_t));
    c->seq = malloc(T * sizeof(int32_t));
    c->max_pos = 0;
    for (int t = 0; t < T; t++) {
        c->pos[t] = pos[t];
        c->seq[t] = seq[t];
        if (pos[t] > c->max_pos) c->max_pos = pos[t];
    }
}

static void kv_case_free(kv_case *c) { free(c->bt); free(c->pos); free(c->seq); }

typedef struct {
    int32_t *pos, *seq, *bt;
    tp_step st;
} dev_step;

static void dev_step_make(tp_backend *b, dev_step *d, const kv_case *c) {
    d->pos = dev_raw(b, c->pos, c->T * sizeof(int32_t));
    d->seq = dev_raw(b, c->seq, c->T * sizeof(int32_t));
    d->bt = dev_raw(b, c->bt, (size_t)c->S * c->max_blocks * sizeof(int32_t));
    d->st = (tp_step){c->T, c->S, c->bs, c->max_blocks, c->max_pos, d->pos, d->seq, d->bt};
}
static void dev_step_free(tp_backend *b, dev_step *d) { b->free(b, d->pos); b->free(b, d->seq); b->free(b, d->bt); }

static const char *style_name(tp_rope_style s) { return s == TP_ROPE_NEOX ? "rotate-half" : "GPT-J"; }

/* rotary_kv_write: compares the rotated qkv and every cache slot (written slots must match the
 * CPU; the others must still hold the poison). Hkl KV heads (the CPU's rotary takes any), pairs of
 * the style. */
static void test_rotary(const char *name, kv_case *c, int Hl, int Hkl, int D, int R, tp_rope_style style) {
    const size_t nq = (size_t)c->T * (Hl + 2 * Hkl) * D, nc = (size_t)c->n_blocks * c->bs * Hkl * D;
    float *qkv = randn_act(nq, 1.0f);
    float *ref_q = malloc(nq * sizeof(float)), *got_q = malloc(nq * sizeof(float));
    float *ref_k = malloc(nc * sizeof(float)), *got_k = malloc(nc * sizeof(float));
    float *ref_v = malloc(nc * sizeof(float)), *got_v = malloc(nc * sizeof(float));
    tp_backend *bs[2] = {g_cpu, g_gpu};
    for (int k = 0; k < 2; k++) {
        tp_backend *b = bs[k];
        dev_step d;
        dev_step_make(b, &d, c);
        void *dq = dev_from(b, qkv, nq);
        void *kc = b->alloc(b, nc * es(b), "k cache"), *vc = b->alloc(b, nc * es(b), "v cache");
        poison(b, kc, nc * es(b));
        poison(b, vc, nc * es(b));
        b->rotary_kv_write(b, dq, kc, vc, &d.st, &(tp_attn_shape){Hl, Hkl, D, R, style, 10000.0f});
        dev_to(b, k ? got_q : ref_q, dq, nq);
        dev_to(b, k ? got_k : ref_k, kc, nc);
        dev_to(b, k ? got_v : ref_v, vc, nc);
        dev_step_free(b, &d);
        b->free(b, dq); b->free(b, kc); b->free(b, vc);
    }
    /* written slots: compact them out; unwritten: must be NaN on both */
    size_t HD = (size_t)Hkl * D, nw = 0, untouched_bad = 0;
    char *written = calloc((size_t)c->n_blocks * c->bs, 1);
    for (int t = 0; t < c->T; t++) {
        int p = c->pos[t];
        written[(size_t)c->bt[c->seq[t] * c->max_blocks + p / c->bs] * c->bs + p % c->bs] = 1;
    }
    float *wk_r = malloc(nc * sizeof(float)), *wk_g = malloc(nc * sizeof(float));
    float *wv_r = malloc(nc * sizeof(float)), *wv_g = malloc(nc * sizeof(float));
    for (size_t s = 0; s < (size_t)c->n_blocks * c->bs; s++) { /* slot s: block s / bs, offset s % bs */
        for (size_t e = 0; e < HD; e++) { /* KV head e / D, dim e % D (kernels/common/tp_kv.h) */
            size_t i = tp_kv_row((int32_t)(s / c->bs), (int)(e / D), (int)(s % c->bs), Hkl, c->bs, D) + e % D;
            if (written[s]) {
                wk_r[nw] = ref_k[i]; wk_g[nw] = got_k[i]; wv_r[nw] = ref_v[i]; wv_g[nw] = got_v[i];
                nw++;
            } else if (!isnan(got_k[i]) || !isnan(got_v[i])) {
                untouched_bad++;
            }
        }
    }
    char what[128];
    snprintf(what, sizeof what, "rotary q,k %s %s Hl=%d Hkl=%d D=%d R=%d", name, style_name(style), Hl, Hkl, D, R);
    check_nmse(what, got_q, ref_q, nq, tol_act(g_gpu->act));
    snprintf(what, sizeof what, "rotary k cache %s", name);
    check_nmse(what, wk_g, wk_r, nw, tol_act(g_gpu->act));
    snprintf(what, sizeof what, "rotary v cache %s (exact)", name);
    check_nmse(what, wv_g, wv_r, nw, 0.0);
    snprintf(what, sizeof what, "rotary leaves other slots alone %s", name);
    char det[64];
    snprintf(det, sizeof det, "%zu elements of unwritten slots changed", untouched_bad);
    check_true(what, untouched_bad == 0, det);
    free(written); free(wk_r); free(wk_g); free(wv_r); free(wv_g);
    free(qkv); free(ref_q); free(got_q); free(ref_k); free(got_k); free(ref_v); free(got_v);
}

/* The CPU backend's attention (the reference) for any KV-head count: with Hkl < Hl, q and the
 * caches are widened to Hl heads (query head h gets a copy of KV head h / (Hl / Hkl)) and the CPU's
 * multi-head attention runs on them, so the reference does not rest on a GQA path of its own.
 * qkv, kc, vc: g_cpu buffers as attention takes them; n_slots: cache slots (n_blocks * bs). */
static void cpu_attention_ref(void *out, const void *qkv, const void *kc, const void *vc, const tp_step *st,
                              const tp_attn_shape *a, size_t n_slots) {
    const int Hl = a->n_heads, Hkl = a->n_kv_heads, D = a->head_dim, T = st->n_tokens, grp = Hl / Hkl;
    if (Hkl == Hl) {
        g_cpu->attention(g_cpu, out, qkv, kc, vc, st, a);
        return;
    }
    const size_t row = (size_t)(Hl + 2 * Hkl) * D, row2 = (size_t)3 * Hl * D;
    float *q = malloc((size_t)T * row * 4), *k = malloc(n_slots * Hkl * D * 4), *v = malloc(n_slots * Hkl * D * 4);
    float *q2 = malloc((size_t)T * row2 * 4), *k2 = malloc(n_slots * Hl * D * 4), *v2 = malloc(n_slots * Hl * D * 4);
    g_cpu->to_host(g_cpu, q, qkv, (size_t)T * row * 4);
    g_cpu->to_host(g_cpu, k, kc, n_slots * Hkl * D * 4);
    g_cpu->to_host(g_cpu, v, vc, n_slots * Hkl * D * 4);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < Hl; h++) {
            const float *src = q + (size_t)t * row;
            float *dst = q2 + (size_t)t * row2;
            memcpy(dst + (size_t)h * D, src + (size_t)h * D, D * 4);                                  /* q */
            memcpy(dst + (size_t)(Hl + h) * D, src + (size_t)(Hl + h / grp) * D, D * 4);              /* k */
            memcpy(dst + (size_t)(2 * Hl + h) * D, src + (size_t)(Hl + Hkl + h / grp) * D, D * 4);    /* v */
        }
    const int bs = st->block_size;
    for (size_t sl = 0; sl < n_slots; sl++) /* slot sl: block sl / bs, offset sl % bs (tp_kv.h) */
        for (int h = 0; h < Hl; h++) {
            const int32_t blk = (int32_t)(sl / bs);
            const int j = (int)(sl % bs);
            memcpy(k2 + tp_kv_row(blk, h, j, Hl, bs, D), k + tp_kv_row(blk, h / grp, j, Hkl, bs, D), D * 4);
            memcpy(v2 + tp_kv_row(blk, h, j, Hl, bs, D), v + tp_kv_row(blk, h / grp, j, Hkl, bs, D), D * 4);
        }
    void *dq = dev_raw(g_cpu, q2, (size_t)T * row2 * 4), *dk = dev_raw(g_cpu, k2, n_slots * Hl * D * 4);
    void *dv = dev_raw(g_cpu, v2, n_slots * Hl * D * 4);
    tp_attn_shape mha = *a;
    mha.n_kv_heads = Hl;
    g_cpu->attention(g_cpu, out, dq, dk, dv, st, &mha);
    g_cpu->free(g_cpu, dq); g_cpu->free(g_cpu, dk); g_cpu->free(g_cpu, dv);
    free(q); free(k); free(v); free(q2); free(k2); free(v2);
}

/* attention over caches filled with random K/V (every slot, written or not by this step); Hkl KV
 * heads (Hkl < Hl: grouped-query, against the CPU's multi-head attention on widened heads). */
static void test_attention(const char *name, kv_case *c, int Hl, int Hkl, int D) {
    const size_t n_slots = (size_t)c->n_blocks * c->bs;
    const size_t nq = (size_t)c->T * (Hl + 2 * Hkl) * D, nc = n_slots * Hkl * D;
    const size_t no = (size_t)c->T * Hl * D;
    float *qkv = randn_act(nq, 1.0f), *kc = randn_act(nc, 1.0f), *vc = randn_act(nc, 1.0f);
    float *ref = malloc(no * sizeof(float)), *got = malloc(no * sizeof(float));
    const tp_attn_shape shape = {Hl, Hkl, D, 0, TP_ROPE_GPTJ, 10000.0f};
    tp_backend *bs[2] = {g_cpu, g_gpu};
    for (int k = 0; k < 2; k++) {
        tp_backend *b = bs[k];
        dev_step d;
        dev_step_make(b, &d, c);
        void *dq = dev_from(b, qkv, nq), *dk = dev_from(b, kc, nc), *dv = dev_from(b, vc, nc);
        void *out = b->alloc(b, no * es(b), "attention out");
        poison(b, out, no * es(b));
        if (k) b->attention(b, out, dq, dk, dv, &d.st, &shape);
        else cpu_attention_ref(out, dq, dk, dv, &d.st, &shape, n_slots);
        dev_to(b, k ? got : ref, out, no);
        dev_step_free(b, &d);
        b->free(b, dq); b->free(b, dk); b->free(b, dv); b->free(b, out);
    }
    char what[128];
    snprintf(what, sizeof what, "attention %s T=%d S=%d Hl=%d Hkl=%d D=%d", name, c->T, c->S, Hl, Hkl, D);
    check_nmse(what, got, ref, no, tol_act(g_gpu->act));
    free(qkv); free(kc); free(vc); free(ref); free(got);
}

static void attn_cases(void) {
    kv_case c;
    { /* decode: 4 sequences, one token each, contexts from 1 to 1001, tokens not in seq order */
        int ctx[4] = {18, 1, 301, 1001}, seq[4] = {0, 1, 3, 2}, pos[4] = {17, 0, 1000, 300};
        kv_case_make(&c, 4, ctx, 16, 64);
        kv_case_tokens(&c, 4, seq, pos);
        test_attention("decode", &c, 2, 2, 64);
        test_rotary("decode", &c, 2, 2, 64, 32, TP_ROPE_GPTJ);
        test_attention("decode D=24", &c, 3, 3, 24);
        test_attention("decode D=10 (pairs)", &c, 2, 2, 10);
        test_rotary("decode D=10", &c, 2, 2, 10, 10, TP_ROPE_GPTJ);
        test_attention("decode D=8", &c, 4, 4, 8);
        /* grouped-query (query head h reads KV head h / (Hl / Hkl)) and rotate-half rotary */
        test_attention("decode GQA", &c, 4, 1, 64);
        test_attention("decode GQA D=24", &c, 6, 2, 24);
        test_attention("decode GQA D=10 (pairs)", &c, 4, 2, 10);
        test_rotary("decode", &c, 2, 2, 64, 64, TP_ROPE_NEOX);
        test_rotary("decode GQA", &c, 4, 1, 64, 64, TP_ROPE_NEOX);
        test_rotary("decode GQA partial", &c, 6, 2, 64, 32, TP_ROPE_NEOX);
        test_rotary("decode GQA", &c, 4, 2, 64, 32, TP_ROPE_GPTJ);
        test_rotary("decode D=10", &c, 3, 1, 10, 6, TP_ROPE_NEOX);
        test_rotary("decode odd D=9", &c, 2, 1, 9, 8, TP_ROPE_NEOX);
        kv_case_free(&c);
    }
    { /* long context: one token at 2047, D = 256 (CodeGen-16B heads), splits across blocks */
        int ctx[2] = {2048, 700}, seq[2] = {0, 1}, pos[2] = {2047, 699};
        kv_case_make(&c, 2, ctx, 16, 128);
        kv_case_tokens(&c, 2, seq, pos);
        test_attention("long context 2048", &c, 2, 2, 256);
        test_rotary("long context", &c, 2, 2, 256, 64, TP_ROPE_GPTJ);
        test_attention("long context 2048 GQA (splits)", &c, 8, 2, 128); /* LLaMA head_dim */
        test_attention("long context 2048 GQA D=256", &c, 4, 1, 256);
        test_rotary("long context GQA", &c, 8, 2, 128, 128, TP_ROPE_NEOX);
        kv_case_free(&c);
    }
    { /* decode kernel with 2 tokens per sequence (T <= 2S) */
        int ctx[3] = {40, 9, 130}, seq[6] = {0, 0, 1, 1, 2, 2}, pos[6] = {38, 39, 7, 8, 128, 129};
        kv_case_make(&c, 3, ctx, 8, 32);
        kv_case_tokens(&c, 6, seq, pos);
        test_attention("2 tokens/seq", &c, 2, 2, 64);
        test_attention("2 tokens/seq GQA", &c, 4, 2, 64);
        kv_case_free(&c);
    }
    { /* prefill from position 0, block size 5 */
        int ctx[1] = {100}, seq[100], pos[100];
        for (int t = 0; t < 100; t++) { seq[t] = 0; pos[t] = t; }
        kv_case_make(&c, 1, ctx, 5, 32);
        kv_case_tokens(&c, 100, seq, pos);
        test_attention("prefill", &c, 3, 3, 64);
        test_rotary("prefill", &c, 3, 3, 64, 16, TP_ROPE_GPTJ);
        test_attention("prefill D=256", &c, 1, 1, 256);
        test_attention("prefill D=10", &c, 2, 2, 10);
        test_attention("prefill GQA", &c, 4, 2, 64);
        test_attention("prefill GQA D=128", &c, 8, 1, 128);
        test_attention("prefill GQA D=256", &c, 2, 1, 256);
        test_attention("prefill GQA D=10", &c, 3, 1, 10);
        test_rotary("prefill GQA", &c, 4, 2, 128, 128, TP_ROPE_NEOX);
        kv_case_free(&c);
    }
    { /* chunked prefill: 40 tokens at 60..99 over 60 cached ones */
        int ctx[1] = {100}, seq[40], pos[40];
        for (int t = 0; t < 40; t++) { seq[t] = 0; pos[t] = 60 + t; }
        kv_case_make(&c, 1, ctx, 16, 8);
        kv_case_tokens(&c, 40, seq, pos);
        test_attention("chunked prefill", &c, 2, 2, 64);
        test_attention("chunked prefill GQA", &c, 6, 3, 64);
        kv_case_free(&c);
    }
    { /* mixed: a prefill chunk of seq 0 with decode tokens of seqs 1 and 2 between its tokens */
        int ctx[3] = {50, 501, 78}, seq[42], pos[42], T = 0;
        for (int i = 0; i < 40; i++) {
            if (i == 7) { seq[T] = 1; pos[T++] = 500; }
            if (i == 23) { seq[T] = 2; pos[T++] = 77; }
            seq[T] = 0;
            pos[T++] = 10 + i;
        }
        kv_case_make(&c, 3, ctx, 16, 40);
        kv_case_tokens(&c, T, seq, pos);
        test_attention("mixed prefill+decode", &c, 2, 2, 64);
        test_rotary("mixed", &c, 2, 2, 64, 64, TP_ROPE_GPTJ);
        test_attention("mixed prefill+decode GQA", &c, 4, 1, 64);
        test_rotary("mixed GQA", &c, 4, 1, 64, 64, TP_ROPE_NEOX);
        kv_case_free(&c);
    }
}

/* ---- logits_stats ---- */
static void test_logits(int rows, int ld, int n_valid, int k, int use_targets, int ties) {
    size_t n = (size_t)rows * ld;
    float *l = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        size_t c = i % ld;
        float v = 3.0f * rnd_n();
        if (ties) v = roundf(v * 4.0f) / 4.0f; /* many equal values: ties go to the lower column */
        l[i] = c < (size_t)n_valid ? v : 1e30f; /* padding must never count */
    }
    if (rows > 1)
        for (int c = 0; c < n_valid; c++) l[(size_t)ld + c] = (c % 3 == 0) ? -0.0f : 0.0f; /* all equal */
    if (rows > 2) l[2 * (size_t)ld + 1] = -INFINITY;
    int32_t *tg = malloc(rows * sizeof(int32_t));
    for (int r = 0; r < rows; r++) tg[r] = r % 4 == 1 ? -1 : r % 4 == 2 ? n_valid : rnd_int(n_valid);
    float *mx[2], *se[2], *tv[2], *tgt[2];
    int32_t *ti[2];
    tp_backend *bs[2] = {g_cpu, g_gpu};
    for (int k2 = 0; k2 < 2; k2++) {
        tp_backend *b = bs[k2];
        mx[k2] = malloc(rows * sizeof(float));
        se[k2] = malloc(rows * sizeof(float));
        tgt[k2] = malloc(rows * sizeof(float));
        tv[k2] = malloc(((size_t)rows * k + 1) * sizeof(float));
        ti[k2] = malloc(((size_t)rows * k + 1) * sizeof(int32_t));
        memset(tv[k2], 0x55, ((size_t)rows * k + 1) * sizeof(float));
        memset(ti[k2], 0x55, ((size_t)rows * k + 1) * sizeof(int32_t));
        float *dl = dev_raw(b, l, n * sizeof(float));
        b->logits_stats(b, dl, rows, ld, n_valid, k, use_targets ? tg : NULL, mx[k2], se[k2], tv[k2], ti[k2], tgt[k2]);
        b->free(b, dl);
    }
    int bad_mx = 0, bad_se = 0, bad_top = 0, bad_tgt = 0;
    for (int r = 0; r < rows; r++) {
        bad_mx += mx[1][r] != mx[0][r];
        bad_se += !(fabsf(se[1][r] - se[0][r]) <= 1e-5f * fabsf(se[0][r])); /* f32 vs double sum */
        if (use_targets) bad_tgt += !(tgt[1][r] == tgt[0][r] || (isnan(tgt[1][r]) && isnan(tgt[0][r])));
        else bad_tgt += !isnan(tgt[1][r]);
        for (int j = 0; j < k; j++) {
            size_t i = (size_t)r * k + j;
            bad_top += ti[1][i] != ti[0][i] || !(tv[1][i] == tv[0][i]);
        }
    }
    char what[128], det[128];
    snprintf(what, sizeof what, "logits_stats rows=%d ld=%d valid=%d k=%d%s%s", rows, ld, n_valid, k,
             ties ? " ties" : "", use_targets ? " targets" : "");
    snprintf(det, sizeof det, "rows with wrong max %d, sumexp %d, target %d; wrong top-k entries %d", bad_mx, bad_se,
             bad_tgt, bad_top);
    check_true(what, !bad_mx && !bad_se && !bad_top && !bad_tgt, det);
    for (int k2 = 0; k2 < 2; k2++) { free(mx[k2]); free(se[k2]); free(tv[k2]); free(ti[k2]); free(tgt[k2]); }
    free(l); free(tg);
}

/* ---- upload, copies, fill_random ---- */
static void test_upload(size_t n) {
    float *src = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) src[i] = 4.0f * rnd_n();
    uint16_t *h16 = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    float *ref = malloc(n * sizeof(float)), *gotf = malloc(n * sizeof(float));
    tp_dtype st[3] = {TP_F32, TP_F16, TP_BF16};
    for (int i = 0; i < 3; i++) {
        const void *h = src;
        if (st[i] != TP_F32) { tp_convert_from_f32(h16, st[i], src, n); h = h16; }
        tp_convert_to_f32(ref, h, st[i], n); /* the value as the checkpoint holds it */
        tp_convert_from_f32(want, g_gpu->act, ref, n);
        void *d = g_gpu->alloc(g_gpu, n * 2, "upload");
        poison(g_gpu, d, n * 2);
        g_gpu->upload(g_gpu, d, h, st[i], n);
        g_gpu->to_host(g_gpu, got, d, n * 2);
        g_gpu->free(g_gpu, d);
        size_t bad = 0;
        for (size_t j = 0; j < n; j++) bad += got[j] != want[j];
        char what[96], det[64];
        snprintf(what, sizeof what, "upload %zu %s -> %s (bit-exact rounding)", n, tp_dtype_name(st[i]),
                 tp_dtype_name(g_gpu->act));
        snprintf(det, sizeof det, "%zu elements differ", bad);
        check_true(what, bad == 0, det);
    }
    /* raw bytes through both staging buffers and back, and a device copy */
    size_t bytes = n * sizeof(float);
    void *d = g_gpu->alloc(g_gpu, bytes, "roundtrip"), *d2 = g_gpu->alloc(g_gpu, bytes, "roundtrip copy");
    g_gpu->to_device(g_gpu, d, src, bytes);
    poison(g_gpu, d2, bytes);
    g_gpu->copy(g_gpu, d2, d, bytes);
    g_gpu->to_host(g_gpu, gotf, d2, bytes);
    g_gpu->free(g_gpu, d);
    g_gpu->free(g_gpu, d2);
    char what[96];
    snprintf(what, sizeof what, "to_device + copy + to_host %zu bytes (exact)", bytes);
    check_true(what, memcmp(gotf, src, bytes) == 0, "bytes differ");
    /* from pinned memory (the direct DMA path); the source is reused at once after the call */
    void *pin = g_gpu->host_alloc(g_gpu, bytes, "pinned test source");
    memcpy(pin, src, bytes);
    d = g_gpu->alloc(g_gpu, bytes, "pinned roundtrip");
    g_gpu->to_device(g_gpu, d, pin, bytes);
    memset(pin, 0, bytes);
    g_gpu->to_host(g_gpu, gotf, d, bytes);
    g_gpu->free(g_gpu, d);
    g_gpu->host_free(g_gpu, pin);
    snprintf(what, sizeof what, "to_device from pinned memory %zu bytes (exact)", bytes);
    check_true(what, memcmp(gotf, src, bytes) == 0, "bytes differ");
    free(src); free(h16); free(want); free(got); free(ref); free(gotf);
}

static void test_fill_random(size_t n) {
    float *ref = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float)), *got2 = malloc(n * sizeof(float));
    uint16_t *t = malloc(n * sizeof(float));
    void *c = g_cpu->alloc(g_cpu, n * sizeof(float), "fill");
    g_cpu->fill_random(g_cpu, c, n, 1234, 0.25f, 2.0f);
    g_cpu->to_host(g_cpu, ref, c, n * sizeof(float));
    g_cpu->free(g_cpu, c);
    tp_convert_from_f32(t, g_gpu->act, ref, n); /* the CPU's draws, rounded like the GPU stores them */
    tp_convert_to_f32(ref, t, g_gpu->act, n);
    void *d = g_gpu->alloc(g_gpu, n * 2, "fill");
    poison(g_gpu, d, n * 2);
    g_gpu->fill_random(g_gpu, d, n, 1234, 0.25f, 2.0f);
    uint16_t *raw = malloc(n * 2);
    g_gpu->to_host(g_gpu, raw, d, n * 2);
    dev_to(g_gpu, got, d, n);
    g_gpu->fill_random(g_gpu, d, n, 1235, 0.25f, 2.0f);
    dev_to(g_gpu, got2, d, n);
    g_gpu->free(g_gpu, d);
    char what[96];
    snprintf(what, sizeof what, "fill_random n=%zu (same generator as the CPU)", n);
    /* one generator (kernels/common/tp_rng.h) and one rounding (tp_round.h) on both sides: the
     * GPU's F16/BF16 bits must equal the CPU's f32 draws rounded on the host, every one */
    size_t n_diff = 0;
    for (size_t i = 0; i < n; i++) n_diff += raw[i] != t[i];
    char det0[96];
    snprintf(det0, sizeof det0, "%zu of %zu elements differ in their bits", n_diff, n);
    check_true(what, n_diff == 0, det0);
    free(raw);
    double m = 0, v = 0;
    size_t same = 0;
    for (size_t i = 0; i < n; i++) { m += got2[i]; same += got2[i] == got[i]; }
    m /= n;
    for (size_t i = 0; i < n; i++) v += (got2[i] - m) * (got2[i] - m);
    v = sqrt(v / n);
    char det[128];
    snprintf(det, sizeof det, "seed 1235: mean %.4f std %.4f, %zu of %zu equal to seed 1234", m, v, same, n);
    /* mean 0.25 +- 5 sigma of 2/sqrt(n); std 2 within 2% */
    check_true("fill_random other seed: new draws, right moments",
               fabs(m - 0.25) < 5 * 2.0 / sqrt((double)n) && fabs(v - 2.0) < 0.04 && same < n / 50, det);
    free(ref); free(got); free(got2); free(t);
}

/* ---- CUDA graphs: capture runs the step once; replay sees new inputs; decode attention
 * captured at a short context stays right when replayed at a longer one. ---- */
static void test_graphs(void) {
    const int T = 3, E = 64, N = 64;
    float *x = randn_act((size_t)T * E, 1.0f), *x2 = randn_act((size_t)T * E, 1.0f);
    float *g = randn_act(E, 1.0f), *be = randn_act(E, 0.1f), *W = randn_act((size_t)N * E, 0.125f);
    float *h = randn_act((size_t)T * N, 1.0f);
    float *ref1 = malloc((size_t)T * N * sizeof(float)), *ref2 = malloc((size_t)T * N * sizeof(float));
    float *got1 = malloc((size_t)T * N * sizeof(float)), *got2 = malloc((size_t)T * N * sizeof(float));
    tp_backend *bs[2] = {g_cpu, g_gpu};
    for (int k = 0; k < 2; k++) {
        tp_backend *b = bs[k];
        void *dx = dev_from(b, x, (size_t)T * E), *dg = dev_from(b, g, E), *db = dev_from(b, be, E);
        void *dW = b->alloc(b, b->matrix_bytes(b, N, E), "W"), *dh = dev_from(b, h, (size_t)T * N);
        void *ln = b->alloc(b, (size_t)T * E * es(b), "ln"), *z = b->alloc(b, (size_t)T * N * es(b), "z");
        b->matrix_upload(b, dW, W, TP_F32, N, E);
        for (int rep = 0; rep < 2; rep++) {
            if (rep == 1) b->upload(b, dx, x2, TP_F32, (size_t)T * E); /* a new input for the same graph */
            int launched = k && rep == 1 && b->graph_launch(b, 7);
            if (!launched) {
                if (k) b->graph_begin(b, 7);
                b->layernorm(b, ln, dx, dg, db, T, E, 1e-5f);
                b->matmul(b, z, ln, dW, NULL, T, N, E, 0);
                b->add(b, dh, z, (size_t)T * N);
                if (k) b->graph_end(b, 7);
            }
            dev_to(b, k ? (rep ? got2 : got1) : (rep ? ref2 : ref1), dh, (size_t)T * N);
        }
        if (k) check_true("graph_launch of an unknown key returns 0", b->graph_launch(b, 8) == 0, "returned 1");
        b->free(b, dx); b->free(b, dg); b->free(b, db); b->free(b, dW); b->free(b, dh); b->free(b, ln); b->free(b, z);
    }
    check_nmse("graph: capture runs the step once (h += f(x))", got1, ref1, (size_t)T * N, tol_act(g_gpu->act));
    check_nmse("graph: replay with new x (h += f(x'))", got2, ref2, (size_t)T * N, 2 * tol_act(g_gpu->act));
    free(x); free(x2); free(g); free(be); free(W); free(h); free(ref1); free(ref2); free(got1); free(got2);
}

/* A decode step captured at positions ~10 and replayed at ~900 and ~2000 (rotary + KV write +
 * attention with split-K sized for the table's capacity), Hkl KV heads, pairs of the style. */
static void test_decode_graph(int Hl, int Hkl, int D, int R, tp_rope_style style, int key) {
    const int S = 2, bsz = 16, MB = 128;
    int ctx[2] = {2048, 2048};
    kv_case c;
    kv_case_make(&c, S, ctx, bsz, MB);
    int seq[2] = {0, 1}, pos_a[2] = {10, 5}, pos_b[2] = {900, 333}, pos_c[2] = {2000, 2047};
    kv_case_tokens(&c, 2, seq, pos_a);
    const size_t n_slots = (size_t)c.n_blocks * bsz;
    const size_t nq = (size_t)S * (Hl + 2 * Hkl) * D, nc = n_slots * Hkl * D, no = (size_t)S * Hl * D;
    const tp_attn_shape shape = {Hl, Hkl, D, R, style, 10000.0f};
    float *kc = randn_act(nc, 1.0f), *vc = randn_act(nc, 1.0f);
    float *q[3] = {randn_act(nq, 1.0f), randn_act(nq, 1.0f), randn_act(nq, 1.0f)};
    int *pp[3] = {pos_a, pos_b, pos_c};
    float *ref[3], *got[3];
    for (int i = 0; i < 3; i++) { ref[i] = malloc(no * sizeof(float)); got[i] = malloc(no * sizeof(float)); }
    tp_backend *bs[2] = {g_cpu, g_gpu};
    for (int k = 0; k < 2; k++) {
        tp_backend *b = bs[k];
        dev_step d;
        dev_step_make(b, &d, &c);
        void *dq = b->alloc(b, nq * es(b), "qkv"), *dk = dev_from(b, kc, nc), *dv = dev_from(b, vc, nc);
        void *out = b->alloc(b, no * es(b), "out");
        for (int i = 0; i < 3; i++) {
            int32_t p32[2] = {pp[i][0], pp[i][1]};
            b->to_device(b, d.pos, p32, sizeof p32);
            b->upload(b, dq, q[i], TP_F32, nq);
            if (k) poison(b, out, no * es(b));
            tp_step st = d.st;
            st.max_pos = p32[0] > p32[1] ? p32[0] : p32[1];
            if (!(k && i > 0 && b->graph_launch(b, key))) {
                if (k) b->graph_begin(b, key);
                b->rotary_kv_write(b, dq, dk, dv, &st, &shape);
                if (k) b->attention(b, out, dq, dk, dv, &st, &shape);
                else cpu_attention_ref(out, dq, dk, dv, &st, &shape, n_slots);
                if (k) b->graph_end(b, key);
            }
            dev_to(b, k ? got[i] : ref[i], out, no);
        }
        dev_step_free(b, &d);
        b->free(b, dq); b->free(b, dk); b->free(b, dv); b->free(b, out);
    }
    const char *at[3] = {"captured at pos 10", "replayed at pos 900", "replayed at pos 2047"};
    for (int i = 0; i < 3; i++) {
        char what[128];
        snprintf(what, sizeof what, "graph: decode %s Hl=%d Hkl=%d, %s", style_name(style), Hl, Hkl, at[i]);
        check_nmse(what, got[i], ref[i], no, tol_act(g_gpu->act));
    }
    for (int i = 0; i < 3; i++) { free(ref[i]); free(got[i]); free(q[i]); }
    free(kc); free(vc);
    kv_case_free(&c);
}

/* LLaMA's MLP block in a graph: h += down(silu_mul(gate_up(rmsnorm(x)))). The captured step and its
 * replay on a new x must give the bits the same ops give run one by one (the ops' own accuracy is
 * checked above; this checks that capture records them, arguments and all). T = 3: the GEMV. */
static void test_graph_llama_mlp(void) {
    const int T = 3, E = 64, N = 96, key = 9;
    float *x[2] = {randn_act((size_t)T * E, 1.0f), randn_act((size_t)T * E, 1.0f)};
    float *g = randn_act(E, 1.0f), *Wgu = randn_act((size_t)2 * N * E, 0.125f), *Wd = randn_act((size_t)E * N, 0.1f);
    float *h = randn_act((size_t)T * E, 1.0f);
    float *eager[2], *graph[2];
    for (int i = 0; i < 2; i++) { eager[i] = malloc((size_t)T * E * 4); graph[i] = malloc((size_t)T * E * 4); }
    tp_backend *b = g_gpu;
    void *dx = b->alloc(b, (size_t)T * E * es(b), "x"), *dg = dev_from(b, g, E);
    void *dh = b->alloc(b, (size_t)T * E * es(b), "h");
    void *dWgu = b->alloc(b, b->matrix_bytes(b, 2 * N, E), "Wgu"), *dWd = b->alloc(b, b->matrix_bytes(b, E, N), "Wd");
    void *ln = b->alloc(b, (size_t)T * E * es(b), "ln"), *gu = b->alloc(b, (size_t)T * 2 * N * es(b), "gu");
    void *y = b->alloc(b, (size_t)T * N * es(b), "y"), *z = b->alloc(b, (size_t)T * E * es(b), "z");
    b->matrix_upload(b, dWgu, Wgu, TP_F32, 2 * N, E);
    b->matrix_upload(b, dWd, Wd, TP_F32, E, N);
    for (int mode = 0; mode < 2; mode++) /* 0: eager, 1: captured then replayed */
        for (int i = 0; i < 2; i++) {
            b->upload(b, dx, x[i], TP_F32, (size_t)T * E);
            b->upload(b, dh, h, TP_F32, (size_t)T * E);
            if (!(mode && i > 0 && b->graph_launch(b, key))) {
                if (mode) b->graph_begin(b, key);
                b->rmsnorm(b, ln, dx, dg, T, E, 1e-6f);
                b->matmul(b, gu, ln, dWgu, NULL, T, 2 * N, E, 0);
                b->silu_mul(b, y, gu, T, N);
                b->matmul(b, z, y, dWd, NULL, T, E, N, 0);
                b->add(b, dh, z, (size_t)T * E);
                if (mode) b->graph_end(b, key);
            }
            dev_to(b, mode ? graph[i] : eager[i], dh, (size_t)T * E);
        }
    check_nmse("graph: LLaMA MLP (rmsnorm, silu_mul) captured == eager (exact)", graph[0], eager[0], (size_t)T * E,
               0.0);
    check_nmse("graph: LLaMA MLP replayed with new x == eager (exact)", graph[1], eager[1], (size_t)T * E, 0.0);
    b->free(b, dx); b->free(b, dg); b->free(b, dh); b->free(b, dWgu); b->free(b, dWd);
    b->free(b, ln); b->free(b, gu); b->free(b, y); b->free(b, z);
    for (int i = 0; i < 2; i++) { free(x[i]); free(eager[i]); free(graph[i]); }
    free(g); free(Wgu); free(Wd); free(h);
}

/* The ops of cuda_norm_act.cu (also run by the host emulation of the kernels, tests/gpu/emu). */
static void run_norm_act(void) {
    test_embed(7, 64, 50);
    test_embed(5, 36, 11);
    test_layernorm(1, 64, 0);
    test_layernorm(5, 1000, 1);
    test_layernorm(3, 6144, 0);
    test_layernorm(4, 36, 0);
    test_rmsnorm(1, 64, 0, 0, 1.0f);
    test_rmsnorm(5, 4096, 1, 0, 1.0f); /* LLaMA-7B's n_embd, in place */
    test_rmsnorm(3, 1000, 0, 0, 1e-3f); /* mean(x^2) ~ eps */
    test_rmsnorm(4, 36, 0, 0, 1.0f);   /* E % 8 != 0: scalar path */
    test_rmsnorm(2, 64, 0, 3, 30.0f);  /* unaligned: scalar path */
    test_silu_mul(1, 64, 0);
    test_silu_mul(3, 1376, 0);   /* 11008 / 8: LLaMA-7B's intermediate size at TP 8 */
    test_silu_mul(17, 344, 0);
    test_silu_mul(4, 37, 0);     /* N % 8 != 0: scalar path */
    test_silu_mul(2, 64, 5);     /* unaligned: scalar path */
    test_gelu_add(1, 0);
    test_gelu_add(12345, 0);
    test_gelu_add(4099, 3);
    test_gather_rows(12, 5, 64, 0);
    test_gather_rows(40, 20, 36, 1);
    test_gather_rows(600, 300, 16, 0); /* more rows than one launch carries */
}

/* The decode graphs: CodeGen's, and LLaMA's with grouped-query heads. */
static void run_decode_graphs(void) {
    test_decode_graph(2, 2, 64, 32, TP_ROPE_GPTJ, 1);
    test_decode_graph(8, 2, 128, 128, TP_ROPE_NEOX, 2);
}

/* The GEMMs whose bounds allow a rounding of the product before the bias (NMSE): the GEMV path
 * (T <= 4, K % 8 == 0), the cuBLASLt epilogues and the cuBLAS path (T > 4 or K % 8 != 0), and
 * the empty product (K = 0). */
static void run_gemms(void) {
    test_matmul(1, 1, 8, 0, 0, 0);
    test_matmul(1, 300, 64, 1, 0, 0);
    test_matmul(1, 777, 1024, 1, 1, 0);
    test_matmul(2, 33, 200, 0, 1, 0);
    test_matmul(3, 513, 512, 1, 0, 0);
    test_matmul(4, 64, 96, 0, 0, 0);
    test_matmul(2, 50, 36, 1, 0, 0);
    test_matmul(5, 128, 256, 1, 1, 0);
    test_matmul(17, 200, 64, 1, 0, 0);
    test_matmul(64, 512, 512, 0, 1, 0);
    test_matmul(130, 96, 1000, 1, 0, 0);
    test_matmul(1, 1000, 256, 1, 0, 1);
    test_matmul(3, 515, 128, 1, 0, 1);
    test_matmul(7, 333, 128, 1, 0, 1);
    test_matmul(40, 258, 64, 0, 0, 1);
    test_matmul_gelu(1, 96, 64);    /* GEMV epilogue */
    test_matmul_gelu(3, 300, 128);
    test_matmul_gelu(8, 512, 256);  /* cuBLASLt GELU_BIAS */
    test_matmul_gelu(130, 96, 1000);
    test_matmul(6, 40, 0, 1, 0, 0); /* K = 0: y = bias */
    test_matmul(5, 33, 0, 0, 1, 0); /* K = 0, accumulate: y unchanged */
    test_matmul(7, 20, 0, 0, 0, 1); /* K = 0: zeros */
}

static void run_all(void) {
    test_upload((size_t)5 << 20); /* 20 MB of f32: more than one 16 MiB staging buffer */
    test_fill_random(100003);
    run_norm_act();
    run_gemms();
    test_bias_epilogue(1, 256, 32); /* GEMV */
    test_bias_epilogue(8, 256, 32); /* cuBLASLt BIAS */
    test_bias_epilogue(64, 200, 64);
    attn_cases();
    test_logits(1, 1000, 990, 5, 1, 0);
    test_logits(4, 1000, 990, 64, 1, 1);
    test_logits(3, 300, 10, 64, 1, 0); /* fewer valid columns than k: -inf / -1 fill */
    test_logits(5, 515, 515, 1, 0, 1);
    test_logits(2, 51200, 51200, 64, 1, 1);
    test_logits(33, 2000, 1999, 0, 1, 0);
    test_graphs();
    run_decode_graphs();
    test_graph_llama_mlp();
}

int main(int argc, char **argv) {
    if (gpu_test_module_loads()) return 1;
    int n_dev = tp_backend_cuda_device_count();
    if (n_dev == 0) {
        printf("SKIPPED: no CUDA GPU is visible\n");
        return 77;
    }
    if (argc > 1 && strcmp(argv[1], "--oom") == 0) {
        char err[512];
        tp_backend *b = tp_backend_cuda_create(0, TP_F16, err, sizeof err);
        if (!b) { fprintf(stderr, "%s\n", err); return 2; }
        b->alloc(b, (size_t)1 << 52, "a 4 PiB test buffer"); /* dies with the sizes */
        printf("alloc of 4 PiB returned\n");
        return 0;
    }
    const int gemms_only = argc > 2 && strcmp(argv[2], "gemms") == 0;
    if (argc > 3 || (argc > 2 && !gemms_only)) {
        fprintf(stderr, "usage: test_cuda_ops [SEED [gemms]] | --oom\n");
        return 2;
    }
    g_rng = argc > 1 ? strtoull(argv[1], NULL, 10) : (uint64_t)time(NULL);
    printf("seed %llu (rerun: test_cuda_ops %llu); %d GPU(s)\n", (unsigned long long)g_rng,
           (unsigned long long)g_rng, n_dev);
    if (!g_rng) g_rng = 1;
    g_cpu = tp_backend_cpu_create(2);

    char err[512];
    tp_backend *bad = tp_backend_cuda_create(n_dev, TP_F16, err, sizeof err);
    int ok = !bad && strstr(err, "only") && strstr(err, "visible");
    printf("      device ordinal %d of %d refused: %s -> %s\n", n_dev, n_dev, err, ok ? "ok" : "FAIL");
    g_checks++;
    g_fail += !ok;
    bad = tp_backend_cuda_create(0, TP_F32, err, sizeof err);
    ok = !bad && strstr(err, "F16 or BF16");
    printf("      F32 activations refused: %s -> %s\n", err, ok ? "ok" : "FAIL");
    g_checks++;
    g_fail += !ok;

    tp_dtype dts[2] = {TP_F16, TP_BF16};
    for (int i = 0; i < 2; i++) {
        g_gpu = tp_backend_cuda_create(0, dts[i], err, sizeof err);
        if (!g_gpu) {
            printf("FAIL: cannot create the CUDA backend: %s\n", err);
            return 1;
        }
        if (gemms_only) run_gemms();
        else run_all();
        g_gpu->destroy(g_gpu);
    }
    g_cpu->destroy(g_cpu);
    printf("%d of %d checks failed\n", g_fail, g_checks);
    return g_fail ? 1 : 0;
}
