/* The CPU backend in bf16: creation, upload, fill_random and every op except the GEMMs
 * (cpu_bf16_gemm.c). Each op reads bf16, computes in f32 and rounds its output once, where the
 * CUDA backend's bf16 path rounds (kernels/cpu/cpu_bf16.h). Built with -ffp-contract=off
 * (kernels/CMakeLists.txt): fill_random, gelu_new and the rotary must give the CUDA backend's
 * bits before rounding. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "kernels/common/tp_act.h"
#include "kernels/common/tp_rotary.h"
#include "kernels/cpu/cpu_attn.h"
#include "kernels/cpu/cpu_bf16.h"
#include "kernels/cpu/cpu_internal.h"

typedef uint16_t bf16;
static inline float b2f(bf16 h) { return tp_bf16_to_f32(h); }
static inline bf16 f2b(float f) { return tp_f32_to_bf16(f); }

/* n elements of st -> bf16 (f16 and f32 through f32, which holds both exactly); src_host may
 * sit at any byte offset (a tensor of a .bin file): loads through kernels/dtype.h. */
static void bf16_upload(tp_backend *b, void *dst, const void *src_host, tp_dtype st, size_t n) {
    bf16 *d = dst;
    if (st == TP_BF16) { memcpy(d, src_host, n * 2); return; }
    #pragma omp parallel for schedule(static) num_threads(cpu_threads(b)) if (n >= CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        float f;
        if (st == TP_F32) f = tp_load_f32(src_host, i);
        else f = tp_f16_to_f32(tp_load_u16(src_host, i));
        d[i] = f2b(f);
    }
}

static void bf16_fill_random(tp_backend *b, void *dst, size_t n, uint64_t seed, float mean, float std) {
    bf16_fill_random_range(b, dst, 0, n, seed, mean, std);
}

static void bf16_embed(tp_backend *b, void *x, const void *wte, const int32_t *ids, int T, int E) {
    bf16 *xo = x;
    const bf16 *w = wte;
    for (int t = 0; t < T; t++) memcpy(xo + (size_t)t * E, w + (size_t)ids[t] * E, (size_t)E * 2);
    (void)b;
}

/* Statistics in double as the f32 backend (two passes), y in f32, rounded once. */
CPU_SIMD_CLONES static void bf16_layernorm(tp_backend *b, void *y, const void *x, const void *g, const void *beta,
                                           int T, int E, float eps) {
    bf16 *yo = y;
    const bf16 *xi = x, *gg = g, *bb = beta;
    #pragma omp parallel for schedule(static) num_threads(cpu_threads(b)) if ((size_t)T * E >= CPU_PAR_MIN)
    for (int t = 0; t < T; t++) {
        const bf16 *xr = xi + (size_t)t * E;
        bf16 *yr = yo + (size_t)t * E;
        double s = 0.0, v = 0.0;
        for (int e = 0; e < E; e++) s += b2f(xr[e]);
        const double mean = s / E;
        for (int e = 0; e < E; e++) {
            const double d = b2f(xr[e]) - mean;
            v += d * d;
        }
        const float m = (float)mean, rstd = (float)(1.0 / sqrt(v / E + (double)eps));
        for (int e = 0; e < E; e++) yr[e] = f2b((b2f(xr[e]) - m) * rstd * b2f(gg[e]) + b2f(bb[e]));
    }
}

/* HF LlamaRMSNorm in bf16: x * rsqrt(mean(x^2) + eps) in f32 (the mean of squares summed in
 * double), rounded to bf16 (`hidden_states.to(input_dtype)`), then weight * that, rounded again --
 * HF's two roundings, so the bits match its bf16 run. */
