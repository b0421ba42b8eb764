/* int8 weights on the CPU backend (--weights int8): activations, KV cache, embedding, norms and
 * biases stay f32 (the f32 backend's ops); every Linear weight is int8 with an f32 scale per
 * output row (kernels/common/tp_quant.h), quantized at load from the checkpoint's dtype, each
 * rank its own shard only.
 *
 * Matrix buffer: q [N, K] int8 in panels of 16 rows with k pairs interleaved (cpu_int8_kernels.h), then
 * at a 64-byte-aligned offset the scales [N] f32. y[t, n] = scale[n] * sum_k q[n, k] x[t, k]
 * (+ y) (+ bias) (GELU): the sum exact in integers on x rounded to int16 (GEMV, GEMM), or in
 * f32 (panels); the epilogue in f32.
 *
 * GEMMs by T (tokens of the step):
 *  - T <= few_tokens (decode batches): GEMV kernels that read each int8 row once per step for
 *    every token, in exact integer arithmetic on x rounded to int16 per token (see below).
 *    Tiers (cpu_isa.h), all the same bits (integer sums are exact in any order):
 *      avx512vnni: vpdpwssd zmm, 8 tokens x 32 rows a tile (cpu_int8_vnni.c);
 *      avxvnni:    vpdpwssd ymm (VEX), the AVX2 tile's shape (cpu_int8_vnni.c);
 *      avx2:       the GEMM's tiles (vpmovsxbw + vpmaddwd + vpaddd, up to 6 tokens x 16 rows)
 *                  over one contiguous range of panels per thread;
 *      c:          plain C, any CPU.
 *    Chosen per matrix shape by measurement at load (cpu_tune.h: every tier this CPU runs,
 *    timed at T = 1 on the uploaded matrix, the choice cached in a file), for matrices of at
 *    least TUNE_MIN_ELEMS; smaller ones take the highest tier.
 *  - larger T (batches, prefill), AVX2 or better: the int8 GEMM (cpu_int8_gemm.c,
 *    cpu_int8_vnni.c on the VNNI tiers, cpu_int8_amx.c on AMX; docs/KERNELS.md): the same int16
 *    x and exact integer sums in tiles, so the same bits as the GEMV. Its tier: measured per
 *    shape apart from the GEMV's, for T < 128 at T = 32 and for T >= 128 at T = 256
 *    (tune_gemm), among avx2 and up (amx is a GEMM tier only: the GEMV runs the highest below
 *    it).
 *  - larger T on c: per thread, panels of up to 1024 rows widened to f32 rows (exact integers),
 *    OpenBLAS sgemm on f32 x into an f32 tile, then the scale and the epilogue (x is not
 *    rounded there); ~0.8x the f32 sgemm (x packed again per panel).
 * TPGEN_CPU_ISA=amx|avx512|avxvnni|avx2|c caps the tier (no measurement) and TPGEN_INT8_GEMM=
 * gemv|gemm|blas forces a path (the op tests run each); TPGEN_INT8_ISA is refused. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "kernels/common/tp_act.h"
#include "kernels/common/tp_quant.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/cpu_int8.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/cpu_tune.h"

/* The int8 tiers, numbered as the cpu_tier each needs (avx512vnni: AVX-512 and its VNNI). */
typedef enum { I8_ISA_C = 0, I8_ISA_AVX2 = 1, I8_ISA_AVXVNNI = 2, I8_ISA_AVX512VNNI = 3, I8_ISA_AMX = 4 } i8_isa;
#define I8_N_ISA 5
#define I8_GEMV_TIERS (~(1u << I8_ISA_AMX)) /* amx is a GEMM only (cpu_int8_amx.c) */
#define I8_KERNEL_SET "i8k4" /* bump when an int8 kernel changes: cached choices are then measured again */
#define TUNE_MIN_ELEMS (1 << 20) /* smaller matrices take the highest tier, unmeasured */
#define I8_MAX_SHAPES 16

/* The integer GEMM's tier is measured apart for two ranges of T: batched decode steps (T below
 * GEMM_BIG_T, timed at 32 tokens) and prefill chunks (timed at 256): a kernel with a per-call
 * cost (amx repacks its panels per call) can win one and lose the other. Timed on the first
 * rows of the matrix (compute-bound: the time scales with N). */
enum { GEMM_SMALL = 0, GEMM_BIG = 1 };
#define GEMM_BIG_T 128
static const int g_gemm_tune_t[2] = {32, 256}, g_gemm_tune_rows[2] = {1024, 256};
static const char *const g_gemm_family[2] = {"int8-gemm", "int8-prefill"}; /* cache lines apart (cpu_tune.h) */

