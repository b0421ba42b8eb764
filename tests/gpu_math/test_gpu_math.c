/* gpu_math_on_cpu: the math the CUDA backend shares with the CPU backend (kernels/common/ headers,
 * `__host__ __device__` on the GPU, plain C here) compiled as host code and checked against
 * the CPU backend's results and against references written here that do not use the headers:
 *  - random draws (tp_rng.h): the CPU backend's fill_random equals the header's pairs bit for
 *    bit (odd lengths, threads, seeds); log and sincos are < 1 ulp on every input they can get
 *    (all 2^24 u1 and all 2^24 u2, exhaustively); Box-Muller within 3 ulp of double, tails too.
 *  - rounding (tp_round.h): f32 -> F16 against the compiler's _Float16 conversion and f32 ->
 *    BF16 against a nearest-even rounding done in double, bit for bit, on every F16/BF16 value,
 *    the midpoints between them and +-1 ulp around them, subnormals, overflow, +-inf, NaN.
 *  - exp (tp_act.h): within 1.05 ulp of exp in double on every 61st float, edges (0/inf past
 *    the ends, NaN).
 *  - gelu_new (tp_act.h): the CPU backend's vector loop bit for bit, HF's tanh form in double
 *    to a bound, edge values.
 *  - rmsnorm (tp_norm.h): the row scale and product against HF's formula in double, to bounds
 *    from the rounding analysis, edge rows; the CPU backend's rmsnorm to the same bound when it
 *    has one.
 *  - silu (tp_act.h): silu and silu(gate) * up within 3 / 4 ulp of double, edges; the CPU
 *    backend's silu_mul bit for bit when it has one.
 *  - rotary (tp_rotary.h): the CPU backend's rotary_kv_write bit for bit, GPT-J pairs and
 *    rotate-half with fewer KV heads; sin/cos of the angle within 1 ulp of double.
 *  - logits statistics (tp_logits.h): the CPU backend's logits_stats against a full sort, and
 *    against an emulation of the CUDA backend's radix select on tp_logit_key, exactly, on ties,
 *    -0/+0, +-inf, NaN (leading, trailing, only NaN), fewer valid values than k.
 * The CUDA side of these headers runs only on a GPU (tests/gpu); this test is what CI can check.
 * One line per check; exit 1 on any failure. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/common/tp_act.h"
#include "kernels/common/tp_kv.h"
#include "kernels/common/tp_logits.h"
#include "kernels/common/tp_norm.h"
#include "kernels/common/tp_rng.h"
#include "kernels/common/tp_rotary.h"
#include "kernels/common/tp_round.h"

/* The compiler's IEEE half for the reference conversions. clang before 15 has no _Float16 on
 * x86; its __fp16 is the same format as a storage type, converted with the same rounding. */
#if defined(__clang__) && __clang_major__ < 15
typedef __fp16 half_ref;
#else
typedef _Float16 half_ref;
#endif

static int g_fail = 0, g_checks = 0;

