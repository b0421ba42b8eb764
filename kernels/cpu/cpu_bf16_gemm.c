/* bf16 GEMMs: y[T,N] = epilogue(x[T,K] @ W^T), W bf16 (panels or rows, cpu_bf16.h), f32
 * accumulation, one rounding.
 *
 * By T (tokens of the step):
 *  - T <= few_tokens (decode batches): GEMV-style kernels that read W once per step for every
 *    token, threads on contiguous ranges of it, chosen by CPUID:
 *      avx512bf16: vdpbf16ps on bf16 x and [N, K] W (32 products per instruction, f32 sums;
 *                  2 rows x 4 tokens per register block);
 *      avx2:       the panel kernels of cpu_gemm_bf16w.c (8 rows x up to 6 tokens a tile);
 *      c:          plain C on the panels, 4 tokens a pass, the avx2 kernel's reference twin.
 *  - larger T (batched steps, prefill): oneDNN matmul on its reordered copy of W (bf16 in, f32
 *    accumulation, bias/sum/GELU in its f32 post-ops), when oneDNN runs bf16 natively here;
 *    otherwise, with AVX2 + FMA, the FMA GEMM on the panels (cpu_gemm_bf16w.c); else OpenBLAS
 *    sgemm on f32 blocks of W widened per thread.
 * Epilogue (all paths, in f32): v = x.w (+ y when accumulating) (+ bias); GELU; round to bf16 --
 * the CUDA backend's fused epilogue. matmul_f32out keeps f32 (logits). */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "kernels/common/tp_act.h"
#include "kernels/cpu/cpu_bf16.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/cpu_tune.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

typedef uint16_t bf16;

const char *bf16_isa_name(bf16_isa isa) {
    return isa == BF16_ISA_AVX512BF16 ? "avx512bf16 (vdpbf16ps)" : isa == BF16_ISA_AVX2 ? "avx2 (FMA on widened bf16)"
                                                                                      : "c (portable fallback)";
}

static const char *const g_isa_short[BF16_N_ISA] = {"c", "avx2", "avx512bf16"};

bf16_isa bf16_isa_pick(int *forced, unsigned *cands) {
    char err[256];
    cpu_tier cap;
    if (cpu_tier_forced(&cap, forced, err, sizeof err)) tp_die_all("%s", err);
    const cpu_features *f = cpu_features_get();
    /* the cpu_tier each needs: c, avx2, avx512 (with AVX512-BF16) */
    const int have[BF16_N_ISA] = {1, f->avx2_fma, f->avx512bf16};
    const cpu_tier need[BF16_N_ISA] = {CPU_TIER_C, CPU_TIER_AVX2, CPU_TIER_AVX512};
    bf16_isa isa = BF16_ISA_C;
    *cands = 0;
    for (int i = 0; i < BF16_N_ISA; i++)
        if (have[i] && need[i] <= cap) {
            *cands |= 1u << i;
            isa = (bf16_isa)i;
        }
    return isa;
}

/* ---- epilogue ---- */
typedef struct {
    void *y;          /* [T, N] bf16, or f32 when out_f32 */
    const bf16 *bias; /* [N] or NULL */
    int N, accumulate, gelu, out_f32;
} epi;

/* always_inline: called per output from the AVX2 / AVX-512 GEMV kernels; out of line (gcc's
 * choice once GELU's exp became arithmetic) it ran as SSE code between AVX code, 2.5x slower
 * at batch 8 (perf: the stalls at its entry). */
static inline __attribute__((always_inline)) void epi_store(const epi *e, int t, int n, float v) {
    const size_t i = (size_t)t * e->N + n;
    if (e->accumulate) v += tp_bf16_to_f32(((const bf16 *)e->y)[i]);
    if (e->bias) v += tp_bf16_to_f32(e->bias[n]);
    if (e->out_f32) { ((float *)e->y)[i] = v; return; }
    if (e->gelu) v = tp_gelu_new(v);
    ((bf16 *)e->y)[i] = tp_f32_to_bf16(v);
}