/* The GEMV and GEMM tiers chosen for one matrix shape. */
typedef struct {
    int N, K;
    i8_isa isa, isa_batch; /* the GEMV's at T <= CPU_TUNE_ONE_T, and above (tune_shape) */
    i8_isa gemm[2];        /* GEMM_SMALL / GEMM_BIG: I8_ISA_AVX2 or above, or c->isa when the CPU has none */
    char how[512], how_batch[512], gemm_how[2][512];
} i8_shape;
typedef enum { I8_GEMM_AUTO = 0, I8_GEMM_GEMV = 1, I8_GEMM_BLAS = 2, I8_GEMM_INT = 3 } i8_gemm;

typedef struct {
    int n_threads; /* first member: cpu_threads() of cpu_internal.h reads it */
    int verbose;
    i8_isa isa;       /* the highest tier allowed here (CPUID, capped by TPGEN_CPU_ISA) */
    i8_isa gemv_isa;  /* the highest GEMV tier allowed (isa, or the one below amx) */
    int forced;       /* TPGEN_CPU_ISA set: isa everywhere, nothing measured */
    unsigned cands;   /* bit per tier this CPU runs, at or below isa: the candidates */
    i8_gemm force;
    int few_tokens;   /* T <= this: the GEMV kernels */
    unsigned printed; /* bit per (op, path) already reported under --verbose */
    i8_shape shapes[I8_MAX_SHAPES]; /* measured or cached choices, by shape */
    int n_shapes;
    unsigned used[2];      /* bit per tier the GEMV ran, for matmul (0) and logits (1): kernel_name */
    unsigned used_gemm[2]; /* the same for the integer GEMM */
    char names[2][2][64]; /* kernel_name's strings by [logits][integer GEMM]: each stays valid */
} tp_cpu_int8;

static tp_cpu_int8 *i8_impl(tp_backend *b) { return (tp_cpu_int8 *)b->impl; }

static const char *const g_isa_short[I8_N_ISA] = {"c", "avx2", "avxvnni", "avx512vnni", "amx"};
static const char *isa_name(i8_isa isa) {
    static const char *const names[I8_N_ISA] = {
        "c (portable fallback, same integer sums)", "avx2 (vpmaddwd on int8 rows and int16 x)",
        "avxvnni (vpdpwssd ymm on int8 rows and int16 x)", "avx512vnni (vpdpwssd zmm on int8 rows and int16 x)",
        "amx (tdpbssd + tdpbusd tiles on int8 rows and int16 x in two bytes)"};
    return names[isa];
}

static void report(tp_backend *b, unsigned bit, const char *op, const char *path) {
    tp_cpu_int8 *c = i8_impl(b);
    if (!c->verbose || (c->printed & (1u << bit))) return;
    c->printed |= 1u << bit;
    tp_log0("cpu int8: %s -> %s\n", op, path);
}

/* ---- matrix layout (cpu_int8_kernels.h) ---- */
size_t cpu_int8_q_bytes(int N, int K) {
    return ((size_t)cpu_i8_panels(N) * cpu_i8_panel_bytes(K) + 63) & ~(size_t)63;
}
static const float *scales_of(const void *W, int N, int K) { return (const float *)((const char *)W + cpu_int8_q_bytes(N, K)); }

static size_t i8_matrix_bytes(tp_backend *b, int rows, int cols) {
    (void)b;
    return cpu_int8_q_bytes(rows, cols) + (size_t)rows * sizeof(float);
}

static void quantize_row(int8_t *q, float *scale, const float *w, int cols, float absmax) {
    const float s = tp_q8_scale(absmax);
    *scale = s;
    for (int k = 0; k < cols; k++) q[k] = tp_q8_quantize(w[k], s);
}

/* rows [NR][K] int8 (zero past the matrix) -> one panel [KP][NR][2], zero past K. */
static void interleave_panel(int8_t *panel, const int8_t *rows, int K) {
    const int KP = (K + 1) / 2;
    for (int p = 0; p < KP; p++)
        for (int j = 0; j < CPU_I8_NR; j++) {
            const int8_t *r = rows + (size_t)j * K;
            panel[(size_t)p * 2 * CPU_I8_NR + 2 * j] = r[2 * p];
            panel[(size_t)p * 2 * CPU_I8_NR + 2 * j + 1] = 2 * p + 1 < K ? r[2 * p + 1] : 0;
        }
}

static void tune_shape(tp_backend *b, const void *W, int N, int K);

/* Quantizes rows x cols of f32 rows (row_of(tmp, r) writes row r) into dst: threads take whole
 * panels (no two write a cache line), each row on its own max |w| or row_absmax[r]. */