static void report(const char *area, const char *what, int ok, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#include <stdarg.h>
static void report(const char *area, const char *what, int ok, const char *fmt, ...) {
    char msg[256] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    g_checks++;
    if (!ok) g_fail++;
    printf("%-4s %-9s %-52s %s\n", ok ? "ok" : "FAIL", area, what, msg);
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) { /* xorshift64*, independent of the header's generator */
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545f4914f6cdd1dull;
}

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* ulp of the f32 nearest to v (subnormal spacing below 2^-126) */
static double ulp_f32(double v) {
    v = fabs(v);
    if (v < 0x1p-126) return 0x1p-149;
    int e;
    frexp(v, &e); /* v = m 2^e, m in [0.5, 1) */
    return ldexp(1.0, e - 24);
}
static double ulp_err(float got, double exact) { return fabs((double)got - exact) / ulp_f32(exact); }

/* ---------------- random draws ---------------- */

static void test_rng(void) {
    /* log over every u1 the generator makes: m * 2^-24, m = 1 .. 2^24 */
    double worst = 0;
    uint32_t worst_m = 0;
    for (uint32_t m = 1; m <= (1u << 24); m++) {
        const float u = (float)m * 0x1p-24f;
        const double ex = log((double)u);
        const float got = tp_logf_normal(u);
        if (ex == 0.0) {
            if (got != 0.0f) { worst = 1e9; worst_m = m; }
            continue;
        }
        const double e = ulp_err(got, ex);
        if (e > worst) { worst = e; worst_m = m; }
    }
    report("rng", "log(u1) < 1 ulp, all 2^24 u1 in (0,1]", worst < 1.0, "max %.3f ulp (u1 = %u * 2^-24)", worst,
           worst_m);

    /* sin/cos over every u2 = n * 2^-24; the double reference reduces exactly too (n = q 2^22 + m) */
    double ws = 0, wc = 0;
    int zero_bad = 0;
    for (uint32_t n = 0; n < (1u << 24); n++) {
        float s, c;
        tp_sincos_2pi_q24(n, &s, &c);
        const uint32_t qn = (n + (1u << 21)) >> 22;
        const double x = ((double)n - (double)(qn << 22)) / 4194304.0;
        const double s0 = sin(x * M_PI / 2), c0 = cos(x * M_PI / 2);
        const int q = (int)(qn & 3);
        const double es = q == 0 ? s0 : q == 1 ? c0 : q == 2 ? -s0 : -c0;
        const double ec = q == 0 ? c0 : q == 1 ? -s0 : q == 2 ? -c0 : s0;
        if (es == 0.0) zero_bad += s != 0.0f;
        else if (ulp_err(s, es) > ws) ws = ulp_err(s, es);
        if (ec == 0.0) zero_bad += c != 0.0f;
        else if (ulp_err(c, ec) > wc) wc = ulp_err(c, ec);
    }
    report("rng", "sin(2 pi u2), cos(2 pi u2) < 1 ulp, all 2^24 u2", ws < 1.0 && wc < 1.0 && !zero_bad,
           "max sin %.3f, cos %.3f ulp; %d exact zeros missed", ws, wc, zero_bad);

    /* Box-Muller on chosen bits: tails (u1 = 2^-24, the largest |z|), u1 = 1 (z = 0), quadrant
     * edges of u2, and random bits; against double within 3 ulp (log 1 + sqrt 0.5 + cos 1 +
     * product 0.5) of the larger |z| of the pair scale. */
    const uint64_t hi_vals[] = {0, 1, 2, 0xffffff, 0x800000, 0x7fffff, 12345};
    const uint32_t lo_vals[] = {0, 1, 0x3fffff, 0x400000, 0x7fffff, 0x800000, 0xc00000, 0xffffff, 0x200000, 0x1fffff};
    double wz = 0, zmax = 0;
    int n_pairs = 0;
    for (int i = 0; i < 100000 + 70; i++) {
        uint64_t r;
        if (i < 70) r = (hi_vals[i / 10] << 40) | ((rnd() & 0xffff) << 24) | lo_vals[i % 10];
        else r = rnd();
        float z0, z1;
        tp_normal_pair(r, &z0, &z1);
        const double u1 = ((double)(r >> 40) + 1) / 16777216.0, u2 = (double)(r & 0xffffff) / 16777216.0;
        const double rad = sqrt(-2.0 * log(u1));
        const double e0 = rad * cos(2 * M_PI * u2), e1 = rad * sin(2 * M_PI * u2);
        /* errors relative to rad (cos near zero: absolute error of cos is what matters) */
        const double e = fmax(fabs(z0 - e0), fabs(z1 - e1)) / (rad > 0 ? ulp_f32(rad) : 0x1p-149);
        if (rad > 0 && e > wz) wz = e;
        if (fabs(z0) > zmax) zmax = fabs(z0);
        if (fabs(z1) > zmax) zmax = fabs(z1);
        n_pairs++;
    }
    report("rng", "Box-Muller pair vs double, tails and edges", wz <= 3.0 && fabs(zmax - sqrt(48 * log(2.0))) < 1e-5,
           "%d pairs, max %.2f ulp of rad, max |z| %.6f (5.768 expected)", n_pairs, wz, zmax);

    /* the CPU backend's fill_random == the header's pairs, bit for bit (any thread count, odd n) */
    const size_t n = 100003;
    float *a = malloc(n * 4), *ref = malloc(n * 4);
    const uint64_t seeds[] = {0, 42, 0xffffffffffffffffull};
    for (int th = 1; th <= 2; th++) {
        tp_backend *b = tp_backend_cpu_create(th);
        for (int si = 0; si < 3; si++) {
            const float mean = si == 1 ? 0.25f : 0.0f, sd = si == 2 ? 1.0f : 0.02f;
            b->fill_random(b, a, n, seeds[si], mean, sd);
            const uint64_t key = tp_rng_key(seeds[si]);
            for (size_t j = (n + 1) / 2; j-- > 0;) { /* another order than the backend's */
                float x0, x1;
                tp_fill_random_pair(key, j, mean, sd, &x0, &x1);
                ref[2 * j] = x0;
                if (2 * j + 1 < n) ref[2 * j + 1] = x1;
            }
            size_t diff = 0;
            for (size_t i = 0; i < n; i++) diff += fbits(a[i]) != fbits(ref[i]);
            char what[96];
            snprintf(what, sizeof what, "CPU fill_random == header, %d thr, seed %llu", th,
                     (unsigned long long)seeds[si]);
            report("rng", what, diff == 0, "%zu of %zu differ", diff, n);
        }
        b->destroy(b);
    }
    /* the draw of the old CUDA kernel (32-bit split, double, one draw per element) is gone: the
     * pair structure means element 2j+1 is the sine half of the same u1, u2 as element 2j */
    {
        const uint64_t key = tp_rng_key(7), r = tp_rng_bits(key, 5);
        float z0, z1, x0, x1;
        tp_normal_pair(r, &z0, &z1);
        tp_fill_random_pair(key, 5, 0.0f, 1.0f, &x0, &x1);
        report("rng", "one pair per two elements (2j: cos, 2j+1: sin)", x0 == z0 && x1 == z1, "%g %g", x0, x1);
    }
    free(a);
    free(ref);
}

/* ---------------- rounding ---------------- */

/* nearest-even rounding of a finite double to the grid of a format with `mant` stored bits,
 * exponent bias `bias`, max finite `maxf`; returns the rounded value (inf on overflow). */
static double round_ref(double v, int mant, int emin, double maxf) {
    if (v == 0) return v;
    const double a = fabs(v);
    int e;
    frexp(a, &e);      /* a = m 2^e, m in [0.5, 1): a in [2^(e-1), 2^e) */
    int ex = e - 1;     /* a in [2^ex, 2^(ex+1)) */
    if (ex < emin) ex = emin; /* subnormal spacing */
    const double q = ldexp(1.0, ex - mant);
    double k = floor(a / q), rem = a - k * q;
    if (rem > q / 2 || (rem == q / 2 && fmod(k, 2.0) == 1.0)) k += 1;
    double r = k * q;
    const double half_ulp_max = ldexp(1.0, (int)ilogb(maxf) - mant - 1);
    if (r > maxf || a >= maxf + half_ulp_max) r = INFINITY;
    return v < 0 ? -r : r;
}

/* NaN f as the 16 bits h: a quiet NaN (exponent bits exp all set, the mantissa's top bit quiet)
 * with f's sign; a bad one is counted in *nan_bad */
static int nan_kept(uint16_t h, float f, uint16_t exp, uint16_t quiet, int *nan_bad) {
    const int ok = (h & exp) == exp && (h & quiet) && ((h >> 15) == (fbits(f) >> 31));
    if (!ok) (*nan_bad)++;
    return ok;
}

static int check_f16(float f, int *nan_bad) {
    const uint16_t h = tp_f32_to_f16(f);
    if (f != f) return nan_kept(h, f, 0x7c00, 0x200, nan_bad);
    const half_ref c = (half_ref)f;
    uint16_t hc;
    memcpy(&hc, &c, 2);
    const double r = round_ref(f, 10, -14, 65504.0);
    const float back = tp_f16_to_f32(h);
    return h == hc && (back == (float)r || (isinf(r) && isinf(back))) && signbit(back) == signbit(f);
}

static int check_bf16(float f, int *nan_bad) {
    const uint16_t h = tp_f32_to_bf16(f);
    if (f != f) return nan_kept(h, f, 0x7f80, 0x40, nan_bad);
    const double r = round_ref(f, 7, -126, bitsf(0x7f7f0000u));
    const float back = tp_bf16_to_f32(h);
    return (back == (float)r || (isinf(r) && isinf(back) && signbit(r) == signbit(back))) && signbit(back) == signbit(f);
}

static void test_round(void) {
    /* every F16 value, the midpoint to the next one, and +-1 f32 ulp around both */
    int bad16 = 0, badb = 0, nan16 = 0, nanb = 0, n = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        const float v = tp_f16_to_f32((uint16_t)h);
        half_ref c;
        const uint16_t hh = (uint16_t)h;
        memcpy(&c, &hh, 2);
        if ((h & 0x7c00) != 0x7c00 && fbits(v) != fbits((float)c)) bad16++; /* widening is exact */
        if ((h & 0x7fff) >= 0x7c00) continue;
        const float nx = tp_f16_to_f32((uint16_t)((h & 0x7fff) == 0x7bff ? h : h + 1));
        const float mid = (float)(((double)v + (double)nx) / 2);
        const float pts[6] = {v, mid, nextafterf(mid, INFINITY), nextafterf(mid, -INFINITY), nextafterf(v, 0),
                              nextafterf(v, INFINITY)};
        for (int i = 0; i < 6; i++, n++) bad16 += !check_f16(pts[i], &nan16);
    }
    for (uint32_t h = 0; h < 0x10000; h++) { /* every BF16 value and its midpoints */
        const float v = tp_bf16_to_f32((uint16_t)h);
        if ((h & 0x7f80) == 0x7f80) continue;
        const float mid = bitsf(fbits(v) + 0x8000u);
        const float pts[4] = {v, mid, bitsf(fbits(mid) + 1), bitsf(fbits(mid) - 1)};
        for (int i = 0; i < 4; i++, n++) badb += !check_bf16(pts[i], &nanb);
    }
    for (int i = 0; i < (1 << 22); i++, n++) { /* random bit patterns, NaNs and subnormals included */
        const float f = bitsf((uint32_t)rnd());
        bad16 += !check_f16(f, &nan16);
        badb += !check_bf16(f, &nanb);
    }
    const float edge[] = {65504.0f, 65519.99f, 65520.0f, 1e30f, INFINITY, -INFINITY, 0x1p-24f, 0x1p-25f,
                          0x1.000002p-25f, 0x1.8p-24f, 0x1p-14f, 0x1.ff8p-15f, -0.0f, 0x1p-149f, -0x1p-126f,
                          3.3895314e38f, 3.4028235e38f, NAN, -NAN, bitsf(0x7f800001u), bitsf(0xff800001u)};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++, n++) {
        bad16 += !check_f16(edge[i], &nan16);
        badb += !check_bf16(edge[i], &nanb);
    }
    report("round", "f32->F16 == _Float16 cast == nearest-even ref", bad16 == 0, "%d of %d wrong (%d NaN)", bad16, n,
           nan16);
    report("round", "f32->BF16 == nearest-even ref (subnormals, inf)", badb == 0, "%d of %d wrong (%d NaN)", badb, n,
           nanb);
    /* the host conversion of kernels/dtype.h (loaders, comm) is the same function */
    float src[4] = {1.0f / 3, -65520.0f, NAN, 0x1.8p-24f};
    uint16_t d16[4], db[4];
    tp_convert_from_f32(d16, TP_F16, src, 4);
    tp_convert_from_f32(db, TP_BF16, src, 4);
    int same = 1;
    for (int i = 0; i < 4; i++) same &= d16[i] == tp_f32_to_f16(src[i]) && db[i] == tp_f32_to_bf16(src[i]);
    report("round", "dtype.h tp_convert_from_f32 == header", same, "%04x %04x %04x %04x", d16[0], d16[1], d16[2],
           d16[3]);
}