/* ---- GEMV kernels ---- */
typedef uint16_t v8u16 __attribute__((vector_size(16)));
typedef uint32_t v8u32 __attribute__((vector_size(32)));
/* 8 bf16 at p -> 8 f32: zero-extend, shift into the high half (a macro: see v8_load) */
#define v8_bf16(p) __extension__({ \
    v8u16 h8_; \
    __builtin_memcpy(&h8_, (p), sizeof h8_); \
    const v8u32 u8_ = __builtin_convertvector(h8_, v8u32) << 16; \
    v8f f8_; \
    __builtin_memcpy(&f8_, &u8_, sizeof f8_); \
    f8_; })

#if defined(__x86_64__)
/* avx512bf16 on the panels: a k pair of a panel's 8 rows is one 32-byte vector of bf16 pairs,
 * and vdpbf16ps (ymm, AVX512-VL) adds each lane's two bf16 products to an f32 lane, against x's
 * pair broadcast (bf16 x, never widened): 16 products an instruction, where the avx2 kernel
 * widens W (2 ops) and runs 2 FMAs. Tiles of MT tokens (<= 8) x 2 panels; with <= 4 tokens the
 * even and odd pairs go to separate accumulators (4+ chains at T = 1). On odd K the last pair
 * takes x[K - 1] alone (the panel is zero at K, and x[K] is another row or past the buffer).
 * vdpbf16ps flushes subnormal inputs and outputs to zero (the c and avx2 kernels do not). */
#define ZB_MR 8
#define ZB_PF 512 /* elements (1 KiB) of prefetch distance along a panel, as the avx2 tiles (cpu_gemm_bf16w.c) */
#define ZB_FN static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512bf16")))
ZB_FN uint32_t x_pair_bf16(const bf16 *x, int K, long j) {
    uint32_t v;
    if (2 * j + 1 < K) memcpy(&v, x + 2 * j, sizeof v);
    else v = x[2 * j]; /* odd K: the last element, zero above it */
    return v;
}
ZB_FN void zb_tile(const bf16 *x, int K, const bf16 *bp, size_t pe, long j0, long j1, const int MT, const int NP,
                   const int S, float o[ZB_MR][2 * BF16_NR]) {
    __m256 a[2][ZB_MR][2];
    _Pragma("GCC unroll 8") for (int s = 0; s < S; s++) _Pragma("GCC unroll 8") for (int t = 0; t < MT; t++)
        _Pragma("GCC unroll 2") for (int p = 0; p < NP; p++) a[s][t][p] = _mm256_setzero_ps();
    long j = j0;
    const long jm = j1 < K / 2 ? j1 : K / 2; /* whole pairs of x: one 32-bit read each */
    for (; j + S <= jm; j += S)
        _Pragma("GCC unroll 2") for (int s = 0; s < S; s++) {
            if (S == 2 ? s == 0 : (j & 1) == 0) /* a cache line is 2 pairs: one prefetch a line a panel */
                _Pragma("GCC unroll 2") for (int p = 0; p < NP; p++)
                    _mm_prefetch((const char *)(bp + p * pe + (size_t)j * 2 * BF16_NR + ZB_PF), _MM_HINT_T0);
            __m256bh w[2];
            _Pragma("GCC unroll 2") for (int p = 0; p < NP; p++)
                w[p] = (__m256bh)_mm256_loadu_si256((const __m256i *)(bp + p * pe + (size_t)(j + s) * 2 * BF16_NR));
            _Pragma("GCC unroll 8") for (int t = 0; t < MT; t++) {
                int32_t xp;
                memcpy(&xp, x + (size_t)t * K + 2 * (j + s), sizeof xp);
                const __m256bh xv = (__m256bh)_mm256_set1_epi32(xp);
                _Pragma("GCC unroll 2") for (int p = 0; p < NP; p++) a[s][t][p] = _mm256_dpbf16_ps(a[s][t][p], w[p], xv);
            }
        }
    for (; j < j1; j++) { /* the pairs left, and odd K's last one (x_pair_bf16) */
        __m256bh w[2];
        _Pragma("GCC unroll 2") for (int p = 0; p < NP; p++)
            w[p] = (__m256bh)_mm256_loadu_si256((const __m256i *)(bp + p * pe + (size_t)j * 2 * BF16_NR));
        _Pragma("GCC unroll 8") for (int t = 0; t < MT; t++) {
            const __m256bh xv = (__m256bh)_mm256_set1_epi32((int)x_pair_bf16(x + (size_t)t * K, K, j));
            _Pragma("GCC unroll 2") for (int p = 0; p < NP; p++) a[0][t][p] = _mm256_dpbf16_ps(a[0][t][p], w[p], xv);
        }
    }
    _Pragma("GCC unroll 8") for (int t = 0; t < MT; t++) _Pragma("GCC unroll 2") for (int p = 0; p < NP; p++) {
        __m256 v = a[0][t][p];
        if (S == 2) v = _mm256_add_ps(v, a[1][t][p]);
        _mm256_storeu_ps(o[t] + BF16_NR * p, v);
    }
}
typedef void zb_tile_fn(const bf16 *x, int K, const bf16 *bp, size_t pe, long j0, long j1, float o[ZB_MR][2 * BF16_NR]);
#define ZB_TILE(M, NP, S)                                                                                              \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"), noinline)) static void zb_tile_##M##_##NP(       \
        const bf16 *x, int K, const bf16 *bp, size_t pe, long j0, long j1, float o[ZB_MR][2 * BF16_NR]) {             \
        zb_tile(x, K, bp, pe, j0, j1, M, NP, S, o);                                                                    \
    }
