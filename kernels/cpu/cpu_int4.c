/* int4 weights on the CPU backend (--weights int4, AWQ / GPTQ checkpoints): the int8 backend
 * (cpu_int8.c) with a second kind of matrix. Activations, KV cache, embedding, norms and biases
 * stay f32; lm_head (and any Linear a checkpoint leaves unquantized) is an int8 matrix of the int8
 * backend; every Linear the model keeps in 4 bits is stored from its canonical groups
 * (kernels/common/tp_quant4.h: w = (q - zero) * scale, q and zero 0..15, a scale and a zero per
 * group of G k of a row) in panels (cpu_int4_kernels.h).
 *
 * Wrapping: tp_backend_cpu_use_int4 first makes the backend int8 (tp_backend_cpu_use_int8),
 * keeps a copy of that backend (its impl and functions, tp_cpu_int4.i8) and puts its own
 * functions in front. Every matrix buffer starts with a header (cpu_i4_head: magic, kind, N, K,
 * group), so matmul, matmul_gelu and matmul_f32out dispatch on the buffer: an int8 matrix to the
 * int8 backend's function on the data after the header, an int4 one to the kernels here. A
 * buffer without the magic, or of another shape than the call's, ends the job naming both.
 *
 * Arithmetic, the same bits from every kernel (cpu_int4_kernels.h): x rounded to int16 per token
 * (cpu_int8_quantize_x: sx = max|x| / 16383), per group the exact integer
 * s = sum_k (q - zero) xq, acc = fmaf((float)s, scale, acc) over the groups in order, y = acc * sx
 * then the epilogue (+ y, + bias, GELU) in f32.
 * Error bound against the dequantized weights wd = (q - zero) * scale (exact in double), for one
 * output of a row with G_n groups, m = max_k |x_k|, u = 2^-24:
 *     |y - sum_k wd_k x_k| <= m / 32766 * sum_k |wd_k|                 (x's int16 grid: half a step)
 *                           + (G_n + 2) u (sum_k |wd_k x_k| + m / 32766 * sum_k |wd_k|)
 * (one rounding per group: (float)s is exact below 2^24 and else within u, the fma rounds once;
 * the product by sx once), before the epilogue's own roundings. The x term is the int8 family's
 * (the same grid); the group term is ~G_n u relative: 2^-17 at 128 groups.
 *
 * GEMMs by T (tokens of the step), tiers as the int8 family (cpu_isa.h; TPGEN_CPU_ISA caps):
 *  - T <= few_tokens (16): the GEMV, threads splitting the panels in contiguous ranges (one
 *    sequential read each), tiles of a few tokens: avx512vnni (vpdpwssd zmm), avxvnni (vpdpwssd
 *    ymm), avx2 (vpmaddwd + vpaddd), c (the plain-C twin);
 *  - larger T: the GEMM, threads taking groups of panels with x in chunks kept in L2 (as
 *    int8's), tiles of more tokens; amx (cpu_int4_amx.c) where it pays.
 * The tier per shape (N, K, group) is measured at load as int8's (cpu_tune.h: families
 * "int4-gemv" at T = 1, "int4-gemm" at T = 32 and "int4-prefill" at T = 256), cached, for
 * matrices of at least 2^20 weights; smaller ones take the highest tier.
 * TPGEN_INT4_GEMM=gemv|gemm forces one path for every T (the op tests run each).
 *
 * 8-bit activations (tp_backend_cpu_int4_act8, --int4-activations int8; opt-in): x rounded per
 * token and kernel group to int8 (quantize_x8), the group's scale times x's in the fma
 * (cpu_int4_kernels.h); the same kernels, avx512vnni's with one vpdpbusd a nibble half, no amx;
 * a wider bound (docs/KERNELS.md) for half the int4 GEMMs' multiplies. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "kernels/common/tp_quant4.h"
#include "kernels/common/tp_rng.h"
#include "kernels/cpu/cpu_int4.h"
#include "kernels/cpu/cpu_int4_kernels.h"
#include "kernels/cpu/cpu_int8.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/cpu_tune.h"

/* The int4 tiers, numbered as the cpu_tier each needs (the int8 family's numbering). */
typedef enum { I4_ISA_C = 0, I4_ISA_AVX2 = 1, I4_ISA_AVXVNNI = 2, I4_ISA_AVX512VNNI = 3, I4_ISA_AMX = 4 } i4_isa;
#define I4_N_ISA 5
#define I4_KERNEL_SET "i4k4" /* bump when an int4 kernel changes: cached choices are measured again */
#define TUNE_MIN_ELEMS (1 << 20)
#define I4_MAX_SHAPES 16
enum { GEMM_SMALL = 0, GEMM_BIG = 1 };
#define GEMM_BIG_T 128
static const int g_gemm_tune_t[2] = {32, 256}, g_gemm_tune_rows[2] = {1024, 256};
static const char *const g_gemm_family[2][2] = {{"int4-gemm", "int4-prefill"}, {"int4a8-gemm", "int4a8-prefill"}};
static const char *const g_isa_short[I4_N_ISA] = {"c", "avx2", "avxvnni", "avx512vnni", "amx"};

typedef enum { I4_PATH_AUTO = 0, I4_PATH_GEMV = 1, I4_PATH_GEMM = 2 } i4_path;

/* The tiers chosen for one int4 shape. */
typedef struct {
    int N, K, KG;
    i4_isa gemv, gemm[2];
    char how[512], gemm_how[2][512];
} i4_shape;

/* Scratch that stays across calls (x's forms, the amx kernel's work): fresh buffers of a few MiB
 * a call came from mmap and were page-faulted in every call (~10% of a prefill, bench_int4_gemm). */
typedef struct {
    uint8_t *p;
    size_t size;
} i4_scratch;