/* ---------------- exp (tp_act.h) ---------------- */

/* tp_expf against exp in double on every 61st float bit pattern (70 M values, both signs, every
 * exponent; the sweep over all 2^32 measured 1.042 ulp at most), and its edges. */
static void test_expf(void) {
    double worst = 0;
    float wx = 0;
    long n = 0, range_bad = 0;
    for (uint64_t u = 0; u <= 0xffffffffu; u += 61) {
        const float x = bitsf((uint32_t)u);
        if (!isfinite(x)) continue;
        const float y = tp_expf(x);
        const double ref = exp((double)x);
        n++;
        if (ref > 0x1.fffffep127) { range_bad += !(y == INFINITY || y == 0x1.fffffep127f); continue; }
        const double e = ulp_err(y, ref);
        if (e > worst) worst = e, wx = x;
    }
    int edge_bad = 0;
    edge_bad += !(tp_expf(0.0f) == 1.0f && tp_expf(-0.0f) == 1.0f);
    edge_bad += !(tp_expf(INFINITY) == INFINITY && tp_expf(1e30f) == INFINITY && tp_expf(89.0f) == INFINITY);
    edge_bad += !(tp_expf(-INFINITY) == 0.0f && tp_expf(-1e30f) == 0.0f && tp_expf(-104.0f) == 0.0f);
    edge_bad += !isnan(tp_expf(NAN)) + !isnan(tp_expf(-NAN));
    edge_bad += !(isfinite(tp_expf(88.72f)) && tp_expf(-87.5f) > 0.0f && tp_expf(-87.5f) < 0x1p-126f);
    report("exp", "tp_expf vs exp in double (<= 1.05 ulp)", worst <= 1.05 && range_bad == 0,
           "max %.3f ulp at %a over %ld values, %ld overflow wrong", worst, wx, n, range_bad);
    report("exp", "edges: +-0, +-inf, +-1e30, 89, -104, NaN, subnormal", edge_bad == 0, "%d wrong", edge_bad);
}

/* ---------------- gelu_new ---------------- */