ZB_TILE(1, 1, 2) ZB_TILE(2, 1, 2) ZB_TILE(3, 1, 2) ZB_TILE(4, 1, 2)
ZB_TILE(5, 1, 1) ZB_TILE(6, 1, 1) ZB_TILE(7, 1, 1) ZB_TILE(8, 1, 1)
ZB_TILE(1, 2, 2) ZB_TILE(2, 2, 2) ZB_TILE(3, 2, 2) ZB_TILE(4, 2, 2)
ZB_TILE(5, 2, 1) ZB_TILE(6, 2, 1) ZB_TILE(7, 2, 1) ZB_TILE(8, 2, 1)
static zb_tile_fn *const g_zb_tiles[2][ZB_MR + 1] = {
    {NULL, zb_tile_1_1, zb_tile_2_1, zb_tile_3_1, zb_tile_4_1, zb_tile_5_1, zb_tile_6_1, zb_tile_7_1, zb_tile_8_1},
    {NULL, zb_tile_1_2, zb_tile_2_2, zb_tile_3_2, zb_tile_4_2, zb_tile_5_2, zb_tile_6_2, zb_tile_7_2, zb_tile_8_2}};
#endif

/* Written with 8-lane vectors: GCC's -O2 left the plain loop scalar (a third of a batch-32
 * step went to it, perf). */
CPU_SIMD_CLONES static void widen_bf16(float *dst, const bf16 *src, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) v8_store(dst + i, v8_bf16(src + i));
    for (; i < n; i++) dst[i] = tp_bf16_to_f32(src[i]);
}

float *bf16_scratch(tp_cpu_bf16 *c, int slot, size_t n) {
    if (slot < 0 || slot >= c->n_scratch)
        tp_die("cpu bf16: scratch slot %d out of range (%d slots for %d threads)", slot, c->n_scratch, c->n_threads);
    if (c->scratch_cap[slot] < n) {
        free(c->scratch[slot]);
        c->scratch[slot] = tp_malloc((n ? n : 1) * sizeof(float) + 64);
        c->scratch_cap[slot] = n;
    }
    return c->scratch[slot];
}

/* x [T, K] bf16 -> f32 [T, bf16_ldx(K)] (the panel kernels' x: a zero at k = K when K is odd). */
static float *widen_x(tp_cpu_bf16 *c, const bf16 *x, int T, int K) {
    const size_t ldx = bf16_ldx(K);
    float *xf = bf16_scratch(c, 0, (size_t)T * ldx);
    for (int t = 0; t < T; t++) {
        widen_bf16(xf + t * ldx, x + (size_t)t * K, (size_t)K);
        if (K & 1) xf[t * ldx + K] = 0.0f;
    }
    return xf;
}

/* The epilogue of epi_store on rows [t0, t0 + T) x columns [n0, n0 + nn) of y from an f32 tile
 * (its rows [0, T), row stride ld), 8 columns at a time (GCC's -O2 leaves the scalar loop scalar: 9% of a prefill); the same
 * f32 operations in the same order, so the same bits. */