void cpu_int8_quantize_matrix(tp_backend *b, void *dst, int rows, int cols, cpu_i8_row_fn *row_of, const void *ctx,
                              const float *row_absmax) {
    int8_t *q = dst;
    float *sc = (float *)((char *)dst + cpu_int8_q_bytes(rows, cols));
    const int np = cpu_i8_panels(rows);
    #pragma omp parallel num_threads(cpu_threads(b)) if ((size_t)rows * cols >= CPU_PAR_MIN)
    {
        float *tmp = tp_malloc((size_t)(cols > 0 ? cols : 1) * sizeof(float));
        int8_t *r16 = tp_malloc((size_t)CPU_I8_NR * (cols > 0 ? cols : 1));
        #pragma omp for schedule(static)
        for (int P = 0; P < np; P++) {
            for (int j = 0; j < CPU_I8_NR; j++) {
                const int r = P * CPU_I8_NR + j;
                if (r >= rows) { /* past the matrix: zero rows */
                    memset(r16 + (size_t)j * cols, 0, (size_t)cols);
                    continue;
                }
                row_of(tmp, r, cols, ctx);
                const float m = row_absmax ? row_absmax[r] : tp_q8_absmax(tmp, cols);
                quantize_row(r16 + (size_t)j * cols, &sc[r], tmp, cols, m);
            }
            interleave_panel(q + (size_t)P * cpu_i8_panel_bytes(cols), r16, cols);
        }
        free(tmp);
        free(r16);
    }
    tune_shape(b, dst, rows, cols);
}

/* Row r of a host matrix -> f32. */
typedef struct {
    const void *src;
    tp_dtype st;
} host_rows;
static void host_row(float *tmp, int r, int cols, const void *ctx) {
    const host_rows *h = ctx;
    tp_convert_to_f32(tmp, (const char *)h->src + (size_t)r * cols * tp_dtype_size(h->st), h->st, (size_t)cols);
}

static void i8_matrix_upload_rowmax(tp_backend *b, void *dst, const void *src_host, tp_dtype st, int rows, int cols,
                                    const float *row_absmax) {
    const host_rows h = {src_host, st};
    cpu_int8_quantize_matrix(b, dst, rows, cols, host_row, &h, row_absmax);
}

static void i8_matrix_upload(tp_backend *b, void *dst, const void *src_host, tp_dtype st, int rows, int cols) {
    i8_matrix_upload_rowmax(b, dst, src_host, st, rows, cols, NULL);
}

/* ---- x rounded to int16, and the GEMV kernels ----
 * Integer dot products: each token's x is rounded to int16 on a grid of its own, sx = max|x| /
 * 16383 (a relative step of 2^-14 of the row's largest value: ~100x finer than the weights'
 * int8 grid, so the outputs move by ~1% of the int8 error), then sum_k q xq is exact in
 * integers and y = sum * sx * scale. AVX2 does 16 products a step with vpmovsxbw + vpmaddwd +
 * vpaddd, half the instructions of widening q to f32 for FMAs (measured 1.6x at T = 1).
 * Being exact, the sum is the same bits on the avx2 and the c path, in any order (the avx2
 * tiles keep int32 lanes exact by summing blocks of 512 pairs in double, cpu_int8_gemm.c; the
 * c path sums in int64). Non-finite x: sx is NaN and so are the outputs, as in f32. */

/* xq[t, :] and sx[t] for every token. The loops are `omp simd` (a max is exact in any order):
 * gcc left the plain ones scalar, 8% of an int8 prefill (perf). */
CPU_SIMD_CLONES static void quantize_rows(int16_t *xq, float *sx, const float *x, int t0, int t1, int K) {
    for (int t = t0; t < t1; t++) cpu_quantize_absmax(xq + (size_t)t * K, &sx[t], x + (size_t)t * K, K, XQ_MAX);
}

/* Rows split across the threads (a prefill's x is T * K: one thread alone took 5% of it). */
void cpu_int8_quantize_x(int16_t *xq, float *sx, const float *x, int T, int K, int n_threads) {
    const int per = (T + n_threads - 1) / n_threads;
    #pragma omp parallel for schedule(static) num_threads(n_threads) if (n_threads > 1 && T > 1 && (size_t)T * K >= CPU_PAR_MIN)
    for (int t0 = 0; t0 < T; t0 += per) quantize_rows(xq, sx, x, t0, T - t0 < per ? T : t0 + per, K);
}

/* c: panels [P0, P1), a token's 16 sums at a time in int64 (exact) over the interleaved pairs. */
static void panels_c(const int16_t *xq, const float *sx, const int8_t *q, int T, int N, int K, int P0, int P1,
                     const cpu_i8_epi *e) {
    const int KP = (K + 1) / 2;
    for (int P = P0; P < P1; P++) {
        const int8_t *bp = cpu_i8_panel(q, K, P);
        const int n0 = P * CPU_I8_NR, nn = N - n0 < CPU_I8_NR ? N - n0 : CPU_I8_NR;
        for (int t = 0; t < T; t++) {
            const int16_t *xr = xq + (size_t)t * K;
            int64_t acc[CPU_I8_NR] = {0};
            for (int p = 0; p < KP; p++) {
                const int8_t *b = bp + (size_t)p * 2 * CPU_I8_NR;
                const int32_t x0 = xr[2 * p], x1 = 2 * p + 1 < K ? xr[2 * p + 1] : 0;
                for (int j = 0; j < CPU_I8_NR; j++) acc[j] += b[2 * j] * x0 + b[2 * j + 1] * x1;
            }
            for (int j = 0; j < nn; j++) cpu_i8_store_int(e, t, n0 + j, acc[j], sx);
        }
    }
}