static void test_gelu(tp_backend *b) {
    enum { N = 200000 };
    float *x = malloc(N * 4), *y = malloc(N * 4);
    const float edge[] = {0.0f, -0.0f, 1e-40f, -1e-40f, 0x1p-149f, 1.0f, -1.0f, 3.0f, -3.0f, 10.0f, -10.0f,
                          -20.0f, -100.0f, 100.0f, 1e30f, -1e30f, INFINITY, -INFINITY, NAN};
    const int ne = (int)(sizeof edge / sizeof edge[0]);
    for (int i = 0; i < N; i++) {
        if (i < ne) x[i] = edge[i];
        else if (i < N / 2) x[i] = (float)(((double)(rnd() >> 11) / 9007199254740992.0 * 2 - 1) * 12);
        else x[i] = bitsf((uint32_t)rnd() & 0xbfffffffu); /* |x| < 2, every exponent, both signs */
    }
    memcpy(y, x, N * 4);
    b->gelu_new(b, y, N);
    double w_cpu = 0, w_ref = 0;
    int edge_bad = 0;
    for (int i = 0; i < N; i++) {
        const float h = tp_gelu_new(x[i]);
        if (isnan(h) || isnan(y[i])) {
            if (isnan(h) != isnan(y[i])) w_cpu = 1e9;
        } else if (fbits(h) != fbits(y[i])) w_cpu = fmax(w_cpu, fmax(ulp_err(y[i], h), 1e-3)); /* -0 vs +0 too */
        if (!isfinite(x[i]) || !isfinite(h)) continue;
        const double a = x[i], u = 0.7978845608028654 * (a + 0.044715 * a * a * a);
        /* HF's 0.5 a (1 + tanh u), evaluated in double as a / (1 + exp(-2u)) (the same function;
         * 1 + tanh u cancels to 0 in double too for u < -19) */
        const double ex = exp(-2 * u), ref = a / (1.0 + ex);
        /* f32 evaluation of u (a few ulp of u) moves the result by |d gelu/du| * du */
        const double dgdu = 2 * fabs(a) * ex / ((1.0 + ex) * (1.0 + ex));
        /* + 2^-124: below x = -10 the f32 exp overflows and the result is -0 instead of a value
         * under |x| / FLT_MAX = 3e-38 (HF's f32 tanh form is 0 from x = -9 on: 1 + tanh u rounds
         * to 0 there) */
        const double tol = 4 * ulp_f32(ref) + dgdu * 4 * ulp_f32(fabs(u) + 1e-38) + 0x1p-124;
        if (fabs(h - ref) > tol && fabs(h - ref) / tol > w_ref) {
            w_ref = fabs(h - ref) / tol;
            if (getenv("GELU_DEBUG")) printf("x %a h %a ref %a tol %g\n", a, h, ref, tol);
        }
    }
    edge_bad += !(tp_gelu_new(0.0f) == 0.0f);
    edge_bad += !(tp_gelu_new(INFINITY) == INFINITY);
    edge_bad += !isnan(tp_gelu_new(-INFINITY));
    edge_bad += !isnan(tp_gelu_new(NAN));
    edge_bad += !(tp_gelu_new(-100.0f) == 0.0f && signbit(tp_gelu_new(-100.0f)));
    edge_bad += !(tp_gelu_new(1e-40f) == 1e-40f / 2);
    edge_bad += !(tp_gelu_new(100.0f) == 100.0f);
    report("gelu", "CPU backend gelu_new (vector loop) == header, bits", w_cpu == 0, "max %.3f ulp over %d values", w_cpu, N);
    report("gelu", "header vs HF formula in double (4 ulp + du)", w_ref == 0, "worst %.2f x the bound", w_ref);
    report("gelu", "edges: 0, +inf, -inf->NaN, NaN, -100->-0, subnormal/2", edge_bad == 0, "%d wrong", edge_bad);
    /* matmul_gelu (fc_in + GELU, fused on a GPU) == matmul then gelu_new on the CPU, bit for bit */
    {
        const int T = 5, Nn = 37, K = 24;
        float *xx = malloc(T * K * 4), *W = malloc(Nn * K * 4), *bias = malloc(Nn * 4), *y1 = malloc(T * Nn * 4),
              *y2 = malloc(T * Nn * 4);
        for (int i = 0; i < T * K; i++) xx[i] = (float)((double)(rnd() >> 11) / 9007199254740992.0 * 4 - 2);
        for (int i = 0; i < Nn * K; i++) W[i] = (float)((double)(rnd() >> 11) / 9007199254740992.0 - 0.5);
        for (int i = 0; i < Nn; i++) bias[i] = (float)((double)(rnd() >> 11) / 9007199254740992.0 - 0.5);
        b->matmul_gelu(b, y1, xx, W, bias, T, Nn, K);
        b->matmul(b, y2, xx, W, bias, T, Nn, K, 0);
        b->gelu_new(b, y2, (size_t)T * Nn);
        report("gelu", "CPU matmul_gelu == matmul then gelu_new", memcmp(y1, y2, (size_t)T * Nn * 4) == 0, "%dx%dx%d", T,
               Nn, K);
        free(xx); free(W); free(bias); free(y1); free(y2);
    }
    free(x);
    free(y);
}

/* ---------------- RMSNorm (tp_norm.h) ----------------
 * Rows of chosen values against HF's formula in double. Two bounds from the rounding analysis
 * (u = 2^-24, each correctly rounded f32 operation errs by <= u relative, and an error of r u
 * relative is < r ulp):
 *  - the header alone, given the f32 sum of squares it was handed: inv = 1/sqrt(s/E + eps) in
 *    four operations (< 3 ulp: the sqrt halves what comes before it), y = x inv g two more (< 5);
 *  - the whole row, the f32 sum included: a sum of E positive terms errs by <= E u, halved by
 *    the sqrt, so y is within 5 + E/2 ulp of the exact value (the bound any summation order
 *    meets: the CPU backend's and a GPU block's).
 * Edge rows: zeros, subnormals, an x^2 that overflows, +-inf, NaN. */
static double rms_ref_inv(const float *x, int E, float eps) {
    double s = 0;
    for (int i = 0; i < E; i++) s += (double)x[i] * x[i];
    return 1.0 / sqrt(s / E + (double)eps);
}

static void rms_header_row(const float *x, const float *g, int E, float eps, float *y) {
    float s = 0.0f;
    for (int i = 0; i < E; i++) s = tp_sumsq_add(s, x[i]);
    const float inv = tp_rms_inv(s, E, eps);
    for (int i = 0; i < E; i++) y[i] = tp_rms_apply(x[i], inv, g[i]);
}

/* worst error of y against the exact row, in units of the bound (<= 1 passes); NaN/inf must agree */
static double rms_row_err(const float *x, const float *g, const float *y, int E, float eps, double bound_ulp,
                          int *nonfinite_bad) {
    const double inv = rms_ref_inv(x, E, eps);
    double w = 0;
    for (int i = 0; i < E; i++) {
        const double ref = (double)x[i] * inv * g[i];
        if (!isfinite(ref) || !isfinite(y[i])) {
            *nonfinite_bad += !(isnan(ref) && isnan(y[i])) && !((double)y[i] == ref);
            continue;
        }
        const double e = fabs(y[i] - ref) / (bound_ulp * ulp_f32(ref));
        if (e > w) w = e;
    }
    return w;
}