typedef struct {
    int n_threads; /* first member: cpu_threads() of cpu_internal.h reads it */
    int verbose;
    i4_isa isa;      /* the highest tier allowed (CPUID, capped by TPGEN_CPU_ISA) */
    i4_isa gemv_isa; /* the highest GEMV tier allowed (amx has no GEMV) */
    int forced;      /* TPGEN_CPU_ISA set: nothing measured */
    unsigned cands;  /* bit per tier this CPU runs, at or below isa */
    i4_path force;   /* TPGEN_INT4_GEMM */
    int few_tokens;
    int act8;        /* 8-bit activations per group (tp_backend_cpu_int4_act8); else int16 per token */
    unsigned printed;
    i4_shape shapes[I4_MAX_SHAPES];
    int n_shapes;
    unsigned used[2][2]; /* [logits][gemm]: bit per tier an int4 matrix ran (kernel_name) */
    int int4_ran[2];     /* [logits]: an int4 matrix ran for the op class */
    char names[2][2][64];
    tp_backend i8; /* the int8 backend this one wraps: its impl and functions (file comment) */
    i4_scratch scratch; /* x's forms and the amx work area, kept across calls (x_make) */
} tp_cpu_int4;

static tp_cpu_int4 *i4_impl(tp_backend *b) { return (tp_cpu_int4 *)b->impl; }

/* ---- the header ---- */
static void head_write(void *dst, uint32_t kind, int N, int K, int group, int kgroup) {
    cpu_i4_head h;
    memset(&h, 0, sizeof h);
    h.magic = CPU_I4_MAGIC;
    h.kind = kind;
    h.N = N, h.K = K, h.group = group, h.kgroup = kgroup;
    memset(dst, 0, CPU_I4_HEAD);
    memcpy(dst, &h, sizeof h);
}
/* The header of W for an op on [N, K]; ends the job on a foreign buffer or another shape. */
static cpu_i4_head head_read(const void *W, int N, int K, const char *op) {
    cpu_i4_head h;
    memcpy(&h, W, sizeof h);
    if (h.magic != CPU_I4_MAGIC || (h.kind != CPU_I4_KIND_INT8 && h.kind != CPU_I4_KIND_INT4))
        tp_die("cpu int4: %s of [%d x %d]: the weight buffer is not a matrix of the int4 backend (no header)", op, N,
               K);
    if (h.N != N || h.K != K)
        tp_die("cpu int4: %s of [%d x %d] on a matrix stored as [%d x %d]", op, N, K, h.N, h.K);
    return h;
}

/* ---- int8 matrices: the int8 backend's, after the header ---- */
static size_t i8w_matrix_bytes(tp_backend *b, int rows, int cols) {
    tp_cpu_int4 *c = i4_impl(b);
    return CPU_I4_HEAD + c->i8.matrix_bytes(&c->i8, rows, cols);
}
static void i8w_matrix_upload(tp_backend *b, void *dst, const void *src, tp_dtype st, int rows, int cols) {
    tp_cpu_int4 *c = i4_impl(b);
    head_write(dst, CPU_I4_KIND_INT8, rows, cols, 0, 0);
    c->i8.matrix_upload(&c->i8, (char *)dst + CPU_I4_HEAD, src, st, rows, cols);
}
static void i8w_matrix_upload_rowmax(tp_backend *b, void *dst, const void *src, tp_dtype st, int rows, int cols,
                                     const float *row_absmax) {
    tp_cpu_int4 *c = i4_impl(b);
    head_write(dst, CPU_I4_KIND_INT8, rows, cols, 0, 0);
    c->i8.matrix_upload_rowmax(&c->i8, (char *)dst + CPU_I4_HEAD, src, st, rows, cols, row_absmax);
}
static void i8w_matrix_fill_random(tp_backend *b, void *dst, int rows, int cols, uint64_t seed, float mean,
                                   float std) {
    tp_cpu_int4 *c = i4_impl(b);
    head_write(dst, CPU_I4_KIND_INT8, rows, cols, 0, 0);
    c->i8.matrix_fill_random(&c->i8, (char *)dst + CPU_I4_HEAD, rows, cols, seed, mean, std);
}

/* ---- int4 matrices: shape checks and the panels ---- */
/* The group must divide K and be a multiple of TP_Q4_GROUP_ALIGN (the kernels' k step). */
static void check_group(int rows, int cols, int group, const char *what) {
    if (rows < 0 || cols <= 0 || group <= 0 || group % TP_Q4_GROUP_ALIGN != 0 || cols % group != 0)
        tp_die("cpu int4: %s of an int4 matrix [%d x %d] with group %d: the group must divide K = %d and be a "
               "positive multiple of %d",
               what, rows, cols, group, cols, TP_Q4_GROUP_ALIGN);
}
/* The kernels' group: the largest divisor of group that is a multiple of TP_Q4_GROUP_ALIGN and
 * at most CPU_I4_MAX_KG (cpu_int4_kernels.h). */
static int kernel_group(int group) {
    if (group <= CPU_I4_MAX_KG) return group;
    for (int d = CPU_I4_MAX_KG; d >= TP_Q4_GROUP_ALIGN; d -= TP_Q4_GROUP_ALIGN)
        if (group % d == 0) return d;
    return TP_Q4_GROUP_ALIGN;
}
static size_t q4_data_bytes(int rows, int cols, int KG) {
    return (size_t)cpu_i4_panels(rows) * cpu_i4_panel_bytes(cols, KG);
}
static size_t q4_matrix_bytes(tp_backend *b, int rows, int cols, int group) {
    (void)b;
    check_group(rows, cols, group, "matrix_bytes_q4");
    return CPU_I4_HEAD + q4_data_bytes(rows, cols, kernel_group(group));
}

/* One panel from canonical rows: q [nr][ldq] (row j of the panel at q + j ldq), scale and zero
 * [nr][lds] per checkpoint group; rows past nr are zero. row0: the panel's first row (messages). */