CPU_SIMD_CLONES static void epi_tile(const epi *e, const float *tile, int ld, int t0, int T, int n0, int nn) {
    const v8u32 nanb = {0x7f800000u, 0x7f800000u, 0x7f800000u, 0x7f800000u,
                        0x7f800000u, 0x7f800000u, 0x7f800000u, 0x7f800000u};
    for (int t = 0; t < T; t++) {
        const size_t row = (size_t)(t0 + t) * e->N + n0;
        int j = 0;
        for (; j + 8 <= nn; j += 8) {
            v8f v = v8_load(tile + (size_t)t * ld + j);
            if (e->accumulate) v += v8_bf16((const bf16 *)e->y + row + j);
            if (e->bias) v += v8_bf16(e->bias + n0 + j);
            if (e->out_f32) { v8_store((float *)e->y + row + j, v); continue; }
            if (e->gelu) {
                float g[8];
                v8_store(g, v);
                #pragma omp simd
                for (int i = 0; i < 8; i++) g[i] = tp_gelu_new(g[i]); /* 8 lanes at once (tp_act.h) */
                v = v8_load(g);
            }
            v8u32 u;
            __builtin_memcpy(&u, &v, sizeof u);
            const v8u32 r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16, q = (u >> 16) | 0x40u;
            const v8u32 m = (v8u32)((u & 0x7fffffffu) > nanb); /* NaN lanes -> quiet NaN: tp_f32_to_bf16 */
            const v8u32 o = (q & m) | (r & ~m);
            const v8u16 h = __builtin_convertvector(o, v8u16);
            __builtin_memcpy((bf16 *)e->y + row + j, &h, sizeof h);
        }
        for (; j < nn; j++) epi_store(e, t0 + t, n0 + j, tile[(size_t)t * ld + j]);
    }
}

/* The c kernel on panels [P0, P1) (the avx2 one's reference twin, tests/cpu_bf16): per pair of
 * k, the 8 rows' (w[k], w[k+1]) as 8 uint32 lanes, w[k] = lane << 16 and w[k+1] = lane &
 * 0xffff0000 as f32; even and odd products summed apart, as the avx2 kernel does, 4 tokens a
 * pass (missing ones repeat token t0). xf: widen_x's. */
static void panels_c(const float *xf, const bf16 *W, int T, int N, int K, int P0, int P1, const epi *e) {
    const int K2 = bf16_k2(K);
    const size_t ldx = bf16_ldx(K);
    for (int P = P0; P < P1; P++) {
        const bf16 *bp = bf16_panel(W, K, P);
        const int n0 = P * BF16_NR, nn = N - n0 < BF16_NR ? N - n0 : BF16_NR;
        for (int t0 = 0; t0 < T; t0 += 4) {
            const int m = T - t0 < 4 ? T - t0 : 4;
            const float *xs[4];
            for (int i = 0; i < 4; i++) xs[i] = xf + (size_t)(t0 + (i < m ? i : 0)) * ldx;
            v8f ae[4], ao[4];
            for (int i = 0; i < 4; i++) ae[i] = ao[i] = v8_splat(0);
            for (int j = 0; j < K2; j++) {
                v8u32 v;
                __builtin_memcpy(&v, bp + (size_t)j * 2 * BF16_NR, sizeof v);
                const v8u32 ue = v << 16, uo = v & 0xffff0000u;
                v8f we, wo;
                __builtin_memcpy(&we, &ue, sizeof we);
                __builtin_memcpy(&wo, &uo, sizeof wo);
                for (int i = 0; i < 4; i++) {
                    ae[i] += we * v8_splat(xs[i][2 * j]);
                    ao[i] += wo * v8_splat(xs[i][2 * j + 1]);
                }
            }
            float tile[4][BF16_NR];
            for (int i = 0; i < m; i++) v8_store(tile[i], ae[i] + ao[i]);
            epi_tile(e, &tile[0][0], BF16_NR, t0, m, n0, nn);
        }
    }
}

static void panels_epi(const void *ctx, const float *tile, int ld, int t0, int m, int n0, int nn) {
    epi_tile(ctx, tile, ld, t0, m, n0, nn);
}