static void test_rmsnorm(tp_backend *b) {
    enum { EMAX = 4096 };
    float *x = malloc(EMAX * 4), *g = malloc(EMAX * 4), *y = malloc(EMAX * 4), *yb = malloc(EMAX * 4);
    const int Es[] = {1, 2, 7, 64, 1000, 4096};
    const float scales[] = {1.0f, 1e-3f, 1e3f, 1e15f, 1e-30f};
    const float eps[] = {1e-5f, 1e-6f};
    double w_hdr_inv = 0, w_hdr_y = 0, w_row = 0, w_cpu = 0;
    int nf_bad = 0, rows = 0;
    for (int ie = 0; ie < 6; ie++)
        for (int is = 0; is < 5; is++)
            for (int k = 0; k < 2; k++) {
                const int E = Es[ie];
                for (int i = 0; i < E; i++) {
                    x[i] = scales[is] * (float)((double)(rnd() >> 11) / 9007199254740992.0 * 4 - 2);
                    g[i] = (float)((double)(rnd() >> 11) / 9007199254740992.0 * 3 - 1); /* negative, ~0 too */
                }
                if (E > 3) g[3] = 0.0f;
                rms_header_row(x, g, E, eps[k], y);
                /* the header alone, from its own f32 sum */
                float s = 0.0f;
                for (int i = 0; i < E; i++) s = tp_sumsq_add(s, x[i]);
                const float inv = tp_rms_inv(s, E, eps[k]);
                const double inv_ex = 1.0 / sqrt((double)s / E + (double)eps[k]);
                w_hdr_inv = fmax(w_hdr_inv, ulp_err(inv, inv_ex) / 3.0);
                for (int i = 0; i < E; i++) {
                    const double ref = (double)x[i] * inv_ex * g[i];
                    if (ref != 0.0) w_hdr_y = fmax(w_hdr_y, ulp_err(y[i], ref) / 5.0);
                    else if (y[i] != 0.0f) w_hdr_y = 1e9;
                }
                w_row = fmax(w_row, rms_row_err(x, g, y, E, eps[k], 5.0 + E / 2.0, &nf_bad));
                if (b->rmsnorm) { /* the CPU backend (f32), in place on odd rows */
                    memcpy(yb, x, (size_t)E * 4);
                    b->rmsnorm(b, yb, (rows & 1) ? yb : x, g, 1, E, eps[k]);
                    w_cpu = fmax(w_cpu, rms_row_err(x, g, yb, E, eps[k], 5.0 + E / 2.0, &nf_bad));
                }
                rows++;
            }
    report("rmsnorm", "header inv = 1/sqrt(s/E + eps) vs double (< 3 ulp)", w_hdr_inv <= 1.0,
           "worst %.2f x the bound over %d rows", w_hdr_inv, rows);
    report("rmsnorm", "header y = x inv g vs double, same sum (< 5 ulp)", w_hdr_y <= 1.0, "worst %.2f x the bound",
           w_hdr_y);
    report("rmsnorm", "header row vs HF in double (< 5 + E/2 ulp)", w_row <= 1.0 && nf_bad == 0,
           "worst %.2f x the bound, %d non-finite wrong", w_row, nf_bad);
    if (b->rmsnorm)
        report("rmsnorm", "CPU backend rmsnorm vs HF in double (< 5 + E/2 ulp)", w_cpu <= 1.0 && nf_bad == 0,
               "worst %.2f x the bound", w_cpu);
    else
        report("rmsnorm", "CPU backend rmsnorm", 1, "not in this backend (NULL): header checked alone");

    /* edge rows (E = 4, g = 1): expected values written out */
    const float one[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    int edge_bad = 0;
    struct { float x[4]; int kind; } er[] = {
        {{0.0f, -0.0f, 0.0f, 0.0f}, 0},          /* zeros -> zeros */
        {{1e-40f, -1e-40f, 0x1p-149f, 0.0f}, 1}, /* subnormals: x^2 underflows, inv = 1/sqrt(eps) */
        {{1e20f, 1.0f, -2.0f, 0.0f}, 2},         /* x^2 overflows: sumsq inf, inv 0 -> zeros */
        {{INFINITY, 1.0f, 0.0f, 0.0f}, 3},       /* inf * 0 -> NaN for the inf, 0 elsewhere */
        {{NAN, 1.0f, 2.0f, 3.0f}, 4},            /* NaN row */
    };
    for (int r = 0; r < 5; r++) {
        float yy[4];
        rms_header_row(er[r].x, one, 4, 1e-5f, yy);
        for (int i = 0; i < 4; i++) {
            const float xi = er[r].x[i];
            int ok;
            switch (er[r].kind) {
            case 0: ok = yy[i] == 0.0f && signbit(yy[i]) == signbit(xi); break;
            case 1: ok = xi == 0.0f ? yy[i] == 0.0f : ulp_err(yy[i], xi / sqrt((double)1e-5f)) < 3; break;
            case 2: ok = yy[i] == 0.0f; break;
            case 3: ok = isinf(xi) ? isnan(yy[i]) : yy[i] == 0.0f; break;
            default: ok = isnan(yy[i]); break;
            }
            edge_bad += !ok;
        }
    }
    report("rmsnorm", "edges: zeros, subnormals, x^2 overflow, inf, NaN", edge_bad == 0, "%d wrong", edge_bad);
    free(x); free(g); free(y); free(yb);
}

/* ---------------- SiLU and the gated MLP (tp_act.h) ----------------
 * tp_silu against z / (1 + exp(-z)) in double: <= 3 ulp (exp's 1.05 ulp, shrunk by e / (1 + e),
 * plus the sum's and the division's half ulps), + 2^-120 absolute where the header gives -0 for
 * z below ~-88 (the exact value is under 88 e^-88 ~ 2^-121); tp_silu_mul one more rounding
 * (<= 4 ulp). The CPU backend's silu_mul, when it has one, must be the header bit for bit (an
 * element-wise op: no summation order to differ). */
static void test_silu(tp_backend *b) {
    enum { N = 200000 };
    float *z = malloc(N * 4), *u = malloc(N * 4);
    const float edge[] = {0.0f, -0.0f, 1e-40f, -1e-40f, 0x1p-149f, 1.0f, -1.0f, 10.0f, -10.0f, 87.0f, -87.0f, 88.7f,
                          -88.7f, -89.0f, -100.0f, -104.0f, 100.0f, 1e30f, -1e30f, INFINITY, -INFINITY, NAN};
    const int ne = (int)(sizeof edge / sizeof edge[0]);
    for (int i = 0; i < N; i++) {
        if (i < ne) z[i] = edge[i];
        else if (i < N / 2) z[i] = (float)(((double)(rnd() >> 11) / 9007199254740992.0 * 2 - 1) * 30);
        else z[i] = bitsf((uint32_t)rnd() & 0xbfffffffu); /* |z| < 2, every exponent, both signs */
        u[i] = (float)((double)(rnd() >> 11) / 9007199254740992.0 * 6 - 3);
    }
    double w_s = 0, w_m = 0;
    for (int i = 0; i < N; i++) {
        if (!isfinite(z[i])) continue;
        const double zd = z[i], ref = zd / (1.0 + exp(-zd)), refm = ref * u[i];
        const float s = tp_silu(z[i]), m = tp_silu_mul(z[i], u[i]);
        const double es = fabs(s - ref) / (3 * ulp_f32(ref) + 0x1p-120);
        const double em = fabs(m - refm) / (4 * ulp_f32(refm) + 0x1p-120 * fabs(u[i]) + (refm == 0 ? 0x1p-149 : 0));
        if (es > w_s) w_s = es;
        if (em > w_m) w_m = em;
    }
    int edge_bad = 0;
    edge_bad += !(tp_silu(0.0f) == 0.0f && !signbit(tp_silu(0.0f)) && signbit(tp_silu(-0.0f)));
    edge_bad += !(tp_silu(INFINITY) == INFINITY && tp_silu(1e30f) == 1e30f && tp_silu(100.0f) == 100.0f);
    edge_bad += !isnan(tp_silu(-INFINITY)) + !isnan(tp_silu(NAN)) + !isnan(tp_silu_mul(1.0f, NAN));
    edge_bad += !(tp_silu(-100.0f) == 0.0f && signbit(tp_silu(-100.0f)));
    edge_bad += !(tp_silu(1e-40f) == 1e-40f / 2); /* z / 2 near 0 */
    edge_bad += !(tp_silu_mul(2.0f, 0.0f) == 0.0f && tp_silu_mul(0.0f, 5.0f) == 0.0f);
    report("silu", "tp_silu vs z/(1+exp(-z)) in double (<= 3 ulp)", w_s <= 1.0, "worst %.2f x the bound over %d", w_s,
           N);
    report("silu", "tp_silu_mul vs silu(g) u in double (<= 4 ulp)", w_m <= 1.0, "worst %.2f x the bound", w_m);
    report("silu", "edges: +-0, +inf, -inf->NaN, NaN, -100->-0, subnormal/2", edge_bad == 0, "%d wrong", edge_bad);
    if (b->silu_mul) { /* gu = [T, 2N]: gate row then up row */
        const int T = 3, Nn = N / 6;
        float *gu = malloc((size_t)T * 2 * Nn * 4), *y = malloc((size_t)T * Nn * 4);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < Nn; i++) {
                gu[(size_t)t * 2 * Nn + i] = z[t * Nn + i];
                gu[(size_t)t * 2 * Nn + Nn + i] = u[t * Nn + i];
            }
        b->silu_mul(b, y, gu, T, Nn);
        long diff = 0;
        for (int t = 0; t < T; t++)
            for (int i = 0; i < Nn; i++) {
                const float h = tp_silu_mul(z[t * Nn + i], u[t * Nn + i]), c = y[(size_t)t * Nn + i];
                diff += isnan(h) ? !isnan(c) : fbits(h) != fbits(c);
            }
        report("silu", "CPU backend silu_mul == header, bits", diff == 0, "%ld of %d differ", diff, T * Nn);
        free(gu); free(y);
    } else {
        report("silu", "CPU backend silu_mul", 1, "not in this backend (NULL): header checked alone");
    }
    free(z); free(u);
}