/* The GEMV of a tier on panels [P0, P1), on the calling thread. */
static void gemv_panels(i8_isa isa, const int16_t *xq, const float *sx, const int8_t *W, int T, int N, int K, int P0,
                        int P1, const cpu_i8_epi *e) {
    switch (isa) {
    case I8_ISA_AVX512VNNI: cpu_int8_panels_avx512vnni(xq, sx, W, T, N, K, P0, P1, e); break;
    case I8_ISA_AVXVNNI: cpu_int8_panels_avxvnni(xq, sx, W, T, N, K, P0, P1, e); break;
    case I8_ISA_AVX2: cpu_int8_panels_avx2(xq, sx, W, T, N, K, P0, P1, e); break;
    default: panels_c(xq, sx, W, T, N, K, P0, P1, e);
    }
}

/* Each thread one contiguous range of panels: one sequential read of its rows. cpu_s: NULL, or
 * where the largest of the threads' CPU times over their ranges goes (the tuning's timed run). */
static void gemv_path(tp_backend *b, i8_isa isa, const int16_t *xq, const float *sx, const int8_t *W, int T, int N,
                      int K, const cpu_i8_epi *e, double *cpu_s) {
    tp_cpu_int8 *c = i8_impl(b);
    const int nt = c->n_threads, np = cpu_i8_panels(N), per = (np + nt - 1) / nt;
    double worst = 0.0;
    #pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && (double)T * N * K >= 1 << 17) reduction(max : worst)
    for (int P0 = 0; P0 < np; P0 += per) {
        const double t0 = cpu_s ? cpu_tune_thread_seconds() : 0.0;
        gemv_panels(isa, xq, sx, W, T, N, K, P0, np - P0 < per ? np : P0 + per, e);
        if (cpu_s) worst = fmax(worst, cpu_tune_thread_seconds() - t0);
    }
    if (cpu_s) *cpu_s = worst;
}

/* The integer GEMM of a tier above c. */
static void gemm_int(i8_isa isa, const int16_t *xq, const float *sx, const int8_t *W, int T, int N, int K,
                     const cpu_i8_epi *e, int nt) {
    if (isa == I8_ISA_AMX) cpu_int8_gemm_amx(xq, sx, W, T, N, K, e, nt);
    else if (isa == I8_ISA_AVX512VNNI) cpu_int8_gemm_avx512vnni(xq, sx, W, T, N, K, e, nt);
    else if (isa == I8_ISA_AVXVNNI) cpu_int8_gemm_avxvnni(xq, sx, W, T, N, K, e, nt);
    else cpu_int8_gemm_avx2(xq, sx, W, T, N, K, e, nt);
}

CPU_SIMD_CLONES static void widen_int8(float *dst, const int8_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = (float)src[i];
}

/* Rows [n0, n0 + nn) of q (n0 on a panel) -> f32 rows wf [nn][K] (exact integers), a panel at a
 * time through r16 [16][K] int8: the panel read in order into the rows, then one vector pass
 * (writing the f32 rows straight from the panel, 16 strided streams, ran 4% slower at T = 512). */
static void widen_rows(float *wf, int8_t *r16, const int8_t *q, int K, int n0, int nn) {
    const int KP = (K + 1) / 2;
    for (int j0 = 0; j0 < nn; j0 += CPU_I8_NR) {
        const int8_t *b = cpu_i8_panel(q, K, (n0 + j0) / CPU_I8_NR);
        const int m = nn - j0 < CPU_I8_NR ? nn - j0 : CPU_I8_NR;
        for (int p = 0; p < KP; p++, b += 2 * CPU_I8_NR)
            for (int j = 0; j < m; j++) {
                r16[(size_t)j * K + 2 * p] = b[2 * j];
                if (2 * p + 1 < K) r16[(size_t)j * K + 2 * p + 1] = b[2 * j + 1];
            }
        widen_int8(wf + (size_t)j0 * K, r16, (size_t)m * K);
    }
}

/* Batched: per thread, panels of q rows widened to f32, sgemm into an f32 tile, the epilogue
 * (which applies the row scales). Up to 1024 rows a panel (4 Mi floats at most): OpenBLAS packs
 * x again for every call, and 256-row panels ran 5% slower at T = 512. */