#if defined(__x86_64__)
/* The avx512bf16 kernel on panels [P0, P1), two at a time, 8 tokens a tile, bf16 x [T, K]. */
static void panels_avx512bf16(const bf16 *x, const bf16 *W, int T, int N, int K, int P0, int P1, const epi *e) {
    const size_t pe = bf16_panel_elems(K);
    const long K2 = bf16_k2(K);
    for (int P = P0; P < P1; P += 2) {
        const int np = P1 - P < 2 ? P1 - P : 2;
        const int n0 = P * BF16_NR, nn = N - n0 < np * BF16_NR ? N - n0 : np * BF16_NR;
        for (int t0 = 0; t0 < T; t0 += ZB_MR) {
            const int m = T - t0 < ZB_MR ? T - t0 : ZB_MR;
            float o[ZB_MR][2 * BF16_NR];
            g_zb_tiles[np - 1][m](x + (size_t)t0 * K, K, bf16_panel(W, K, P), pe, 0, K2, o);
            epi_tile(e, &o[0][0], 2 * BF16_NR, t0, m, n0, nn);
        }
    }
}
#endif

/* The GEMV of a tier on panels [P0, P1), on the calling thread; xf: widen_x's (avx2, c). */
static void gemv_panels(bf16_isa isa, const bf16 *x, const float *xf, const bf16 *W, int T, int N, int K, int P0,
                        int P1, const epi *e) {
#if defined(__x86_64__)
    if (isa == BF16_ISA_AVX512BF16) panels_avx512bf16(x, W, T, N, K, P0, P1, e);
    else if (isa == BF16_ISA_AVX2) cpu_bf16_panels_avx2(xf, W, T, N, K, P0, P1, panels_epi, e);
    else
#endif
        panels_c(xf, W, T, N, K, P0, P1, e);
}

/* Threads take contiguous ranges of panels. cpu_s: NULL, or where the CPU time of x's widening
 * plus the largest of the threads' CPU times over their ranges goes (the tuning's timed run). */
static void gemv_path(tp_backend *b, bf16_isa isa, const bf16 *x, const bf16 *W, int T, int N, int K, const epi *e,
                      double *cpu_s) {
    tp_cpu_bf16 *c = bf16_impl(b);
    const int nt = c->n_threads;
    const double tw = cpu_s ? cpu_tune_thread_seconds() : 0.0;
    const float *xf = isa != BF16_ISA_AVX512BF16 ? widen_x(c, x, T, K) : NULL;
    const double widen = cpu_s ? cpu_tune_thread_seconds() - tw : 0.0;
    const int np = bf16_n_panels(N), per = (np + nt - 1) / nt;
    double worst = 0.0;
    #pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && (double)T * N * K >= 1 << 17) reduction(max : worst)
    for (int P0 = 0; P0 < np; P0 += per) {
        const double t0 = cpu_s ? cpu_tune_thread_seconds() : 0.0;
        gemv_panels(isa, x, xf, W, T, N, K, P0, np - P0 < per ? np : P0 + per, e);
        if (cpu_s) worst = fmax(worst, cpu_tune_thread_seconds() - t0);
    }
    if (cpu_s) *cpu_s = widen + worst;
}

/* No oneDNN: per thread, blocks of PANEL rows of W widened to f32, then sgemm into an f32 tile
 * (256 rows: OpenBLAS packs x again for every call, which at 64 rows cost half the rate)
 * and the epilogue. x is widened once (widen_x). */
#define PANEL 256
static void blas_path(tp_backend *b, const bf16 *x, const bf16 *W, int T, int N, int K, const epi *e) {
    tp_cpu_bf16 *c = bf16_impl(b);
    const int nt = c->n_threads, P = PANEL;
    const float *xf = widen_x(c, x, T, K);
    #pragma omp parallel num_threads(nt)
    {
        const int i = omp_get_thread_num(); /* < nt: each thread grows its own slots only */
        float *wf = bf16_scratch(c, 1 + 2 * i, (size_t)P * K), *tile = bf16_scratch(c, 2 + 2 * i, (size_t)T * P);
        #pragma omp for schedule(dynamic, 1)
        for (int n0 = 0; n0 < N; n0 += P) {
            const int nn = N - n0 < P ? N - n0 : P;
            for (int r = 0; r < nn; r++) { /* the pairs of each row, widened from its panel */
                const bf16 *s = bf16_panel(W, K, (n0 + r) / BF16_NR) + 2 * ((n0 + r) % BF16_NR);
                float *o = wf + (size_t)r * K;
                for (int k = 0; k < K; k++) o[k] = tp_bf16_to_f32(s[(size_t)(k / 2) * 2 * BF16_NR + (k & 1)]);
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, nn, K, 1.0f, xf, (int)bf16_ldx(K), wf, K, 0.0f, tile, P);
            epi_tile(e, tile, P, 0, T, n0, nn);
        }
    }
}