/* ---------------- rotary ---------------- */

/* One style and KV-head count: the CPU backend's rotary_kv_write against the header applied here. */
static void test_rotary_case(tp_backend *b, int Hkl, tp_rope_style style, const char *name) {
    const int Hl = 2, D = 10, R = 8, T = 6;
    const int32_t pos[] = {0, 1, 7, 2047, 65535, 1000000};
    const int32_t seq[] = {0, 1, 2, 3, 4, 5};
    /* block_size 1: position p of sequence s is block p of row s, which holds block id s (every
     * other entry -1), so token t's slot is t */
    const int max_blocks = 1000001;
    int32_t *btab = malloc((size_t)6 * max_blocks * 4);
    for (int s = 0; s < 6; s++)
        for (int j = 0; j < max_blocks; j++) btab[(size_t)s * max_blocks + j] = j == pos[s] ? s : -1;
    tp_step st = {.n_tokens = T, .n_seqs = 6, .block_size = 1, .max_blocks = max_blocks, .max_pos = 1000000,
                  .pos = pos, .seq = seq, .block_table = btab};
    const size_t QD = (size_t)Hl * D, KD = (size_t)Hkl * D, row = QD + 2 * KD;
    float *qkv = malloc(T * row * 4), *ref = malloc(T * row * 4), *kc = malloc(6 * KD * 4), *vc = malloc(6 * KD * 4);
    for (size_t i = 0; i < T * row; i++) qkv[i] = ref[i] = (float)((double)(rnd() >> 11) / 9007199254740992.0 * 4 - 2);
    b->rotary_kv_write(b, qkv, kc, vc, &st, &(tp_attn_shape){Hl, Hkl, D, R, style, 10000.0f});
    int diff = 0;
    double w_sc = 0, w_inv = 0;
    for (int t = 0; t < T; t++)
        for (int h = 0; h < Hl + Hkl; h++) { /* q heads, then k heads */
            float *x = ref + (size_t)t * row + (size_t)h * D;
            for (int i = 0; i < R / 2; i++) {
                const float inv = tp_rope_inv_freq(i, R, 10000.0f), ang = tp_rope_angle(pos[t], inv);
                float sn, cs;
                tp_rope_sincos(ang, &sn, &cs);
                /* the pairs written out here, not through tp_rope_pair_a/b */
                const int a = style == TP_ROPE_NEOX ? i : 2 * i, bb = style == TP_ROPE_NEOX ? i + R / 2 : 2 * i + 1;
                tp_rope_rotate(&x[a], &x[bb], cs, sn);
                w_sc = fmax(w_sc, fmax(ulp_err(sn, sin((double)ang)), ulp_err(cs, cos((double)ang))));
                w_inv = fmax(w_inv, ulp_err(inv, pow(10000.0, -(2.0 * i) / R)));
            }
        }
    for (size_t i = 0; i < T * row; i++) diff += fbits(qkv[i]) != fbits(ref[i]);
    for (int t = 0; t < T; t++) {
        diff += memcmp(kc + (size_t)t * KD, ref + (size_t)t * row + QD, KD * 4) != 0;
        diff += memcmp(vc + (size_t)t * KD, ref + (size_t)t * row + QD + KD, KD * 4) != 0;
    }
    char what[96];
    snprintf(what, sizeof what, "CPU rotary_kv_write == header, %s, pos to 1e6", name);
    report("rotary", what, diff == 0, "%d values differ", diff);
    if (style == TP_ROPE_GPTJ && Hkl == Hl) {
        report("rotary", "sin/cos of the f32 angle < 1 ulp", w_sc < 1.0, "max %.3f ulp", w_sc);
        report("rotary", "inv_freq = 1/10000^(2i/R) <= 1 ulp", w_inv <= 1.0, "max %.3f ulp", w_inv);
    }
    free(btab);
    free(qkv);
    free(ref);
    free(kc);
    free(vc);
}