static void blas_path(tp_backend *b, const float *x, const int8_t *W, int T, int N, int K, const cpu_i8_epi *e) {
    const int nt = cpu_threads(b);
    int P = (int)(((size_t)4 << 20) / (size_t)K) & ~63;
    P = P < 64 ? 64 : P > 1024 ? 1024 : P;
    const int even = ((N + nt - 1) / nt + 63) & ~63; /* at least one panel per thread */
    if (P > even) P = even;
    #pragma omp parallel num_threads(nt)
    {
        float *wf = tp_malloc((size_t)P * K * sizeof(float)), *tile = tp_malloc((size_t)T * P * sizeof(float));
        int8_t *r16 = tp_malloc((size_t)CPU_I8_NR * K);
        #pragma omp for schedule(dynamic, 1)
        for (int n0 = 0; n0 < N; n0 += P) {
            const int nn = N - n0 < P ? N - n0 : P;
            widen_rows(wf, r16, W, K, n0, nn);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, nn, K, 1.0f, x, K, wf, K, 0.0f, tile, P);
            for (int t = 0; t < T; t++) cpu_i8_epi_row(e, t, n0, nn, tile + (size_t)t * P);
        }
        free(wf);
        free(tile);
        free(r16);
    }
}

/* ---- the tier per shape: measured at load (cpu_tune.h), cached, forced, or the highest ---- */
static i8_shape *shape_find(tp_cpu_int8 *c, int N, int K) {
    for (int i = 0; i < c->n_shapes; i++)
        if (c->shapes[i].N == N && c->shapes[i].K == K) return &c->shapes[i];
    return NULL;
}
/* Two GEMV choices a shape (cpu_tune_pick_gemv): up to CPU_TUNE_ONE_T tokens and above. Every
 * tier gives the same bits (exact sums). */
static i8_isa shape_isa(tp_cpu_int8 *c, int N, int K, int T) {
    const i8_shape *s = shape_find(c, N, K);
    return !s ? c->gemv_isa : T <= CPU_TUNE_ONE_T ? s->isa : s->isa_batch;
}

/* One timed run: the GEMV of the whole matrix at t->T tokens on the given tier, with the
 * backend's threads as a decode step runs it (cpu_tune.h; the matrix evicted from the caches
 * before it), into scratch. */
typedef struct {
    tp_backend *b;
    const int8_t *W;
    int N, K, T;
    i8_isa isa[I8_N_ISA];
    int16_t *xq;
    float sx[CPU_TUNE_T2], *y;
    const float *scale;
} tune_ctx;
static double tune_run(void *ctx, int cand) {
    const tune_ctx *t = ctx;
    const cpu_i8_epi e = {t->y, NULL, t->scale, t->N, 0, 0};
    double s;
    gemv_path(t->b, t->isa[cand], t->xq, t->sx, t->W, t->T, t->N, t->K, &e, &s);
    return s;
}

/* One integer GEMM of t->T tokens on the first rows (t->N of them) on one thread. */
typedef struct {
    const int8_t *W;
    int N, K, T;
    i8_isa isa[I8_N_ISA];
    int16_t *xq;
    float *sx, *y;
    const float *scale;
} tune_gemm_ctx;
static double tune_gemm_run(void *ctx, int cand) {
    const tune_gemm_ctx *t = ctx;
    const cpu_i8_epi e = {t->y, NULL, t->scale, t->N, 0, 0};
    gemm_int(t->isa[cand], t->xq, t->sx, t->W, t->T, t->N, t->K, &e, 1);
    return -1.0; /* one thread: cpu_tune times it */
}

/* The shape's integer GEMM tier for range r: the tiers from avx2 up this CPU runs, timed
 * (cpu_tune.h). */
static void tune_gemm(tp_cpu_int8 *c, i8_shape *s, const void *W, int r) {
    const int K = s->K, T = g_gemm_tune_t[r], Ns = s->N < g_gemm_tune_rows[r] ? s->N : g_gemm_tune_rows[r];
    tune_gemm_ctx t = {.W = W, .N = Ns, .K = K, .T = T, .scale = scales_of(W, s->N, K)};
    const char *names[I8_N_ISA];
    int n = 0;
    for (int i = I8_N_ISA - 1; i >= I8_ISA_AVX2; i--)
        if (c->cands & (1u << i)) {
            t.isa[n] = (i8_isa)i;
            names[n++] = g_isa_short[i];
        }
    s->gemm[r] = c->isa;
    if (!n) {
        snprintf(s->gemm_how[r], sizeof s->gemm_how[r], "no integer GEMM on this CPU");
        return;
    }
    t.xq = tp_malloc(((size_t)T * K + 32) * sizeof *t.xq);
    for (size_t k = 0; k < (size_t)T * K + 32; k++) t.xq[k] = (int16_t)((k * 7919) % 32767 - 16383);
    t.sx = tp_malloc((size_t)T * sizeof *t.sx);
    for (int i = 0; i < T; i++) t.sx[i] = 1.0f / XQ_MAX;
    t.y = tp_malloc((size_t)T * Ns * sizeof *t.y);
    const cpu_tune_key key = {.family = g_gemm_family[r], .kernel_set = I8_KERNEL_SET, .N = s->N, .K = K, .T = T,
                              .n_cand = n, .names = names};
    s->gemm[r] = t.isa[cpu_tune_pick(&key, tune_gemm_run, &t, s->gemm_how[r], sizeof s->gemm_how[r])];
    free(t.xq);
    free(t.sx);
    free(t.y);
}