/* The FMA GEMM (cpu_gemm_bf16w.c) on the panels and x widened once; each tile through epi_tile. */
static void fma_path(tp_backend *b, const bf16 *x, const bf16 *W, int T, int N, int K, const epi *e) {
    tp_cpu_bf16 *c = bf16_impl(b);
    cpu_gemm_bf16w_avx2(widen_x(c, x, T, K), W, T, N, K, panels_epi, e, c->n_threads);
}

/* ---- matrix layout: panels (cpu_bf16.h), then (oneDNN) its blocked W^T at a 4 KiB-aligned
 * offset ---- */
static size_t stored_bytes(const tp_cpu_bf16 *c, int N, int K) {
    (void)c;
    const size_t n = (size_t)bf16_n_panels(N) * bf16_panel_elems(K);
    return (n * 2 + 4095) & ~(size_t)4095;
}

size_t bf16_matrix_bytes(tp_backend *b, int rows, int cols) {
    tp_cpu_bf16 *c = bf16_impl(b);
    return stored_bytes(c, rows, cols) + (c->dnnl ? tp_dnnl_weights_bytes(c->dnnl, rows, cols) : 0);
}

/* Where a matrix's elements come from: a host matrix of type st, or fill_random's draws. */
typedef struct {
    const void *src;
    tp_dtype st;
    uint64_t seed;
    float mean, std;
} mat_src;

/* Rows [n0, n0 + nn) of the source as plain bf16 [nn, K] at out. */
static void src_rows(tp_backend *b, const mat_src *s, bf16 *out, int n0, int nn, int K) {
    const size_t first = (size_t)n0 * K, n = (size_t)nn * K;
    if (s->src) b->upload(b, out, (const char *)s->src + first * tp_dtype_size(s->st), s->st, n);
    else bf16_fill_random_range(b, out, first, n, s->seed, s->mean, s->std);
}

/* The matrix at dst: the panels, and oneDNN's copy (reordered from the plain rows), through a
 * plain bf16 copy of PACK_ROWS rows at a time, or of the whole matrix for the reorder. Then the
 * first matrix of its shape picks the shape's GEMV kernel (tune_shape). */
#define PACK_ROWS 512
static void tune_shape(tp_backend *b, const void *W, int N, int K);
static void store_matrix(tp_backend *b, void *dst, const mat_src *s, int N, int K) {
    tp_cpu_bf16 *c = bf16_impl(b);
    const int rows = c->dnnl ? N : PACK_ROWS; /* a multiple of 8 unless all of N */
    bf16 *plain = tp_malloc((size_t)(N < rows ? N : rows) * K * 2 + 2);
    for (int n0 = 0; n0 < N; n0 += rows) {
        const int nn = N - n0 < rows ? N - n0 : rows;
        src_rows(b, s, plain, n0, nn, K);
        bf16_pack_panels((bf16 *)dst + (size_t)(n0 / BF16_NR) * bf16_panel_elems(K), plain, nn, K, c->n_threads);
    }
    if (c->dnnl) tp_dnnl_reorder(c->dnnl, (char *)dst + stored_bytes(c, N, K), plain, N, K);
    free(plain);
    tune_shape(b, dst, N, K);
}

void bf16_matrix_upload(tp_backend *b, void *dst, const void *src_host, tp_dtype st, int rows, int cols) {
    const mat_src s = {.src = src_host, .st = st};
    store_matrix(b, dst, &s, rows, cols);
}

/* Element (r, c) is fill_random's draw r * cols + c, as a plain [rows, cols] buffer holds it. */
void bf16_matrix_fill_random(tp_backend *b, void *dst, int rows, int cols, uint64_t seed, float mean, float std) {
    const mat_src s = {.seed = seed, .mean = mean, .std = std};
    store_matrix(b, dst, &s, rows, cols);
}

/* ---- the GEMV tier per shape and T range (cpu_tune.h): measured at load on the stored matrix,
 * cached, forced (TPGEN_CPU_ISA), or the highest below TUNE_MIN_ELEMS ---- */