typedef struct {
    const uint8_t *q;
    const float *scale;
    const uint8_t *zero;
    size_t ldq, lds;
} q4_rows;
static void pack_panel(uint8_t *panel, const q4_rows *r, int nr, int N, int K, int group, int KG, int row0) {
    memset(panel, 0, cpu_i4_panel_bytes(K, KG));
    float *sc = (float *)(panel + (size_t)K * 8);
    uint8_t *zp = panel + (size_t)K * 8 + (size_t)(K / KG) * 64;
    for (int j = 0; j < nr; j++) {
        const uint8_t *q = r->q + (size_t)j * r->ldq;
        for (int k = 0; k < K; k++) {
            const unsigned v = q[k];
            if (v > TP_Q4_LEVELS)
                tp_die("cpu int4: int4 matrix [%d x %d]: q[%d, %d] = %u is outside 0..%d", N, K, row0 + j, k, v,
                       TP_Q4_LEVELS);
            const int s = k / 8, i = (k % 8) / 2, h = k % 2;
            panel[(size_t)s * 64 + 2 * (2 * j + h) + i / 2] |= (uint8_t)(v << (4 * (i % 2)));
        }
        for (int gk = 0; gk < K / KG; gk++) {
            const int g = gk * KG / group;
            const unsigned z = r->zero[(size_t)j * r->lds + g];
            if (z > TP_Q4_LEVELS)
                tp_die("cpu int4: int4 matrix [%d x %d]: zero[%d, %d] = %u is outside 0..%d", N, K, row0 + j, g, z,
                       TP_Q4_LEVELS);
            sc[gk * CPU_I4_NR + j] = r->scale[(size_t)j * r->lds + g];
            zp[gk * CPU_I4_NR + j] = (uint8_t)z;
        }
    }
}

static void tune_shape(tp_backend *b, const uint8_t *q, int N, int K, int KG);

static void q4_matrix_upload(tp_backend *b, void *dst, const tp_q4_host *src, int rows, int cols) {
    check_group(rows, cols, src->group, "matrix_upload_q4");
    const int G = src->group, KG = kernel_group(G), np = cpu_i4_panels(rows);
    head_write(dst, CPU_I4_KIND_INT4, rows, cols, G, KG);
    uint8_t *q = (uint8_t *)dst + CPU_I4_HEAD;
    const size_t pb = cpu_i4_panel_bytes(cols, KG), ng = (size_t)(cols / G);
    #pragma omp parallel for schedule(static) num_threads(cpu_threads(b)) if ((size_t)rows * cols >= CPU_PAR_MIN)
    for (int P = 0; P < np; P++) {
        const size_t r0 = (size_t)P * CPU_I4_NR;
        const q4_rows r = {src->q + r0 * cols, src->scale + r0 * ng, src->zero + r0 * ng, (size_t)cols, ng};
        pack_panel(q + (size_t)P * pb, &r, rows - (int)r0 < CPU_I4_NR ? rows - (int)r0 : CPU_I4_NR, rows, cols, G, KG,
                   (int)r0);
    }
    tune_shape(b, q, rows, cols, KG);
}

/* matrix_fill_random_q4: element (r, c) = the f32 backend's draw r * cols + c (the int8 backend's
 * rows, cpu_int8_random.c), quantized per group by tp_q4_quantize_group. */
static void q4_matrix_fill_random(tp_backend *b, void *dst, int rows, int cols, int group, uint64_t seed, float mean,
                                  float std) {
    check_group(rows, cols, group, "matrix_fill_random_q4");
    const int KG = kernel_group(group), np = cpu_i4_panels(rows), ng = cols / group;
    head_write(dst, CPU_I4_KIND_INT4, rows, cols, group, KG);
    uint8_t *q = (uint8_t *)dst + CPU_I4_HEAD;
    const size_t pb = cpu_i4_panel_bytes(cols, KG);
    const cpu_i8_draws d = {tp_rng_key(seed), mean, std};
    cpu_i8_row_fn *row_of = cpu_int8_random_rows();
    #pragma omp parallel num_threads(cpu_threads(b)) if ((size_t)rows * cols >= CPU_PAR_MIN)
    {
        float *tmp = tp_malloc((size_t)cols * sizeof(float));
        uint8_t *q16 = tp_malloc((size_t)CPU_I4_NR * cols), *z16 = tp_malloc((size_t)CPU_I4_NR * ng);
        float *s16 = tp_malloc((size_t)CPU_I4_NR * ng * sizeof(float));
        #pragma omp for schedule(static)
        for (int P = 0; P < np; P++) {
            const int r0 = P * CPU_I4_NR, nr = rows - r0 < CPU_I4_NR ? rows - r0 : CPU_I4_NR;
            for (int j = 0; j < nr; j++) {
                row_of(tmp, r0 + j, cols, &d);
                for (int g = 0; g < ng; g++)
                    tp_q4_quantize_group(tmp + (size_t)g * group, group, q16 + (size_t)j * cols + (size_t)g * group,
                                         &s16[(size_t)j * ng + g], &z16[(size_t)j * ng + g]);
            }
            const q4_rows r = {q16, s16, z16, (size_t)cols, (size_t)ng};
            pack_panel(q + (size_t)P * pb, &r, nr, rows, cols, group, KG, r0);
        }
        free(tmp);
        free(q16);
        free(z16);
        free(s16);
    }
    tune_shape(b, q, rows, cols, KG);
}

/* ---- the plain-C twin (cpu_int4_kernels.h's arithmetic, any CPU) ----
 * Per panel: the nibbles unpacked once to w = q - zero [16][K] int16, then per token and row the
 * groups in order: s = sum w xq in int32 (no overflow: |s| and every partial sum <= KG * 15 *
 * 16383 < 2^31; a loop compilers vectorize, pmaddwd on SSE2), acc = fmaf(s, scale, acc). */