/* After a matrix is stored: the first of its shape picks its GEMV tier (file comment). */
static void tune_shape(tp_backend *b, const void *W, int N, int K) {
    tp_cpu_int8 *c = i8_impl(b);
    if (c->forced || (size_t)N * K < TUNE_MIN_ELEMS || shape_find(c, N, K) || c->n_shapes == I8_MAX_SHAPES) return;
    tune_ctx t = {.b = b, .W = W, .N = N, .K = K, .scale = scales_of(W, N, K)};
    for (int i = 0; i < CPU_TUNE_T2; i++) t.sx[i] = 1.0f / XQ_MAX;
    const char *names[I8_N_ISA];
    int n = 0;
    for (int i = I8_N_ISA - 1; i >= 0; i--) /* highest first: a tie keeps it */
        if (c->cands & I8_GEMV_TIERS & (1u << i)) {
            t.isa[n] = (i8_isa)i;
            names[n++] = g_isa_short[i];
        }
    const size_t nx = (size_t)CPU_TUNE_T2 * K + 32;
    t.xq = tp_malloc(nx * sizeof *t.xq);
    for (size_t k = 0; k < nx; k++) t.xq[k] = (int16_t)((k * 7919) % 32767 - 16383); /* any x: the time is the same */
    t.y = tp_malloc((size_t)CPU_TUNE_T2 * N * sizeof *t.y);
    const cpu_tune_key key = {.family = "int8-gemv", .kernel_set = I8_KERNEL_SET, .N = N, .K = K, .n_cand = n,
                              .names = names, .stream = W, .stream_bytes = cpu_int8_q_bytes(N, K), .recheck = 1};
    i8_shape *s = &c->shapes[c->n_shapes++];
    s->N = N;
    s->K = K;
    int pick[2];
    char *how[2] = {s->how, s->how_batch};
    cpu_tune_pick_gemv(&key, tune_run, &t, &t.T, pick, how, sizeof s->how, c->verbose ? "cpu int8" : NULL);
    s->isa = t.isa[pick[0]];
    s->isa_batch = t.isa[pick[1]];
    free(t.xq);
    free(t.y);
    for (int r = GEMM_SMALL; r <= GEMM_BIG; r++) {
        tune_gemm(c, s, W, r);
        if (c->verbose && s->gemm[r] >= I8_ISA_AVX2)
            tp_log0("cpu int8: GEMM [%d x %d] at T %s %d -> %s: %s\n", N, K, r == GEMM_BIG ? ">=" : "<", GEMM_BIG_T,
                    g_isa_short[s->gemm[r]], s->gemm_how[r]);
    }
}

const char *cpu_int8_gemv_choice(tp_backend *b, int N, int K, const char **how) {
    if (!b->weights || strcmp(b->weights, "int8") != 0 || strcmp(b->name, "cpu") != 0) return NULL;
    tp_cpu_int8 *c = i8_impl(b);
    const i8_shape *s = shape_find(c, N, K);
    if (how)
        *how = s                               ? s->how
               : c->forced                     ? "forced by TPGEN_CPU_ISA"
               : (size_t)N * K < TUNE_MIN_ELEMS ? "the highest tier (below the measured size)"
                                                : "the highest tier (not measured)";
    return g_isa_short[s ? s->isa : c->gemv_isa];
}

/* The path at T tokens (the file comment); i8_kernel_name names it. */
static i8_gemm path_pick(const tp_cpu_int8 *c, int T) {
    if (c->force) return c->force;
    if (T <= c->few_tokens) return I8_GEMM_GEMV;
    return c->isa >= I8_ISA_AVX2 ? I8_GEMM_INT : I8_GEMM_BLAS;
}
/* The integer GEMM's tier for a shape at T tokens: measured for T's range, or the highest allowed. */
static i8_isa shape_gemm_isa(tp_cpu_int8 *c, int N, int K, int T) {
    const i8_shape *s = shape_find(c, N, K);
    return s ? s->gemm[T >= GEMM_BIG_T ? GEMM_BIG : GEMM_SMALL] : c->isa;
}

/* "gemv-int8-avx512vnni", or with tiers joined by '+' where the op's shapes chose differently. */
static const char *tiers_name(const char *prefix, unsigned used, i8_isa fallback, char *buf, size_t size) {
    if (!used) used = 1u << fallback; /* nothing ran yet: the tier that would */
    snprintf(buf, size, "%s", prefix);
    int first = 1;
    for (int i = 0; i < I8_N_ISA; i++)
        if (used & (1u << i)) {
            snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", first ? "" : "+", g_isa_short[i]);
            first = 0;
        }
    return buf;
}