CPU_SIMD_CLONES static void bf16_rmsnorm(tp_backend *b, void *y, const void *x, const void *g, int T, int E,
                                         float eps) {
    bf16 *yo = y;
    const bf16 *xi = x, *gg = g;
    #pragma omp parallel for schedule(static) num_threads(cpu_threads(b)) if ((size_t)T * E >= CPU_PAR_MIN)
    for (int t = 0; t < T; t++) {
        const bf16 *xr = xi + (size_t)t * E;
        bf16 *yr = yo + (size_t)t * E;
        double s = 0.0;
        for (int e = 0; e < E; e++) {
            const double v = b2f(xr[e]);
            s += v * v;
        }
        const float r = (float)(1.0 / sqrt(s / E + (double)eps));
        for (int e = 0; e < E; e++) yr[e] = f2b(b2f(gg[e]) * b2f(f2b(b2f(xr[e]) * r)));
    }
}

/* HF's act_fn(gate) * up in bf16: silu in f32 (kernels/common/tp_act.h) rounded to bf16, then the
 * product rounded again (two bf16 tensors, two roundings, as torch runs them). */
CPU_SIMD_CLONES static void bf16_silu_mul(tp_backend *b, void *y, const void *gu, int T, int N) {
    bf16 *yo = y;
    const bf16 *in = gu;
    #pragma omp parallel for schedule(static) num_threads(cpu_threads(b)) if ((size_t)T * N >= CPU_PAR_MIN)
    for (int t = 0; t < T; t++) {
        const bf16 *gr = in + (size_t)t * 2 * N, *ur = gr + N;
        bf16 *yr = yo + (size_t)t * N;
        for (int i = 0; i < N; i++) yr[i] = f2b(b2f(f2b(tp_silu(b2f(gr[i])))) * b2f(ur[i]));
    }
}

CPU_SIMD_CLONES static void bf16_gelu_new(tp_backend *b, void *x, size_t n) {
    bf16 *v = x;
    #pragma omp parallel for simd schedule(static) num_threads(cpu_threads(b)) if (n >= CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++) v[i] = f2b(tp_gelu_new(b2f(v[i])));
}

CPU_SIMD_CLONES static void bf16_add(tp_backend *b, void *y, const void *x, size_t n) {
    bf16 *yo = y;
    const bf16 *xi = x;
    #pragma omp parallel for schedule(static) num_threads(cpu_threads(b)) if (n >= CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++) yo[i] = f2b(b2f(yo[i]) + b2f(xi[i]));
}

/* As the f32 backend: in order on one thread when compacting in place (rows[i] >= i). */
static void bf16_gather_rows(tp_backend *b, void *dst, const void *src, const int32_t *rows_host, int n, int E) {
    bf16 *d = dst;
    const bf16 *s = src;
    const size_t row = (size_t)E * 2;
    (void)b;
    for (int i = 0; i < n; i++)
        if (d != s || rows_host[i] != i) memmove(d + (size_t)i * E, s + (size_t)rows_host[i] * E, row);
}

/* q and k rotated in f32 (kernels/common/tp_rotary.h) and rounded back; k and v into the cache. */
static void bf16_rotary_kv_write(tp_backend *b, void *qkv, void *k_cache, void *v_cache, const tp_step *st,
                                 const tp_attn_shape *as) {
    bf16_report(b, 0, "rotary_kv_write", "c (f32 rotation, bf16 cache)");
    const int T = st->n_tokens, Hl = as->n_heads, Hkl = as->n_kv_heads, D = as->head_dim, R = as->rotary_dim;
    const int half = R / 2, style = as->rope_style;
    const size_t QD = (size_t)Hl * D, KD = (size_t)Hkl * D, row = QD + 2 * KD;
    bf16 *base = qkv, *kc = k_cache, *vc = v_cache;
    float inv_freq[half > 0 ? half : 1];
    for (int i = 0; i < half; i++) inv_freq[i] = tp_rope_inv_freq(i, R, as->rope_theta);
    #pragma omp parallel for schedule(static) num_threads(cpu_threads(b)) if ((size_t)T * row >= CPU_PAR_MIN)
    for (int t = 0; t < T; t++) {
        const int pos = st->pos[t];
        float cs[half > 0 ? half : 1], sn[half > 0 ? half : 1];
        for (int i = 0; i < half; i++) tp_rope_sincos(tp_rope_angle(pos, inv_freq[i]), &sn[i], &cs[i]);
        bf16 *q = base + (size_t)t * row, *k = q + QD, *v = k + KD;
        for (int h = 0; h < Hl + Hkl; h++) { /* q heads then k heads: adjacent */
            bf16 *x = q + (size_t)h * D;
            for (int i = 0; i < half; i++) {
                const int ia = tp_rope_pair_a(style, i), ib = tp_rope_pair_b(style, i, R);
                float x0 = b2f(x[ia]), x1 = b2f(x[ib]);
                tp_rope_rotate(&x0, &x1, cs[i], sn[i]);
                x[ia] = f2b(x0);
                x[ib] = f2b(x1);
            }
        }
        cpu_kv_store(kc, vc, TP_BF16, k, v, TP_BF16, st, t, Hkl, D);
    }
}