static int32_t dot_i16(const int16_t *a, const int16_t *b, int n) {
    int32_t s = 0;
    for (int k = 0; k < n; k++) s += (int32_t)a[k] * b[k];
    return s;
}
static void unpack_panel(int16_t *w, const uint8_t *panel, int K, int KG) {
    const uint8_t *zp = cpu_i4_zeros(panel, K, KG);
    for (int s = 0; s < K / 8; s++) {
        const uint8_t *line = panel + (size_t)s * 64;
        for (int wd = 0; wd < 32; wd++) {
            const unsigned u = line[2 * wd] | (unsigned)line[2 * wd + 1] << 8;
            const int j = wd / 2, h = wd % 2;
            for (int i = 0; i < 4; i++) {
                const int k = 8 * s + 2 * i + h;
                w[(size_t)j * K + k] = (int16_t)((int)(u >> (4 * i) & 15) - zp[(k / KG) * CPU_I4_NR + j]);
            }
        }
    }
}
void cpu_int4_panels_c(const cpu_i4_x *x, const uint8_t *q, int N, int P0, int P1, int t0, int t1,
                       const cpu_i4_epi *e) {
    const int K = x->K, KG = x->KG, ng = K / KG;
    int16_t *w = tp_malloc((size_t)CPU_I4_NR * K * sizeof *w);
    float v[CPU_I4_NR];
    for (int P = P0; P < P1; P++) {
        const uint8_t *panel = cpu_i4_panel(q, K, KG, P);
        const float *sc = cpu_i4_scales(panel, K);
        const int n0 = P * CPU_I4_NR, nn = N - n0 < CPU_I4_NR ? N - n0 : CPU_I4_NR;
        unpack_panel(w, panel, K, KG);
        for (int t = t0; t < t1; t++) {
            const int16_t *xr = x->xq + (size_t)t * K;
            for (int j = 0; j < nn; j++) {
                float acc = 0.0f;
                for (int g = 0; g < ng; g++) {
                    const int32_t s = dot_i16(w + (size_t)j * K + (size_t)g * KG, xr + (size_t)g * KG, KG);
                    const float scale = sc[g * CPU_I4_NR + j];
                    acc = fmaf((float)s, x->gx ? scale * x->gx[(size_t)t * ng + g] : scale, acc);
                }
                v[j] = acc;
            }
            cpu_i4_epi_row(e, t, x->sx[t], n0, nn, v);
        }
    }
    free(w);
}

/* ---- the kernels of a tier ---- */
static cpu_i4_panels_fn *gemv_fn(i4_isa isa) {
    switch (isa) {
    case I4_ISA_AVX512VNNI: return cpu_int4_gemv_avx512vnni;
    case I4_ISA_AVXVNNI: return cpu_int4_gemv_avxvnni;
    case I4_ISA_AVX2: return cpu_int4_gemv_avx2;
    default: return cpu_int4_panels_c;
    }
}
static cpu_i4_panels_fn *gemm_fn(i4_isa isa) {
    switch (isa) {
    case I4_ISA_AVX512VNNI: return cpu_int4_gemm_avx512vnni;
    case I4_ISA_AVXVNNI: return cpu_int4_gemm_avxvnni;
    case I4_ISA_AVX2: return cpu_int4_gemm_avx2;
    default: return cpu_int4_panels_c;
    }
}

/* The GEMV: each thread one contiguous range of panels, all T tokens (one sequential read).
 * cpu_s: NULL, or where the largest of the threads' CPU times over their ranges goes (the
 * tuning's timed run, cpu_tune.h). */
static void run_gemv(i4_isa isa, const cpu_i4_x *x, const uint8_t *q, int N, const cpu_i4_epi *e, int nt,
                     double *cpu_s) {
    cpu_i4_panels_fn *fn = gemv_fn(isa);
    const int np = cpu_i4_panels(N), per = (np + nt - 1) / nt;
    double worst = 0.0;
    #pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && (double)x->T * N * x->K >= 1 << 17) reduction(max : worst)
    for (int P0 = 0; P0 < np; P0 += per) {
        const double t0 = cpu_s ? cpu_tune_thread_seconds() : 0.0;
        fn(x, q, N, P0, np - P0 < per ? np : P0 + per, 0, x->T, e);
        if (cpu_s) worst = fmax(worst, cpu_tune_thread_seconds() - t0);
    }
    if (cpu_s) *cpu_s = worst;
}

/* The GEMM: threads take groups of up to SP panels (SP * 8 K bytes of nibbles: 128 KiB at K =
 * 1024, in L2) and run x through each in chunks of mc tokens (mc * 2 K <= XC_BYTES, kept in L2
 * across the group's panels): int8's blocking (cpu_int8_gemm.c). */
#define SP 16
#define XC_BYTES (192 << 10)
static void run_gemm(i4_isa isa, const cpu_i4_x *x, const uint8_t *q, int N, const cpu_i4_epi *e, int nt) {
    if (isa == I4_ISA_AMX) {
        cpu_int4_gemm_amx(x, q, N, e, nt);
        return;
    }
    cpu_i4_panels_fn *fn = gemm_fn(isa);
    const int np = cpu_i4_panels(N), T = x->T;
    int sp = (np + nt - 1) / nt;
    sp = sp < 1 ? 1 : sp > SP ? SP : sp;
    const int groups = (np + sp - 1) / sp;
    int mc = (int)(XC_BYTES / (2 * (size_t)x->K)) / 16 * 16;
    mc = mc < 16 ? 16 : mc;
    #pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && groups > 1)
    for (int g = 0; g < groups; g++) {
        const int P0 = g * sp, P1 = np - P0 < sp ? np : P0 + sp;
        for (int t0 = 0; t0 < T; t0 += mc) fn(x, q, N, P0, P1, t0, T - t0 < mc ? T : t0 + mc, e);
    }
}

/* One token's bytes (cpu_i4_x_bytes' form, written as vectors: an 8-k shuffle and two byte
 * narrowings; the table loop was 6% of an amx prefill, perf) and its group sums (omp simd: an
 * integer sum is exact in any order). hi NULL: the low bytes alone (8-bit x, whose hi are 0). */