static const char *i8_kernel_name(tp_backend *b, tp_op_class op, int T, int D) {
    if (op == TP_OP_ATTENTION) return cpu_kernel_name(b, op, T, D); /* activations and KV stay f32 */
    tp_cpu_int8 *c = i8_impl(b);
    const int lg = op == TP_OP_LOGITS;
    const unsigned used = c->used[lg];
    switch (path_pick(c, T)) {
    case I8_GEMM_BLAS: return "openblas-sgemm-int8-panels";
    case I8_GEMM_INT:
        return tiers_name("gemm-int8-", c->used_gemm[lg], c->isa, c->names[lg][1], sizeof c->names[lg][1]);
    default: return tiers_name("gemv-int8-", used, c->gemv_isa, c->names[lg][0], sizeof c->names[lg][0]);
    }
}

static void gemm(tp_backend *b, float *y, const float *x, const void *W, const float *bias, int T, int N, int K,
                 int accumulate, int gelu, unsigned bit, const char *op) {
    if (T <= 0 || N <= 0) return;
    tp_cpu_int8 *c = i8_impl(b);
    const cpu_i8_epi e = {y, bias, scales_of(W, N, K), N, accumulate, gelu};
    char path[160];
    if (K <= 0) {
        for (int t = 0; t < T; t++)
            for (int n = 0; n < N; n++) cpu_i8_epi_store(&e, t, n, 0.0f);
        return;
    }
    const i8_gemm pk = path_pick(c, T);
    const i8_isa gv = shape_isa(c, N, K, T), gi = shape_gemm_isa(c, N, K, T);
    if (pk == I8_GEMM_GEMV) c->used[bit == 2] |= 1u << gv;
    if (pk == I8_GEMM_INT) c->used_gemm[bit == 2] |= 1u << gi;
    if (pk == I8_GEMM_GEMV || pk == I8_GEMM_INT) {
        const char *how = pk == I8_GEMM_GEMV ? "gemv" : "gemm";
        if (pk == I8_GEMM_GEMV) snprintf(path, sizeof path, "GEMV %s", isa_name(gv));
        else snprintf(path, sizeof path, "GEMM %s (tiles of the GEMV's bits)", isa_name(gi));
        if (c->force) snprintf(path + strlen(path), sizeof path - strlen(path), " (TPGEN_INT8_GEMM=%s)", how);
        else snprintf(path + strlen(path), sizeof path - strlen(path), " (T %s %d)", pk == I8_GEMM_GEMV ? "<=" : ">",
                      c->few_tokens);
        report(b, pk == I8_GEMM_GEMV ? bit : bit + 8, op, path);
        int16_t *xq = tp_malloc((size_t)T * K * sizeof *xq + 64); /* + 64: the GEMM's 32-bit reads past K */
        float *sx = tp_malloc((size_t)T * sizeof *sx);
        cpu_int8_quantize_x(xq, sx, x, T, K, c->n_threads);
        if (pk == I8_GEMM_GEMV) gemv_path(b, gv, xq, sx, W, T, N, K, &e, NULL);
        else gemm_int(gi, xq, sx, W, T, N, K, &e, c->n_threads);
        free(xq);
        free(sx);
    } else {
        if (c->force) snprintf(path, sizeof path, "OpenBLAS sgemm on f32 panels of the int8 rows (TPGEN_INT8_GEMM=blas)");
        else snprintf(path, sizeof path, "OpenBLAS sgemm on f32 panels of the int8 rows (T > %d)", c->few_tokens);
        report(b, bit + 1, op, path);
        blas_path(b, x, W, T, N, K, &e);
    }
}

static void i8_matmul(tp_backend *b, void *y, const void *x, const void *W, const void *bias, int T, int N, int K,
                      int accumulate) {
    gemm(b, y, x, W, bias, T, N, K, accumulate, 0, 0, "matmul");
}
static void i8_matmul_f32out(tp_backend *b, float *y, const void *x, const void *W, const void *bias, int T, int N,
                             int K) {
    gemm(b, y, x, W, bias, T, N, K, 0, 0, 2, "matmul_f32out (logits)");
}
static void i8_matmul_gelu(tp_backend *b, void *y, const void *x, const void *W, const void *bias, int T, int N,
                           int K) {
    gemm(b, y, x, W, bias, T, N, K, 0, 1, 4, "matmul_gelu (fc_in)");
}

/* The tiers this CPU runs (bit per i8_isa) and the highest allowed: TPGEN_CPU_ISA's cap or all. */
static int isa_pick(i8_isa *isa, int *forced, unsigned *cands, char *err, size_t err_size) {
    if (cpu_isa_old_env_check(err, err_size)) return -1;
    cpu_tier cap;
    if (cpu_tier_forced(&cap, forced, err, err_size)) return -1;
    const cpu_features *f = cpu_features_get();
    const int have[I8_N_ISA] = {1, f->avx2_fma, f->avxvnni, f->avx512vnni, f->amx_int8};
    *cands = 0;
    *isa = I8_ISA_C;
    for (int i = 0; i < I8_N_ISA; i++)
        if (have[i] && i <= (int)cap) {
            *cands |= 1u << i;
            *isa = (i8_isa)i;
        }
    return 0;
}