/* bf16 K/V through the shared attention kernels (kernels/cpu/cpu_attn.h): scores, softmax and the
 * P.V sum in f32, the output rounded once. */
static void bf16_attention(tp_backend *b, void *out, const void *qkv, const void *k_cache, const void *v_cache,
                           const tp_step *st, const tp_attn_shape *as) {
    const int Hl = as->n_heads, Hkl = as->n_kv_heads, D = as->head_dim;
    if (Hkl < 1 || Hl % Hkl) tp_die("cpu attention: %d query heads are not a multiple of %d KV heads", Hl, Hkl);
    const att_isa isa = cpu_attn_isa_pick();
    const int q_max = st->n_tokens < cpu_attn_tile(isa) ? st->n_tokens : cpu_attn_tile(isa);
    char path[96];
    snprintf(path, sizeof path, "%s (bf16 K/V, f32 scores and online softmax)", cpu_attn_kernel_name(isa, 1, q_max));
    bf16_report(b, 16 + (q_max >= 3 ? 3 : 0) + (unsigned)isa, "attention", path);
    const att_args a = {.qkv = qkv, .kc = k_cache, .vc = v_cache, .out = out, .st = st, .Hl = Hl, .Hkl = Hkl, .D = D,
                        .act_bf16 = 1, .kv_bf16 = 1};
    cpu_attn_run(isa, &a, cpu_threads(b));
}

static const char *bf16_kernel_name(tp_backend *b, tp_op_class op, int T, int D) {
    (void)D;
    return op == TP_OP_ATTENTION ? cpu_attention_kernel(T, 1) : bf16_gemm_kernel(b, T);
}

static void bf16_destroy(tp_backend *b) {
    if (!b) return;
    tp_cpu_bf16 *c = bf16_impl(b);
    for (int i = 0; i < c->n_scratch; i++) free(c->scratch[i]);
    free(c->scratch);
    free(c->scratch_cap);
    tp_dnnl_destroy(bf16_impl(b)->dnnl);
    free(b->impl);
    free(b);
}