typedef int16_t v8s __attribute__((vector_size(16)));
typedef int8_t v8s8 __attribute__((vector_size(8)));
CPU_SIMD_CLONES static void i4_x_row(int8_t *lo, int8_t *hi, int32_t *xs, const int16_t *xq, int K, int KG, int tk) {
    for (int k = 0; k < K; k += 8) {
        const size_t at = tk ? cpu_i4_x_tile_at(0, k, K, tk) : (size_t)k; /* from the token's first byte */
        v8s v;
        memcpy(&v, xq + k, sizeof v);
        v = __builtin_shufflevector(v, v, 0, 4, 1, 5, 2, 6, 3, 7); /* cpu_i4_xperm (GCC 12 and clang) */
        const v8s b = ((v + 128) & 255) - 128; /* the low byte, signed (xq + 128 <= 16511: no wrap) */
        const v8s8 l = __builtin_convertvector(b, v8s8);
        const v8s8 h = __builtin_convertvector((v - b) >> 8, v8s8); /* exact: v - b is a multiple of 256 */
        memcpy(lo + at, &l, sizeof l);
        if (hi) memcpy(hi + at, &h, sizeof h);
    }
    for (int g = 0; g < K / KG; g++) {
        const int16_t *p = xq + (size_t)g * KG;
        int32_t s = 0; /* |s| <= 8192 * 16383 */
        #pragma omp simd reduction(+ : s)
        for (int k = 0; k < KG; k++) s += p[k];
        xs[g] = s;
    }
}

/* 8-bit activations (tp_backend_cpu_int4_act8): per token and kernel group, gx = max|x| / 127 and
 * xq = rint(x * (127 / max|x|)) clamped to +-127 (cpu_quantize_absmax, the int8 family's rounding
 * on a grid of 127 a group); sx = 1. A group with a NaN or an infinity: gx NaN, its xq 0 (the
 * token's outputs NaN, as the int16 form's sx NaN makes them); an all-zero group: gx 0, xq 0. */
#define XQ8_MAX 127
CPU_SIMD_CLONES static void quantize_x8_row(int16_t *qr, float *gx, const float *xr, int K, int KG) {
    for (int g = 0; g < K / KG; g++)
        cpu_quantize_absmax(qr + (size_t)g * KG, &gx[g], xr + (size_t)g * KG, KG, XQ8_MAX);
}
static void quantize_x8(int16_t *xq, float *sx, float *gx, const float *x, int T, int K, int KG, int nt) {
    const int ng = K / KG;
    #pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && T > 1 && (size_t)T * K >= CPU_PAR_MIN)
    for (int t = 0; t < T; t++) {
        quantize_x8_row(xq + (size_t)t * K, gx + (size_t)t * ng, x + (size_t)t * K, K, KG);
        sx[t] = 1.0f;
    }
}

static uint8_t *scratch_get(i4_scratch *s, size_t bytes) {
    if (bytes > s->size) {
        free(s->p);
        void *p = NULL;
        if (posix_memalign(&p, 64, bytes) != 0 || !p)
            tp_die("cpu int4: cannot allocate %zu bytes of scratch for a GEMM's x", bytes);
        s->p = p;
        s->size = bytes;
    }
    return s->p;
}
static size_t round64(size_t v) { return (v + 63) & ~(size_t)63; }

/* x's integer form in scratch: xq, sx (cpu_int8_quantize_x; act8: quantize_x8, and gx), the group
 * sums, the byte planes (cpu_int4_kernels.h; tiles: in the amx kernel's A-tile order, which spares
 * it a copy of both, 4% of a prefill) and the amx kernel's work area. Valid until the scratch's
 * next use. */
static cpu_i4_x x_make(i4_scratch *sc, const float *x, int T, int K, int KG, int nt, int tiles, int act8) {
    const size_t Tp = tiles ? ((size_t)T + 15) / 16 * 16 : (size_t)T, ng = (size_t)(K / KG); /* tiles: zero rows to 16 */
    const size_t b_xq = round64((size_t)T * K * 2 + 64), b_sx = round64((size_t)T * 4), b_xs = round64((size_t)T * ng * 4),
                 b_pl = round64(Tp * K + 64), b_work = tiles ? cpu_int4_amx_work_bytes(K, nt) : 0,
                 b_gx = act8 ? b_xs : 0;
    uint8_t *m = scratch_get(sc, b_xq + b_sx + b_xs + 2 * b_pl + b_work + b_gx);
    int16_t *xq = (int16_t *)m; /* + 64: pairs read as 32 bits past the end */
    float *sx = (float *)(m + b_xq);
    int32_t *xs = (int32_t *)(m + b_xq + b_sx);
    int8_t *lo = (int8_t *)(m + b_xq + b_sx + b_xs), *hi = lo + b_pl;
    float *gx = act8 ? (float *)((uint8_t *)hi + b_pl + b_work) : NULL;
    cpu_i4_x r = {xq, sx, gx, xs, lo, act8 ? NULL : hi, T, K, KG, tiles, (uint8_t *)hi + b_pl};
    if (act8) quantize_x8(xq, sx, gx, x, T, K, KG, nt);
    else cpu_int8_quantize_x(xq, sx, x, T, K, nt);
    const int tk = tiles ? cpu_i4_amx_tk(KG) : 0;
    const size_t pad = tiles ? (size_t)(T / 16 * 16) * K : (size_t)T * K; /* zeros from here (tiles: the last block) */
    memset(lo + pad, 0, Tp * K - pad + 64);
    if (!act8) memset(hi + pad, 0, Tp * K - pad + 64);
    #pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && T > 1 && (size_t)T * K >= 4 * CPU_PAR_MIN)
    for (int t = 0; t < T; t++) {
        const size_t at = tiles ? cpu_i4_x_tile_at(t, 0, K, tk) : (size_t)t * K;
        i4_x_row(lo + at, act8 ? NULL : hi + at, xs + (size_t)t * ng, xq + (size_t)t * K, K, KG, tk);
    }
    return r;
}

/* ---- the tier per shape: measured at load (cpu_tune.h), cached, forced, or the highest ---- */
static i4_shape *shape_find(tp_cpu_int4 *c, int N, int K, int KG) {
    for (int i = 0; i < c->n_shapes; i++)
        if (c->shapes[i].N == N && c->shapes[i].K == K && c->shapes[i].KG == KG) return &c->shapes[i];
    return NULL;
}