/* matrix_fill_random: element (r, c) = the f32 backend's fill_random draw r * cols + c
 * (kernels/common/tp_rng.h), quantized, so bench --random-weights runs the quantized f32 model. */
static void fill_random(tp_backend *b, void *dst, int rows, int cols, uint64_t seed, float mean, float std) {
    const cpu_i8_draws d = {tp_rng_key(seed), mean, std};
    cpu_int8_quantize_matrix(b, dst, rows, cols, cpu_int8_random_rows(), &d, NULL);
}

int tp_backend_cpu_use_int8(tp_backend *b, int verbose, char *err, size_t err_size) {
    if (b->act != TP_F32) {
        snprintf(err, err_size, "--weights int8 on the CPU runs with f32 activations: it cannot be combined with "
                                "--dtype %s (drop --dtype, or use --dtype f32)", b->act == TP_BF16 ? "bf16" : "f16");
        return -1;
    }
    i8_isa isa;
    int forced;
    unsigned cands;
    if (isa_pick(&isa, &forced, &cands, err, err_size)) return -1;
    i8_gemm force = I8_GEMM_AUTO;
    const char *g = getenv("TPGEN_INT8_GEMM");
    if (g && *g) {
        if (strcmp(g, "gemv") == 0) force = I8_GEMM_GEMV;
        else if (strcmp(g, "gemm") == 0) force = I8_GEMM_INT;
        else if (strcmp(g, "blas") == 0) force = I8_GEMM_BLAS;
        else {
            snprintf(err, err_size, "TPGEN_INT8_GEMM=%s: expected gemv, gemm or blas", g);
            return -1;
        }
        if (force == I8_GEMM_INT && isa < I8_ISA_AVX2) {
            snprintf(err, err_size, "TPGEN_INT8_GEMM=gemm: the int8 GEMM kernel needs AVX2 or better (the ISA here is %s)",
                     isa_name(isa));
            return -1;
        }
    }
    tp_cpu_int8 *c = tp_calloc(1, sizeof *c);
    c->n_threads = cpu_threads(b);
    c->verbose = verbose;
    c->isa = isa;
    for (int i = 0; i < I8_N_ISA; i++)
        if (cands & I8_GEMV_TIERS & (1u << i)) c->gemv_isa = (i8_isa)i;
    c->forced = forced;
    c->cands = cands;
    c->force = force;
    const char *ft = getenv("TPGEN_INT8_GEMV_MAX_T"); /* the GEMV / panel-GEMM crossover */
    /* Zen 3, bench_int8_gemm: avx2, the GEMV and the GEMM level from T = 8 to 32 (the same tiles);
     * c, the plain-C GEMV's time grows with T (9.3 ms at T = 1, 73 at 8) and OpenBLAS on widened
     * panels barely does (45 at T = 1, 47 at 8): the panels from T = 5 on */
    c->few_tokens = ft && *ft ? atoi(ft) : isa >= I8_ISA_AVX2 ? 16 : 4;
    free(b->impl);
    b->impl = c;
    char list[96];
    if (verbose)
        tp_log0("cpu int8: weights int8 with f32 row scales; GEMV (T <= %d) -> %s%s; batched (T > %d) -> %s%s\n",
                c->few_tokens, forced ? isa_name(c->gemv_isa) : "measured per shape among ",
                forced ? " (TPGEN_CPU_ISA)" : tiers_name("", cands & I8_GEMV_TIERS, isa, list, sizeof list),
                c->few_tokens,
                isa < I8_ISA_AVX2 ? "OpenBLAS sgemm on widened panels"
                : forced          ? isa_name(isa)
                                  : "the int8 GEMM of the shape's tier",
                force == I8_GEMM_GEMV   ? " (TPGEN_INT8_GEMM=gemv: GEMV for every T)"
                : force == I8_GEMM_INT  ? " (TPGEN_INT8_GEMM=gemm: the int8 GEMM for every T)"
                : force == I8_GEMM_BLAS ? " (TPGEN_INT8_GEMM=blas: panels for every T)" : "");
    b->weights = "int8";
    b->matrix_bytes = i8_matrix_bytes;
    b->matrix_upload = i8_matrix_upload;
    b->matrix_upload_rowmax = i8_matrix_upload_rowmax;
    b->matrix_fill_random = fill_random;
    b->matmul = i8_matmul;
    b->matmul_f32out = i8_matmul_f32out;
    b->matmul_gelu = i8_matmul_gelu;
    b->kernel_name = i8_kernel_name;
    return 0;
}