static void test_rotary(tp_backend *b) {
    test_rotary_case(b, 2, TP_ROPE_GPTJ, "GPT-J pairs");
    test_rotary_case(b, 1, TP_ROPE_NEOX, "rotate-half, 1 KV head");
}

/* ---------------- KV cache index ---------------- */

/* tp_kv_row/tp_kv_pos_row against the layout written out: walking [blk][g][j][d] in order must give
 * offsets 0, 1, 2, ... (head-contiguous: a head's slots of a block are one run), and position p
 * of a sequence lands in its table's block p / bs, slot p % bs. */
static void test_kv_index(void) {
    const int n_blocks = 5, Hkl = 3, bs = 4, D = 6;
    size_t want = 0, bad = 0;
    for (int blk = 0; blk < n_blocks; blk++)
        for (int g = 0; g < Hkl; g++)
            for (int j = 0; j < bs; j++, want += D) bad += tp_kv_row(blk, g, j, Hkl, bs, D) != want;
    report("kv", "tp_kv_row walks [n_blocks][Hkl][bs][D] in order", bad == 0, "%zu rows misplaced", bad);
    const int32_t bt[] = {3, 0, 4};
    bad = 0;
    for (int p = 0; p < 3 * bs; p++)
        for (int g = 0; g < Hkl; g++)
            bad += tp_kv_pos_row(bt, p, g, Hkl, bs, D) != (((size_t)bt[p / bs] * Hkl + g) * bs + p % bs) * D;
    report("kv", "tp_kv_pos_row: block bt[p / bs], slot p % bs", bad == 0, "%zu positions misplaced", bad);
}

/* ---------------- logits statistics ---------------- */

typedef struct { float v; int c; } vc_t;
static int cmp_rank(const void *pa, const void *pb) {
    const vc_t *a = pa, *b = pb;
    return tp_logit_before(a->v, a->c, b->v, b->c) ? -1 : tp_logit_before(b->v, b->c, a->v, a->c) ? 1 : 0;
}

/* Reference 1: sort every non-NaN (value, column) by the rank order. */
static void ref_sort(const float *l, int n, int k, float *tv, int32_t *ti) {
    vc_t *a = malloc((size_t)(n + 1) * sizeof *a);
    int m = 0;
    for (int c = 0; c < n; c++)
        if (!isnan(l[c])) a[m++] = (vc_t){l[c], c};
    qsort(a, (size_t)m, sizeof *a, cmp_rank);
    for (int j = 0; j < k; j++) {
        tv[j] = j < m ? a[j].v : -INFINITY;
        ti[j] = j < m ? a[j].c : -1;
    }
    free(a);
}

/* Reference 2: the CUDA kernel's algorithm on the host: the key K* of the k-th largest by
 * tp_logit_key (NaN never counted), every element above K*, the lowest columns equal to K*,
 * then each candidate ranked by counting tp_logit_before among the candidates. */
static void ref_radix(const float *l, int n, int k, float *tv, int32_t *ti) {
    int nn = 0;
    for (int c = 0; c < n; c++) nn += !isnan(l[c]);
    const int ke = k < nn ? k : nn;
    for (int j = 0; j < k; j++) { tv[j] = -INFINITY; ti[j] = -1; }
    if (ke == 0) return;
    uint32_t *keys = malloc((size_t)n * 4);
    for (int c = 0; c < n; c++) keys[c] = tp_logit_key(l[c]);
    uint32_t prefix = 0, mask = 0, kk = (uint32_t)ke;
    for (int shift = 24; shift >= 0; shift -= 8) {
        uint32_t hist[256] = {0};
        for (int c = 0; c < n; c++)
            if ((keys[c] & mask) == prefix) hist[(keys[c] >> shift) & 255u]++;
        uint32_t before = 0;
        for (int bn = 255; bn >= 0; bn--) {
            if (before + hist[bn] >= kk) { prefix |= (uint32_t)bn << shift; kk -= before; break; }
            before += hist[bn];
        }
        mask |= 255u << shift;
    }
    float cv[64];
    int ci[64], m = 0, eq = 0;
    for (int c = 0; c < n; c++)
        if (keys[c] > prefix) { cv[m] = l[c]; ci[m] = c; m++; }
    const int n_above = m;
    for (int c = 0; c < n && eq < (int)kk; c++)
        if (keys[c] == prefix) { cv[n_above + eq] = l[c]; ci[n_above + eq] = c; eq++; }
    for (int i = 0; i < ke; i++) {
        int r = 0;
        for (int j = 0; j < ke; j++) r += tp_logit_before(cv[j], ci[j], cv[i], ci[i]);
        tv[r] = cv[i];
        ti[r] = ci[i];
    }
    free(keys);
}