#define BF16_KERNEL_SET "b16k4" /* bump when a bf16 GEMV kernel or its timed run changes */
#define TUNE_MIN_ELEMS (1 << 20)
static bf16_shape *shape_find(tp_cpu_bf16 *c, int N, int K) {
    for (int i = 0; i < c->n_shapes; i++)
        if (c->shapes[i].N == N && c->shapes[i].K == K) return &c->shapes[i];
    return NULL;
}
/* Two GEMV choices a shape (cpu_tune_pick_gemv): up to CPU_TUNE_ONE_T tokens and above. */
static bf16_isa shape_isa(tp_cpu_bf16 *c, int N, int K, int T) {
    const bf16_shape *s = shape_find(c, N, K);
    return !s ? c->isa : T <= CPU_TUNE_ONE_T ? s->isa : s->isa_batch;
}

/* One timed run: the GEMV at t->T tokens with the backend's threads as a decode step runs it,
 * the matrix evicted from the caches first (cpu_tune.h), into scratch. */
typedef struct {
    tp_backend *b;
    const bf16 *W, *x;
    bf16 *y;
    int N, K, T;
    bf16_isa isa[BF16_N_ISA];
} tune_ctx;
static double tune_run(void *ctx, int cand) {
    const tune_ctx *t = ctx;
    const epi e = {t->y, NULL, t->N, 0, 0, 0};
    double s;
    gemv_path(t->b, t->isa[cand], t->x, t->W, t->T, t->N, t->K, &e, &s);
    return s;
}

static void tune_shape(tp_backend *b, const void *W, int N, int K) {
    tp_cpu_bf16 *c = bf16_impl(b);
    if (c->isa_forced || (size_t)N * K < TUNE_MIN_ELEMS || shape_find(c, N, K) || c->n_shapes == BF16_MAX_SHAPES)
        return;
    tune_ctx t = {.b = b, .W = W, .N = N, .K = K};
    const char *names[BF16_N_ISA];
    int n = 0;
    for (int i = BF16_N_ISA - 1; i >= 0; i--) /* highest first: a tie keeps it */
        if (c->isa_cands & (1u << i)) {
            t.isa[n] = (bf16_isa)i;
            names[n++] = g_isa_short[i];
        }
    bf16 *x = tp_malloc((size_t)CPU_TUNE_T2 * K * sizeof *x); /* [CPU_TUNE_T2, K] */
    for (size_t k = 0; k < (size_t)CPU_TUNE_T2 * K; k++)
        x[k] = tp_f32_to_bf16((float)((long)(k * 7919) % 2001 - 1000) / 1000.0f);
    t.x = x;
    t.y = tp_malloc((size_t)CPU_TUNE_T2 * N * sizeof *t.y);
    const cpu_tune_key key = {.family = "bf16-gemv", .kernel_set = BF16_KERNEL_SET, .N = N, .K = K, .n_cand = n,
                              .names = names, .stream = W,
                              .stream_bytes = (size_t)bf16_n_panels(N) * bf16_panel_elems(K) * 2, .recheck = 1};
    bf16_shape *s = &c->shapes[c->n_shapes++];
    s->N = N;
    s->K = K;
    int pick[2];
    char *how[2] = {s->how, s->how_batch};
    cpu_tune_pick_gemv(&key, tune_run, &t, &t.T, pick, how, sizeof s->how, c->verbose ? "cpu bf16" : NULL);
    s->isa = t.isa[pick[0]];
    s->isa_batch = t.isa[pick[1]];
    free(x);
    free(t.y);
}

const char *cpu_bf16_gemv_choice(tp_backend *b, int N, int K, const char **how) {
    if (b->act != TP_BF16 || strcmp(b->name, "cpu") != 0) return NULL;
    tp_cpu_bf16 *c = bf16_impl(b);
    const bf16_shape *s = shape_find(c, N, K);
    if (how)
        *how = s                               ? s->how
               : c->isa_forced                 ? "forced by TPGEN_CPU_ISA"
               : (size_t)N * K < TUNE_MIN_ELEMS ? "the highest tier (below the measured size)"
                                                : "the highest tier (not measured)";
    return g_isa_short[s ? s->isa : c->isa];
}