/* One timed run of a candidate. GEMV: the whole matrix at T = 1 and at T = CPU_TUNE_T2 with the
 * backend's threads as a decode step runs it, the matrix evicted from the caches before it (the
 * int8 family's run, cpu_int8.c); its time the largest of the threads' CPU times. GEMM: its tiles
 * at T tokens on the first N rows, on the calling thread (timed by cpu_tune). Into scratch. */
typedef struct {
    const uint8_t *q;
    int N, nt;
    int gemm;
    i4_isa isa[I4_N_ISA];
    cpu_i4_x x, x2, xt; /* x: T tokens (GEMM) or 1 (GEMV); x2: CPU_TUNE_T2 tokens (GEMV); xt: x in tile order (amx) */
    i4_scratch s1, s2, s3; /* theirs */
    float *y;
} tune_ctx;
static double tune_run(void *ctx, int cand) {
    const tune_ctx *t = ctx;
    const cpu_i4_epi e = {t->y, NULL, t->N, 0, 0};
    if (t->gemm) {
        run_gemm(t->isa[cand], t->isa[cand] == I4_ISA_AMX ? &t->xt : &t->x, t->q, t->N, &e, 1);
        return -1.0;
    }
    double s1, s8;
    run_gemv(t->isa[cand], &t->x, t->q, t->N, &e, t->nt, &s1);
    run_gemv(t->isa[cand], &t->x2, t->q, t->N, &e, t->nt, &s8);
    return s1 + s8;
}
/* Scratch x of T tokens on the integer grid (any values: the time is the same), in sc. */
static cpu_i4_x tune_x(i4_scratch *sc, int T, int K, int KG, int nt, int tiles, int act8) {
    float *xf = tp_malloc((size_t)T * K * sizeof *xf);
    for (size_t i = 0; i < (size_t)T * K; i++) xf[i] = (float)((i * 7919) % 2001) - 1000.0f;
    cpu_i4_x x = x_make(sc, xf, T, K, KG, nt, tiles, act8);
    free(xf);
    return x;
}
/* Candidate tiers, highest first (a tie keeps it): bit set in mask and in c->cands. */
static int tune_cands(const tp_cpu_int4 *c, unsigned mask, tune_ctx *t, const char **names) {
    int n = 0;
    for (int i = I4_N_ISA - 1; i >= 0; i--)
        if (c->cands & mask & (1u << i)) {
            t->isa[n] = (i4_isa)i;
            names[n++] = g_isa_short[i];
        }
    return n;
}
static unsigned gemv_tiers(void) { return ~(1u << I4_ISA_AMX); }
/* The GEMM's: avx2 and up where this CPU has one (the twin ran 100x slower than amx at T = 32:
 * not worth timing at load), else the twin. */
static unsigned gemm_tiers_of(unsigned cands) { return cands & ~1u ? ~1u : 1u; }

static void tune_shape(tp_backend *b, const uint8_t *q, int N, int K, int KG) {
    tp_cpu_int4 *c = i4_impl(b);
    if (c->forced || (size_t)N * K < TUNE_MIN_ELEMS || shape_find(c, N, K, KG) || c->n_shapes == I4_MAX_SHAPES) return;
    i4_shape *s = &c->shapes[c->n_shapes++];
    s->N = N, s->K = K, s->KG = KG;
    char shape[64];
    snprintf(shape, sizeof shape, "g%d %dx%d", KG, N, K); /* not NxK alone: the group is part of it */
    const char *names[I4_N_ISA];
    tune_ctx t = {.q = q, .N = N, .nt = c->n_threads, .gemm = 0};
    int n = tune_cands(c, gemv_tiers(), &t, names);
    t.x = tune_x(&t.s1, 1, K, KG, c->n_threads, 0, c->act8);
    t.x2 = tune_x(&t.s2, CPU_TUNE_T2, K, KG, c->n_threads, 0, c->act8);
    t.y = tp_malloc((size_t)CPU_TUNE_T2 * N * sizeof *t.y);
    const cpu_tune_key key = {.family = c->act8 ? "int4a8-gemv" : "int4-gemv", .kernel_set = I4_KERNEL_SET,
                              .N = N, .K = K, .T = 1 + CPU_TUNE_T2, .n_cand = n, .names = names, .shape = shape,
                              .run = "T = 1 and 8 with the step's threads, from memory", .stream = q,
                              .stream_bytes = q4_data_bytes(N, K, KG), .recheck = 1};
    s->gemv = t.isa[cpu_tune_pick(&key, tune_run, &t, s->how, sizeof s->how)];
    free(t.s1.p);
    free(t.s2.p);
    free(t.y);
    if (c->verbose) tp_log0("cpu int4: GEMV [%d x %d] group %d -> %s: %s\n", N, K, KG, g_isa_short[s->gemv], s->how);
    for (int r = GEMM_SMALL; r <= GEMM_BIG; r++) {
        const int T = g_gemm_tune_t[r], Ns = N < g_gemm_tune_rows[r] ? N : g_gemm_tune_rows[r];
        tune_ctx g = {.q = q, .N = Ns, .gemm = 1};
        n = tune_cands(c, gemm_tiers_of(c->cands), &g, names);
        g.x = tune_x(&g.s1, T, K, KG, 1, 0, c->act8);
        if (c->cands & (1u << I4_ISA_AMX)) g.xt = tune_x(&g.s3, T, K, KG, 1, 1, 0);
        g.y = tp_malloc((size_t)T * Ns * sizeof *g.y);
        const cpu_tune_key gk = {.family = g_gemm_family[c->act8][r], .kernel_set = I4_KERNEL_SET, .N = N, .K = K,
                                 .T = T, .n_cand = n, .names = names, .shape = shape};
        s->gemm[r] = g.isa[cpu_tune_pick(&gk, tune_run, &g, s->gemm_how[r], sizeof s->gemm_how[r])];
        free(g.s1.p);
        free(g.s3.p);
        free(g.y);
        if (c->verbose)
            tp_log0("cpu int4: GEMM [%d x %d] group %d at T %s %d -> %s: %s\n", N, K, KG, r == GEMM_BIG ? ">=" : "<",
                    GEMM_BIG_T, g_isa_short[s->gemm[r]], s->gemm_how[r]);
    }
}