/* LD, n_valid: the rows' stride and valid columns; one_row: each row a call of its own, so that
 * a long row is cut into parts over the threads (cpu_logits.c: rows < threads, n_valid >= 16384)
 * and ties, NaN and inf meet the parts' merge. */
static void test_logits(tp_backend *b, int LD, int n_valid, int one_row) {
    enum { ROWS = 14 };
    float *l = malloc((size_t)ROWS * LD * 4);
    int32_t targets[ROWS];
    for (int r = 0; r < ROWS; r++) {
        float *x = l + (size_t)r * LD;
        for (int c = 0; c < LD; c++) x[c] = (float)(int)(rnd() % 7) - 3.0f; /* many ties */
        for (int c = n_valid; c < LD; c++) x[c] = 1e30f;                   /* padding: ignored */
        targets[r] = r % 3 == 0 ? -1 : (int)(rnd() % LD);
        switch (r) {
        case 0: break;                                              /* ties only */
        case 1: x[0] = NAN; x[1] = NAN; break;                      /* leading NaN */
        case 2: x[n_valid - 1] = NAN; x[5] = INFINITY; x[9] = INFINITY; break;
        case 3: for (int c = 0; c < n_valid; c++) x[c] = NAN; break; /* only NaN */
        case 4: for (int c = 0; c < n_valid; c++) x[c] = -INFINITY; x[7] = -0.0f; x[3] = 0.0f; break;
        case 5: for (int c = 0; c < n_valid; c++) x[c] = c % 2 ? NAN : -INFINITY; x[100] = 1.0f; break;
        case 6: for (int c = 0; c < n_valid; c++) x[c] = c % 2 ? -0.0f : 0.0f; break;
        case 7: for (int c = 0; c < n_valid; c++) x[c] = (float)((double)(rnd() >> 11) / 9007199254740992.0 * 20 - 10); break;
        case 8: x[17] = -INFINITY; x[3] = 1e-45f; x[4] = -1e-45f; break; /* subnormals */
        case 9: for (int c = 0; c < n_valid; c++) x[c] = c < 40 ? (float)c : NAN; break; /* 40 < k valid */
        case 10: for (int c = 0; c < n_valid; c++) x[c] = NAN; x[n_valid - 1] = 2.0f; x[n_valid - 2] = 2.0f; break;
        default: for (int c = 0; c < n_valid; c++) x[c] = (float)(rnd() % 3); break;
        }
    }
    float mx[ROWS], se[ROWS], tgt[ROWS], topv[ROWS * 64], rv[64], rv2[64];
    int32_t topi[ROWS * 64], ri[64], ri2[64];
    const int ks[] = {1, 5, 64};
    int bad_sort = 0, bad_radix = 0, bad_stats = 0;
    for (int ki = 0; ki < 3; ki++) {
        const int kk = ks[ki];
        if (one_row)
            for (int r = 0; r < ROWS; r++)
                b->logits_stats(b, l + (size_t)r * LD, 1, LD, n_valid, kk, targets + r, mx + r, se + r, topv + r * kk,
                                topi + r * kk, tgt + r);
        else b->logits_stats(b, l, ROWS, LD, n_valid, kk, targets, mx, se, topv, topi, tgt);
        for (int r = 0; r < ROWS; r++) {
            const float *x = l + (size_t)r * LD;
            ref_sort(x, n_valid, kk, rv, ri);
            ref_radix(x, n_valid, kk, rv2, ri2);
            for (int j = 0; j < kk; j++) {
                const float v = topv[r * kk + j];
                bad_sort += fbits(v) != fbits(rv[j]) || topi[r * kk + j] != ri[j];
                bad_radix += fbits(rv2[j]) != fbits(rv[j]) || ri2[j] != ri[j];
            }
            /* max: largest non-NaN; sum: NaN iff NaN / +inf max / all -inf; row_ok iff both finite */
            double m = -INFINITY, s = 0;
            int has_nan = 0;
            for (int c = 0; c < n_valid; c++) {
                if (isnan(x[c])) has_nan = 1;
                else if (x[c] > m) m = x[c];
            }
            for (int c = 0; c < n_valid; c++) s += exp((double)x[c] - m);
            const int expect_ok = !has_nan && isfinite(m);
            bad_stats += mx[r] != (float)m;
            bad_stats += expect_ok ? !(fabs(se[r] - s) <= 1e-6 * s) : !isnan(se[r]);
            bad_stats += tp_logits_row_ok(mx[r], se[r]) != expect_ok;
            const int tg = targets[r];
            bad_stats += (tg >= 0 && tg < n_valid) ? fbits(tgt[r]) != fbits(x[tg]) : !isnan(tgt[r]);
        }
    }
    char what[96];
    snprintf(what, sizeof what, "CPU top-k == full sort (ties, -0/+0, inf, NaN; %d columns%s)", n_valid,
             one_row ? ", a row a call" : "");
    report("logits", what, bad_sort == 0, "%d entries differ", bad_sort);
    report("logits", "CUDA radix-select emulation == full sort", bad_radix == 0, "%d entries differ", bad_radix);
    report("logits", "max, sum of exps, target, row_ok rule", bad_stats == 0, "%d wrong", bad_stats);
    /* keys order like the values, -0 == +0, NaN below -inf */
    int kbad = 0;
    for (int i = 0; i < 100000; i++) {
        const float a = bitsf((uint32_t)rnd()), c = bitsf((uint32_t)rnd());
        if (isnan(a) || isnan(c)) continue;
        kbad += (a > c) != (tp_logit_key(a) > tp_logit_key(c)) || (a == c) != (tp_logit_key(a) == tp_logit_key(c));
    }
    kbad += tp_logit_key(-0.0f) != tp_logit_key(0.0f) || tp_logit_key(NAN) >= tp_logit_key(-INFINITY);
    report("logits", "tp_logit_key preserves order; NaN lowest", kbad == 0, "%d wrong", kbad);
    free(l);
}

int main(void) {
    tp_backend *b = tp_backend_cpu_create(2);
    test_rng();
    test_round();
    test_expf();
    test_gelu(b);
    test_rmsnorm(b);
    test_silu(b);
    test_rotary(b);
    test_kv_index();
    test_logits(b, 300, 290, 0);
    test_logits(b, 3 * 8192 + 20, 3 * 8192 + 7, 1); /* 2 parts on 2 threads */
    b->destroy(b);
    printf("%d checks, %d failed\n", g_checks, g_fail);
    return g_fail ? 1 : 0;
}