tp_backend *tp_backend_cpu_bf16_create(int n_threads, int verbose, char *err, size_t err_size) {
    if (!tp_dnnl_compiled()) {
        snprintf(err, err_size, "--dtype bf16 on the CPU needs oneDNN, and this tpgen was built without it "
                                "(install libdnnl-dev, e.g. tools/dev/install-deps.sh, and reconfigure)");
        return NULL;
    }
    tp_backend *b = tp_backend_cpu_create(n_threads); /* memory, copies, logits_stats: as f32 */
    tp_cpu_bf16 *c = tp_calloc(1, sizeof *c);
    c->n_threads = cpu_threads(b);
    c->n_scratch = 1 + 2 * c->n_threads;
    c->scratch = tp_calloc((size_t)c->n_scratch, sizeof *c->scratch);
    c->scratch_cap = tp_calloc((size_t)c->n_scratch, sizeof *c->scratch_cap);
    free(b->impl);
    b->impl = c;
    c->verbose = verbose;
    c->isa = bf16_isa_pick(&c->isa_forced, &c->isa_cands);
    const char *ft = getenv("TPGEN_BF16_GEMV_MAX_T"); /* the GEMV / batched-GEMM crossover */
    c->few_tokens = ft && *ft ? atoi(ft) : 16;
    const char *gm = getenv("TPGEN_CPU_GEMM"); /* "dnnl": oneDNN even through its reference code
                                                  (tests); "blas", "fma": never oneDNN */
    if (gm && *gm && strcmp(gm, "dnnl") != 0 && strcmp(gm, "blas") != 0 && strcmp(gm, "fma") != 0) {
        snprintf(err, err_size, "TPGEN_CPU_GEMM=%s: expected dnnl, fma or blas", gm);
        bf16_destroy(b);
        return NULL;
    }
    int avx2 = 0;
#if defined(__x86_64__)
    __builtin_cpu_init();
    avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && c->isa >= BF16_ISA_AVX2;
#endif
    if (gm && strcmp(gm, "fma") == 0 && !avx2) {
        snprintf(err, err_size, "TPGEN_CPU_GEMM=fma: the FMA GEMM needs AVX2 + FMA, which this CPU lacks or TPGEN_CPU_ISA excludes");
        bf16_destroy(b);
        return NULL;
    }
    char why[256] = "";
    if (gm && strcmp(gm, "fma") == 0) snprintf(why, sizeof why, "TPGEN_CPU_GEMM=fma");
    else if (!(gm && strcmp(gm, "blas") == 0)) {
        c->dnnl = tp_dnnl_create(c->n_threads, gm && strcmp(gm, "dnnl") == 0, why, sizeof why);
        if (!c->dnnl && gm && strcmp(gm, "dnnl") == 0) {
            snprintf(err, err_size, "TPGEN_CPU_GEMM=dnnl: %s", why);
            bf16_destroy(b);
            return NULL;
        }
    } else snprintf(why, sizeof why, "TPGEN_CPU_GEMM=blas");
    c->fma_gemm = !c->dnnl && avx2 && !(gm && strcmp(gm, "blas") == 0);
    if (verbose) {
        tp_log0("cpu bf16: GEMV (T <= %d) -> %s%s\n", c->few_tokens, bf16_isa_name(c->isa),
                c->isa_forced ? " (TPGEN_CPU_ISA)" : " or a lower tier, measured per shape at load");
        if (c->dnnl) tp_log0("cpu bf16: batched GEMM (T > %d) -> oneDNN matmul, %s\n", c->few_tokens,
                             tp_dnnl_impl(c->dnnl));
        else tp_log0("cpu bf16: batched GEMM (T > %d) -> %s (oneDNN not used: %s)\n", c->few_tokens,
                     c->fma_gemm ? "the FMA GEMM on the bf16 weight panels (AVX2)"
                                 : "OpenBLAS sgemm on f32 blocks of the bf16 weights",
                     why);
    }
    b->act = TP_BF16;
    b->kv = TP_BF16;
    b->upload = bf16_upload;
    b->fill_random = bf16_fill_random;
    b->matrix_bytes = bf16_matrix_bytes;
    b->matrix_upload = bf16_matrix_upload;
    b->matrix_fill_random = bf16_matrix_fill_random;
    b->embed = bf16_embed;
    b->layernorm = bf16_layernorm;
    b->matmul = bf16_matmul;
    b->matmul_f32out = bf16_matmul_f32out;
    b->matmul_gelu = bf16_matmul_gelu;
    b->gelu_new = bf16_gelu_new;
    b->rmsnorm = bf16_rmsnorm;
    b->silu_mul = bf16_silu_mul;
    b->add = bf16_add;
    b->gather_rows = bf16_gather_rows;
    b->rotary_kv_write = bf16_rotary_kv_write;
    b->attention = bf16_attention;
    b->kernel_name = bf16_kernel_name;
    b->destroy = bf16_destroy;
    return b;
}