static i4_isa highest(unsigned cands, unsigned mask) {
    i4_isa best = I4_ISA_C;
    for (int i = 0; i < I4_N_ISA; i++)
        if (cands & mask & (1u << i)) best = (i4_isa)i;
    return best;
}

const char *cpu_int4_choice(tp_backend *b, int N, int K, int group, int T, const char **how) {
    if (!b->weights || strcmp(b->weights, "int4") != 0 || strcmp(b->name, "cpu") != 0) return NULL;
    tp_cpu_int4 *c = i4_impl(b);
    const i4_shape *s = shape_find(c, N, K, kernel_group(group));
    const int gemm = c->force == I4_PATH_GEMM || (c->force != I4_PATH_GEMV && T > c->few_tokens);
    const int r = T >= GEMM_BIG_T ? GEMM_BIG : GEMM_SMALL;
    if (how)
        *how = s                                ? (gemm ? s->gemm_how[r] : s->how)
               : c->forced                      ? "forced by TPGEN_CPU_ISA"
               : (size_t)N * K < TUNE_MIN_ELEMS ? "the highest tier (below the measured size)"
                                                : "the highest tier (not measured)";
    if (s) return g_isa_short[gemm ? s->gemm[r] : s->gemv];
    return g_isa_short[gemm ? highest(c->cands, gemm_tiers_of(c->cands)) : c->gemv_isa];
}

/* ---- the ops ---- */
static int use_gemm(const tp_cpu_int4 *c, int T) {
    if (c->force) return c->force == I4_PATH_GEMM;
    return T > c->few_tokens;
}

static void report(tp_cpu_int4 *c, unsigned bit, const char *op, const char *path) {
    if (!c->verbose || (c->printed & (1u << bit))) return;
    c->printed |= 1u << bit;
    tp_log0("cpu int4: %s -> %s\n", op, path);
}

static void gemm_int4(tp_backend *b, float *y, const float *x, const uint8_t *q, const cpu_i4_head *h,
                      const float *bias, int T, int accumulate, int gelu, int lg, const char *op) {
    tp_cpu_int4 *c = i4_impl(b);
    const int N = h->N, K = h->K, KG = h->kgroup, gemm = use_gemm(c, T);
    const i4_shape *s = shape_find(c, N, K, KG);
    const int r = T >= GEMM_BIG_T ? GEMM_BIG : GEMM_SMALL;
    const i4_isa isa = gemm ? (s ? s->gemm[r] : highest(c->cands, gemm_tiers_of(c->cands))) : (s ? s->gemv : c->gemv_isa);
    c->used[lg][gemm] |= 1u << isa;
    c->int4_ran[lg] = 1;
    if (c->verbose) {
        char path[128];
        snprintf(path, sizeof path, "int4%s %s %s (T %s %d%s)", c->act8 ? " 8-bit x" : "", gemm ? "GEMM" : "GEMV",
                 g_isa_short[isa], gemm ? ">" : "<=", c->few_tokens, c->force ? ", TPGEN_INT4_GEMM" : "");
        report(c, (unsigned)(lg * 2 + gemm) + (gelu ? 4 : 0), op, path);
    }
    const cpu_i4_epi e = {y, bias, N, accumulate, gelu};
    cpu_i4_x xi = x_make(&c->scratch, x, T, K, KG, c->n_threads, gemm && isa == I4_ISA_AMX, c->act8);
    if (gemm) run_gemm(isa, &xi, q, N, &e, c->n_threads);
    else run_gemv(isa, &xi, q, N, &e, c->n_threads, NULL);
}

static void i4_matmul(tp_backend *b, void *y, const void *x, const void *W, const void *bias, int T, int N, int K,
                      int accumulate) {
    const cpu_i4_head h = head_read(W, N, K, "matmul");
    tp_cpu_int4 *c = i4_impl(b);
    if (h.kind == CPU_I4_KIND_INT8) {
        c->i8.matmul(&c->i8, y, x, (const char *)W + CPU_I4_HEAD, bias, T, N, K, accumulate);
        return;
    }
    if (T <= 0 || N <= 0) return;
    gemm_int4(b, y, x, (const uint8_t *)W + CPU_I4_HEAD, &h, bias, T, accumulate, 0, 0, "matmul");
}
static void i4_matmul_gelu(tp_backend *b, void *y, const void *x, const void *W, const void *bias, int T, int N,
                           int K) {
    const cpu_i4_head h = head_read(W, N, K, "matmul_gelu");
    tp_cpu_int4 *c = i4_impl(b);
    if (h.kind == CPU_I4_KIND_INT8) {
        c->i8.matmul_gelu(&c->i8, y, x, (const char *)W + CPU_I4_HEAD, bias, T, N, K);
        return;
    }
    if (T <= 0 || N <= 0) return;
    gemm_int4(b, y, x, (const uint8_t *)W + CPU_I4_HEAD, &h, bias, T, 0, 1, 0, "matmul_gelu (fc_in)");
}
static void i4_matmul_f32out(tp_backend *b, float *y, const void *x, const void *W, const void *bias, int T, int N,
                             int K) {
    const cpu_i4_head h = head_read(W, N, K, "matmul_f32out");
    tp_cpu_int4 *c = i4_impl(b);
    if (h.kind == CPU_I4_KIND_INT8) {
        c->i8.matmul_f32out(&c->i8, y, x, (const char *)W + CPU_I4_HEAD, bias, T, N, K);
        return;
    }
    if (T <= 0 || N <= 0) return;
    gemm_int4(b, y, x, (const uint8_t *)W + CPU_I4_HEAD, &h, bias, T, 0, 0, 1, "matmul_f32out (logits)");
}

/* "gemv-int4-avx512vnni", tiers joined by '+' where shapes chose differently; the int8 backend's
 * name for an op class no int4 matrix ran (lm_head stays int8) and for attention. */