/* The path by T (the file comment); bf16_gemm_kernel names it. */
typedef enum { PATH_GEMV, PATH_DNNL, PATH_BLAS, PATH_FMA } gemm_path;
static gemm_path path_pick(const tp_cpu_bf16 *c, int T) {
    return T <= c->few_tokens ? PATH_GEMV : c->dnnl ? PATH_DNNL : c->fma_gemm ? PATH_FMA : PATH_BLAS;
}

const char *bf16_gemm_kernel(tp_backend *b, int T) {
    tp_cpu_bf16 *c = bf16_impl(b);
    switch (path_pick(c, T)) {
    case PATH_GEMV: { /* the tiers the GEMV ran ("+" between them where shapes chose differently) */
        const unsigned used = c->isa_used ? c->isa_used : 1u << c->isa;
        snprintf(c->gemv_name, sizeof c->gemv_name, "gemv-bf16-");
        for (int i = 0, first = 1; i < BF16_N_ISA; i++)
            if (used & (1u << i)) {
                snprintf(c->gemv_name + strlen(c->gemv_name), sizeof c->gemv_name - strlen(c->gemv_name), "%s%s",
                         first ? "" : "+", g_isa_short[i]);
                first = 0;
            }
        return c->gemv_name;
    }
    case PATH_DNNL:
        if (!c->dnnl_name[0]) snprintf(c->dnnl_name, sizeof c->dnnl_name, "onednn-bf16 (%s)", tp_dnnl_impl(c->dnnl));
        return c->dnnl_name;
    case PATH_FMA:
        return "gemm-bf16w-fma-avx2";
    default:
        return "openblas-sgemm-bf16-panels";
    }
}

static void gemm(tp_backend *b, void *y, const void *x, const void *W, const void *bias, int T, int N, int K,
                 int accumulate, int gelu, int out_f32, unsigned bit, const char *op) {
    if (T <= 0 || N <= 0) return;
    tp_cpu_bf16 *c = bf16_impl(b);
    const epi e = {y, bias, N, accumulate, gelu, out_f32};
    char path[160];
    const gemm_path pk = path_pick(c, T);
    if (pk == PATH_GEMV || K <= 0) {
        const bf16_isa isa = shape_isa(c, N, K, T);
        snprintf(path, sizeof path, "GEMV %s (T <= %d)", bf16_isa_name(isa), c->few_tokens);
        bf16_report(b, bit, op, path);
        if (K <= 0) {
            for (int t = 0; t < T; t++)
                for (int n = 0; n < N; n++) epi_store(&e, t, n, 0.0f);
            return;
        }
        c->isa_used |= 1u << isa;
        gemv_path(b, isa, x, W, T, N, K, &e, NULL);
    } else if (pk == PATH_DNNL) {
        snprintf(path, sizeof path, "oneDNN matmul %s (T > %d)", tp_dnnl_impl(c->dnnl), c->few_tokens);
        bf16_report(b, bit + 1, op, path);
        tp_dnnl_matmul(c->dnnl, y, x, (const char *)W + stored_bytes(c, N, K), bias, T, N, K, accumulate, gelu, out_f32);
    } else if (pk == PATH_FMA) {
        snprintf(path, sizeof path, "FMA GEMM on the bf16 weight panels (T > %d)", c->few_tokens);
        bf16_report(b, bit + 3, op, path);
        fma_path(b, x, W, T, N, K, &e);
    } else {
        snprintf(path, sizeof path, "OpenBLAS sgemm on widened bf16 panels (T > %d)", c->few_tokens);
        bf16_report(b, bit + 2, op, path);
        blas_path(b, x, W, T, N, K, &e);
    }
}

void bf16_matmul(tp_backend *b, void *y, const void *x, const void *W, const void *bias, int T, int N, int K,
                 int accumulate) {
    gemm(b, y, x, W, bias, T, N, K, accumulate, 0, 0, 4, "matmul");
}
void bf16_matmul_f32out(tp_backend *b, float *y, const void *x, const void *W, const void *bias, int T, int N,
                        int K) {
    gemm(b, y, x, W, bias, T, N, K, 0, 0, 1, 8, "matmul_f32out (logits)");
}
void bf16_matmul_gelu(tp_backend *b, void *y, const void *x, const void *W, const void *bias, int T, int N, int K) {
    gemm(b, y, x, W, bias, T, N, K, 0, 1, 0, 12, "matmul_gelu (fc_in)");
}