static const char *i4_kernel_name(tp_backend *b, tp_op_class op, int T, int D) {
    tp_cpu_int4 *c = i4_impl(b);
    const int lg = op == TP_OP_LOGITS;
    if (op == TP_OP_ATTENTION || (lg && !c->int4_ran[1])) return c->i8.kernel_name(&c->i8, op, T, D);
    const int gemm = use_gemm(c, T);
    unsigned used = c->used[lg][gemm];
    if (!used) used = 1u << (gemm ? highest(c->cands, gemm_tiers_of(c->cands)) : c->gemv_isa);
    char *buf = c->names[lg][gemm];
    const size_t size = sizeof c->names[lg][gemm];
    snprintf(buf, size, "%s-int4%s-", gemm ? "gemm" : "gemv", c->act8 ? "a8" : "");
    int first = 1;
    for (int i = 0; i < I4_N_ISA; i++)
        if (used & (1u << i)) {
            snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", first ? "" : "+", g_isa_short[i]);
            first = 0;
        }
    return buf;
}

/* The int8 backend's impl, then this one's (cpu_destroy's work for both). */
static void i4_destroy(tp_backend *b) {
    if (!b) return;
    tp_cpu_int4 *c = i4_impl(b);
    free(c->i8.impl);
    free(c->scratch.p);
    free(c);
    free(b);
}

int tp_backend_cpu_use_int4(tp_backend *b, int verbose, char *err, size_t err_size) {
    if (b->act != TP_F32) {
        snprintf(err, err_size, "--weights int4 on the CPU runs with f32 activations: it cannot be combined with "
                                "--dtype %s (drop --dtype, or use --dtype f32)", b->act == TP_BF16 ? "bf16" : "f16");
        return -1;
    }
    if (b->weights) {
        snprintf(err, err_size, "--weights int4: the backend already holds %s weights", b->weights);
        return -1;
    }
    i4_path force = I4_PATH_AUTO;
    const char *g = getenv("TPGEN_INT4_GEMM");
    if (g && *g) {
        if (strcmp(g, "gemv") == 0) force = I4_PATH_GEMV;
        else if (strcmp(g, "gemm") == 0) force = I4_PATH_GEMM;
        else {
            snprintf(err, err_size, "TPGEN_INT4_GEMM=%s: expected gemv or gemm", g);
            return -1;
        }
    }
    if (tp_backend_cpu_use_int8(b, verbose, err, err_size)) return -1; /* matrix_upload & co store int8 */
    /* the tiers: the int8 family's rule (cpu_isa.h), which use_int8 checked */
    cpu_tier cap;
    int forced;
    if (cpu_tier_forced(&cap, &forced, err, err_size)) return -1;
    const cpu_features *f = cpu_features_get();
    const int have[I4_N_ISA] = {1, f->avx2_fma, f->avxvnni, f->avx512vnni, f->amx_int8 && f->avx512vnni};
    tp_cpu_int4 *c = tp_calloc(1, sizeof *c);
    c->i8 = *b;
    c->n_threads = cpu_threads(b);
    c->verbose = verbose;
    c->forced = forced;
    c->force = force;
    for (int i = 0; i < I4_N_ISA; i++)
        if (have[i] && i <= (int)cap) c->cands |= 1u << i;
    c->isa = highest(c->cands, ~0u);
    c->gemv_isa = highest(c->cands, gemv_tiers());
    /* this Xeon, bench_int4_gemm: the GEMV 21 ms at T = 8 against amx's 31, 39 at 16 against 32 */
    c->few_tokens = 12;
    b->impl = c;
    b->weights = "int4";
    b->matrix_bytes = i8w_matrix_bytes;
    b->matrix_upload = i8w_matrix_upload;
    b->matrix_upload_rowmax = i8w_matrix_upload_rowmax;
    b->matrix_fill_random = i8w_matrix_fill_random;
    b->matrix_bytes_q4 = q4_matrix_bytes;
    b->matrix_upload_q4 = q4_matrix_upload;
    b->matrix_fill_random_q4 = q4_matrix_fill_random;
    b->matmul = i4_matmul;
    b->matmul_gelu = i4_matmul_gelu;
    b->matmul_f32out = i4_matmul_f32out;
    b->kernel_name = i4_kernel_name;
    b->destroy = i4_destroy;
    if (verbose)
        tp_log0("cpu int4: weights int4 (groups of scale + zero), lm_head int8; GEMV (T <= %d) -> %s; GEMM -> %s%s\n",
                c->few_tokens, forced ? g_isa_short[c->gemv_isa] : "measured per shape",
                forced ? g_isa_short[highest(c->cands, gemm_tiers_of(c->cands))] : "measured per shape",
                force == I4_PATH_GEMV   ? " (TPGEN_INT4_GEMM=gemv: GEMV for every T)"
                : force == I4_PATH_GEMM ? " (TPGEN_INT4_GEMM=gemm: GEMM for every T)"
                                        : "");
    return 0;
}

int tp_backend_cpu_int4_act8(tp_backend *b, char *err, size_t err_size) {
    if (b->destroy != i4_destroy) {
        snprintf(err, err_size, "--int4-activations int8 is for 4-bit weights (--weights int4, or an AWQ / GPTQ "
                                "checkpoint): the backend holds %s weights", b->weights ? b->weights : "unquantized");
        return -1;
    }
    tp_cpu_int4 *c = i4_impl(b);
    if (c->n_shapes) {
        snprintf(err, err_size, "cpu int4: 8-bit activations must be chosen before the first matrix is stored");
        return -1;
    }
    c->act8 = 1;
    /* no amx kernel for them (this kernel's B rows are 16-bit x's two planes; not built): the GEMM
     * takes avx512vnni's tiles, which run one vpdpbusd where 16-bit x needs two */
    c->cands &= ~(1u << I4_ISA_AMX);
    c->isa = highest(c->cands, ~0u);
    if (c->verbose)
        tp_log0("cpu int4: 8-bit activations (--int4-activations int8): x rounded to int8 per token and weight "
                "group, one vpdpbusd a nibble half; not exact: docs/KERNELS.md's wider bound\n");
    return 0;
}
