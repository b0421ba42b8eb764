/* bf16 GEMMs: y[T,N] = epilogue(x[T,K] @ W^T), W [N, K] bf16, f32 accumulation, one rounding.
 *
 * By T (tokens of the step):
 *  - T <= few_tokens (decode batches): GEMV-style kernels that stream each W row once per step
 *    for every token, chosen by CPUID:
 *      avx512bf16: vdpbf16ps on bf16 x and W (32 products per instruction, f32 sums; 2 rows x
 *                  4 tokens per register block);
 *      avx2:       one row at a time for 1..2 tokens, two rows for 3..4, 16 weights widened to
 *                  f32 by a shift and a mask, FMA on x split into its even and odd elements
 *                  (rows_avx2 below);
 *      c:          plain C on f32 x (2 rows x 4 tokens), the avx2 kernel's reference twin.
 *  - larger T (batched steps, prefill): oneDNN matmul on its reordered copy of W (bf16 in, f32
 *    accumulation, bias/sum/GELU in its f32 post-ops), when oneDNN runs bf16 natively here;
 *    otherwise, with AVX2 + FMA, our FMA GEMM on W widened straight into its packed layout
 *    (cpu_gemm_bf16w.c); else OpenBLAS sgemm on f32 panels of W widened per thread.
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

#if defined(__x86_64__)
#include <immintrin.h>
#endif

typedef uint16_t bf16;

const char *bf16_isa_name(bf16_isa isa) {
    return isa == BF16_ISA_AVX512BF16 ? "avx512bf16 (vdpbf16ps)" : isa == BF16_ISA_AVX2 ? "avx2 (FMA on widened bf16)"
                                                                                      : "c (portable fallback)";
}

static bf16_isa isa_detect(void) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw")) return BF16_ISA_AVX512BF16;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return BF16_ISA_AVX2;
#endif
    return BF16_ISA_C;
}

bf16_isa bf16_isa_pick(void) {
    const bf16_isa best = isa_detect();
    const char *e = getenv("TPGEN_CPU_ISA");
    if (!e || !*e) return best;
    bf16_isa want;
    if (strcmp(e, "avx512bf16") == 0) want = BF16_ISA_AVX512BF16;
    else if (strcmp(e, "avx2") == 0) want = BF16_ISA_AVX2;
    else if (strcmp(e, "c") == 0) want = BF16_ISA_C;
    else tp_die_all("TPGEN_CPU_ISA=%s: expected avx512bf16, avx2 or c", e);
    if (want > best) tp_die_all("TPGEN_CPU_ISA=%s: this CPU does not support it (best here: %s)", e, bf16_isa_name(best));
    return want;
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

/* ---- GEMV kernels: rows [n0, n1) of W for all T tokens ---- */
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

/* xf: x widened to f32 [T, K]. The c kernel (the avx2 one's reference twin, tests/cpu_bf16). */
static void rows_c(const float *xf, const bf16 *W, int T, int K, int n0, int n1, const epi *e) {
    const int K8 = K & ~7;
    for (int n = n0; n < n1; n += 2) {
        const int two = n + 1 < n1;
        const bf16 *w0 = W + (size_t)n * K, *w1 = two ? w0 + K : w0;
        for (int t0 = 0; t0 < T; t0 += 4) {
            const int m = T - t0 < 4 ? T - t0 : 4; /* tokens in this group; missing ones repeat x0 */
            const float *x0 = xf + (size_t)t0 * K;
            const float *xs[4] = {x0, m > 1 ? x0 + K : x0, m > 2 ? x0 + 2 * (size_t)K : x0,
                                  m > 3 ? x0 + 3 * (size_t)K : x0};
            v8f a0 = v8_splat(0), a1 = a0, a2 = a0, a3 = a0, c0 = a0, c1 = a0, c2 = a0, c3 = a0;
            for (int k = 0; k < K8; k += 8) {
                const v8f wa = v8_bf16(w0 + k), wb = v8_bf16(w1 + k);
                v8f xv = v8_load(xs[0] + k);
                a0 += wa * xv; c0 += wb * xv;
                xv = v8_load(xs[1] + k);
                a1 += wa * xv; c1 += wb * xv;
                xv = v8_load(xs[2] + k);
                a2 += wa * xv; c2 += wb * xv;
                xv = v8_load(xs[3] + k);
                a3 += wa * xv; c3 += wb * xv;
            }
            float ra[4] = {v8_sum(a0), v8_sum(a1), v8_sum(a2), v8_sum(a3)};
            float rb[4] = {v8_sum(c0), v8_sum(c1), v8_sum(c2), v8_sum(c3)};
            for (int k = K8; k < K; k++)
                for (int i = 0; i < 4; i++) {
                    ra[i] += tp_bf16_to_f32(w0[k]) * xs[i][k];
                    rb[i] += tp_bf16_to_f32(w1[k]) * xs[i][k];
                }
            for (int i = 0; i < m; i++) {
                epi_store(e, t0 + i, n, ra[i]);
                if (two) epi_store(e, t0 + i, n + 1, rb[i]);
            }
        }
    }
}

#if defined(__x86_64__)
/* ---- avx2: one W row at a time, x pre-split into its even and odd elements ----
 * 16 bf16 of a row load as 8 uint32 lanes, lane j = (w[2j+1] << 16) | w[2j]: w[2j] as f32 is
 * lane << 16, w[2j+1] is lane & 0xffff0000 -- two integer ops widen 16 weights, no shuffles.
 * Their partners are x[2j] and x[2j+1]; xeo holds, per token, xe = x[0::2] then xo = x[1::2]
 * (f32, [T][2][K2], K2 = ceil(K / 2)), split once per call. One row at a time is one
 * sequential stream, which the hardware prefetcher follows at the full read rate, plus a
 * software prefetch 1 KiB ahead of every line (the int8 GEMV's scheme, cpu_int8.c; a prefetch
 * per 128-byte step instead of per line left half the lines to the hardware: 13 vs 20 GB/s).
 * MT = 1..4 tokens per pass of the row (a row of K <= 4096 stays in L1/L2 for the next pass at
 * T > 4), UK partial sums per token and parity keep 2 * MT * UK >= 6 FMA chains in flight. */
#define AVX2_FN static inline __attribute__((always_inline, target("avx2,fma")))
#define BF_UNROLL _Pragma("GCC unroll 8")
#define BF_PREFETCH 512 /* elements (1 KiB): 47 vs 50 ms/step at batch 1 for 512 B, 3 of 3 bench pairs */
/* row2_avx2's distance, 4 KiB: bf16 at batch 8 took 64.7-65.4 ms a step against 73.2-74.9 with
 * 1 KiB (tpgen bench, 2026-12-02; its FMAs take longer per line than one row's, so the 1 KiB
 * ahead came due before the line was in) */
#define BF_PREFETCH2 2048

AVX2_FN float hsum_ps(__m256 v) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 s2 = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

/* s[t] = w . x_t over k in [0, K16) for MT tokens; xe[t] / xo[t] are token t's halves. */
AVX2_FN void row_avx2(const float *const *xe, const float *const *xo, const bf16 *w, int K16, const int MT,
                      float s[4]) {
    const int UK = MT == 1 ? 4 : MT == 2 ? 2 : 1;
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
    __m256 ae[4][4], ao[4][4];
    BF_UNROLL for (int u = 0; u < UK; u++)
        BF_UNROLL for (int t = 0; t < MT; t++) ae[u][t] = ao[u][t] = _mm256_setzero_ps();
    int k = 0;
    for (; k + 16 * UK <= K16; k += 16 * UK) {
        BF_UNROLL for (int u = 0; u < UK; u += 2) /* each 64-byte line of the step */
            _mm_prefetch((const char *)(w + k + 16 * u + BF_PREFETCH), _MM_HINT_T0);
        BF_UNROLL for (int u = 0; u < UK; u++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(w + k + 16 * u));
            const __m256 we = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
            const __m256 wo = _mm256_castsi256_ps(_mm256_and_si256(v, hi));
            const int j = (k + 16 * u) / 2;
            BF_UNROLL for (int t = 0; t < MT; t++) {
                ae[u][t] = _mm256_fmadd_ps(we, _mm256_loadu_ps(xe[t] + j), ae[u][t]);
                ao[u][t] = _mm256_fmadd_ps(wo, _mm256_loadu_ps(xo[t] + j), ao[u][t]);
            }
        }
    }
    for (; k < K16; k += 16) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(w + k));
        const __m256 we = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
        const __m256 wo = _mm256_castsi256_ps(_mm256_and_si256(v, hi));
        BF_UNROLL for (int t = 0; t < MT; t++) {
            ae[0][t] = _mm256_fmadd_ps(we, _mm256_loadu_ps(xe[t] + k / 2), ae[0][t]);
            ao[0][t] = _mm256_fmadd_ps(wo, _mm256_loadu_ps(xo[t] + k / 2), ao[0][t]);
        }
    }
    BF_UNROLL for (int t = 0; t < MT; t++) {
        __m256 a = _mm256_add_ps(ae[0][t], ao[0][t]);
        BF_UNROLL for (int u = 1; u < UK; u++) a = _mm256_add_ps(a, _mm256_add_ps(ae[u][t], ao[u][t]));
        s[t] = hsum_ps(a);
    }
}

/* s0[t], s1[t] = rows w0, w1 . x_t over k in [0, K16), MT = 3..4 tokens. Per 16 weights of each
 * row: one load and two widenings, 2 MT loads of x shared by the two rows, 4 MT FMAs, the even
 * and odd products into one accumulator per (row, token): 8 chains at MT = 4. One row at a time
 * (row_avx2) takes 9 loads per 8 FMAs at MT = 4 and was load-bound from 3 tokens on: bf16 at
 * batch 8 ran at 0.94x f32 (docs/PERFORMANCE.md, 2026-12-02 09:50). */
AVX2_FN void row2_avx2(const float *const *xe, const float *const *xo, const bf16 *w0, const bf16 *w1, int K16,
                       const int MT, float s0[4], float s1[4]) {
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
    __m256 a0[4], a1[4];
    BF_UNROLL for (int t = 0; t < MT; t++) a0[t] = a1[t] = _mm256_setzero_ps();
    for (int k = 0; k < K16; k += 16) {
        if ((k & 31) == 0) { /* each 64-byte line of both rows */
            _mm_prefetch((const char *)(w0 + k + BF_PREFETCH2), _MM_HINT_T0);
            _mm_prefetch((const char *)(w1 + k + BF_PREFETCH2), _MM_HINT_T0);
        }
        const __m256i v0 = _mm256_loadu_si256((const __m256i *)(w0 + k)),
                      v1 = _mm256_loadu_si256((const __m256i *)(w1 + k));
        const __m256 we0 = _mm256_castsi256_ps(_mm256_slli_epi32(v0, 16)),
                     wo0 = _mm256_castsi256_ps(_mm256_and_si256(v0, hi)),
                     we1 = _mm256_castsi256_ps(_mm256_slli_epi32(v1, 16)),
                     wo1 = _mm256_castsi256_ps(_mm256_and_si256(v1, hi));
        const int j = k / 2;
        BF_UNROLL for (int t = 0; t < MT; t++) {
            const __m256 xev = _mm256_loadu_ps(xe[t] + j), xov = _mm256_loadu_ps(xo[t] + j);
            a0[t] = _mm256_fmadd_ps(we0, xev, a0[t]);
            a1[t] = _mm256_fmadd_ps(we1, xev, a1[t]);
            a0[t] = _mm256_fmadd_ps(wo0, xov, a0[t]);
            a1[t] = _mm256_fmadd_ps(wo1, xov, a1[t]);
        }
    }
    BF_UNROLL for (int t = 0; t < MT; t++) {
        s0[t] = hsum_ps(a0[t]);
        s1[t] = hsum_ps(a1[t]);
    }
}

/* The K tail past K16 of row w for token i (xe / xo its halves), then the epilogue. */
AVX2_FN void row_tail_store(const epi *e, const bf16 *w, const float *xe, const float *xo, int K16, int K, int t,
                            int n, float s) {
    for (int k = K16; k < K; k++) s += tp_bf16_to_f32(w[k]) * (k & 1 ? xo : xe)[k / 2];
    epi_store(e, t, n, s);
}

/* xeo: [T][2][K2] (above). Rows [n0, n1), each once per group of up to 4 tokens; with 3+ tokens
 * in a group, rows in pairs (row2_avx2). */
__attribute__((target("avx2,fma"))) static void rows_avx2(const float *xeo, const bf16 *W, int T, int K, int n0, int n1,
                                                          const epi *e) {
    const int K16 = K & ~15, K2 = (K + 1) / 2;
    for (int n = n0; n < n1;) {
        const int pair = T >= 3 && n + 1 < n1;
        const bf16 *w = W + (size_t)n * K, *w1 = w + K;
        for (int t0 = 0; t0 < T; t0 += 4) {
            const int m = T - t0 < 4 ? T - t0 : 4;
            const float *xe[4], *xo[4];
            for (int i = 0; i < 4; i++) {
                xe[i] = xeo + (size_t)(t0 + (i < m ? i : 0)) * 2 * K2;
                xo[i] = xe[i] + K2;
            }
            float s[4] = {0, 0, 0, 0}, s1[4] = {0, 0, 0, 0};
            if (pair && m >= 3) {
                if (m == 4) row2_avx2(xe, xo, w, w1, K16, 4, s, s1);
                else row2_avx2(xe, xo, w, w1, K16, 3, s, s1);
            } else {
                switch (m) {
                case 4: row_avx2(xe, xo, w, K16, 4, s); break;
                case 3: row_avx2(xe, xo, w, K16, 3, s); break;
                case 2: row_avx2(xe, xo, w, K16, 2, s); break;
                default: row_avx2(xe, xo, w, K16, 1, s); break;
                }
                if (pair) { /* m <= 2 here */
                    if (m == 2) row_avx2(xe, xo, w1, K16, 2, s1);
                    else row_avx2(xe, xo, w1, K16, 1, s1);
                }
            }
            for (int i = 0; i < m; i++) {
                row_tail_store(e, w, xe[i], xo[i], K16, K, t0 + i, n, s[i]);
                if (pair) row_tail_store(e, w1, xe[i], xo[i], K16, K, t0 + i, n + 1, s1[i]);
            }
        }
        n += pair ? 2 : 1;
    }
}

/* vdpbf16ps: each lane sums two bf16 products into f32. x and W stay bf16; the K tail (K % 32)
 * is a masked load (zeros contribute nothing). */
__attribute__((target("avx512f,avx512bw,avx512bf16"))) static void rows_avx512bf16(const bf16 *x, const bf16 *W,
                                                                                   int T, int K, int n0, int n1,
                                                                                   const epi *e) {
    for (int n = n0; n < n1; n += 2) {
        const int two = n + 1 < n1;
        const bf16 *w0 = W + (size_t)n * K, *w1 = two ? w0 + K : w0;
        for (int t0 = 0; t0 < T; t0 += 4) {
            const int m = T - t0 < 4 ? T - t0 : 4;
            const bf16 *x0 = x + (size_t)t0 * K;
            const bf16 *xs[4] = {x0, m > 1 ? x0 + K : x0, m > 2 ? x0 + 2 * (size_t)K : x0,
                                 m > 3 ? x0 + 3 * (size_t)K : x0};
            __m512 a[4], c[4];
            for (int i = 0; i < 4; i++) a[i] = c[i] = _mm512_setzero_ps();
            for (int k = 0; k < K; k += 32) {
                const __mmask32 mk = K - k >= 32 ? 0xffffffffu : (__mmask32)((1u << (K - k)) - 1);
                const __m512bh wa = (__m512bh)_mm512_maskz_loadu_epi16(mk, w0 + k);
                const __m512bh wb = (__m512bh)_mm512_maskz_loadu_epi16(mk, w1 + k);
                for (int i = 0; i < 4; i++) {
                    const __m512bh xv = (__m512bh)_mm512_maskz_loadu_epi16(mk, xs[i] + k);
                    a[i] = _mm512_dpbf16_ps(a[i], xv, wa);
                    c[i] = _mm512_dpbf16_ps(c[i], xv, wb);
                }
            }
            for (int i = 0; i < m; i++) {
                epi_store(e, t0 + i, n, _mm512_reduce_add_ps(a[i]));
                if (two) epi_store(e, t0 + i, n + 1, _mm512_reduce_add_ps(c[i]));
            }
        }
    }
}
#endif

/* Written with 8-lane vectors: GCC's -O2 left the plain loop scalar (a third of a batch-32
 * step went to it, perf). */
CPU_SIMD_CLONES static void widen_bf16(float *dst, const bf16 *src, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) v8_store(dst + i, v8_bf16(src + i));
    for (; i < n; i++) dst[i] = tp_bf16_to_f32(src[i]);
}

/* One token's x [K] -> xe [K2] = x[0::2] and xo [K2] = x[1::2] at dst (f32, K2 = ceil(K / 2);
 * an odd K leaves xo's last element 0). The layout rows_avx2 reads. */
CPU_SIMD_CLONES static void split_bf16(float *dst, const bf16 *src, int K) {
    const int K2 = (K + 1) / 2;
    for (int j = 0; j < K2; j++) {
        dst[j] = tp_bf16_to_f32(src[2 * j]);
        dst[K2 + j] = 2 * j + 1 < K ? tp_bf16_to_f32(src[2 * j + 1]) : 0.0f;
    }
}

static void gemv_path(tp_backend *b, const bf16 *x, const bf16 *W, int T, int N, int K, const epi *e) {
    tp_cpu_bf16 *c = bf16_impl(b);
    const int nt = c->n_threads;
    float *xf = NULL;
    if (c->isa == BF16_ISA_AVX2) {
        const int K2 = (K + 1) / 2;
        xf = bf16_scratch(c, 0, (size_t)T * 2 * K2);
        for (int t = 0; t < T; t++) split_bf16(xf + (size_t)t * 2 * K2, x + (size_t)t * K, K);
    } else if (c->isa == BF16_ISA_C) {
        xf = bf16_scratch(c, 0, (size_t)T * K);
        widen_bf16(xf, x, (size_t)T * K);
    }
    const int chunk = ((N + nt - 1) / nt + 15) & ~15;
    #pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && (double)T * N * K >= 1 << 17)
    for (int n0 = 0; n0 < N; n0 += chunk) {
        const int n1 = N - n0 < chunk ? N : n0 + chunk;
#if defined(__x86_64__)
        if (c->isa == BF16_ISA_AVX512BF16) rows_avx512bf16(x, W, T, K, n0, n1, e);
        else if (c->isa == BF16_ISA_AVX2) rows_avx2(xf, W, T, K, n0, n1, e);
        else
#endif
            rows_c(xf, W, T, K, n0, n1, e);
    }
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

/* No oneDNN: per thread, panels of PANEL rows of W widened to f32, then sgemm into an f32 tile
 * (256 rows: OpenBLAS packs x again for every call, which at 64 rows cost half the rate)
 * and the epilogue. x is widened once. */
#define PANEL 256
static void blas_path(tp_backend *b, const bf16 *x, const bf16 *W, int T, int N, int K, const epi *e) {
    tp_cpu_bf16 *c = bf16_impl(b);
    const int nt = c->n_threads, P = PANEL;
    float *xf = bf16_scratch(c, 0, (size_t)T * K);
    widen_bf16(xf, x, (size_t)T * K);
    #pragma omp parallel num_threads(nt)
    {
        const int i = omp_get_thread_num(); /* < nt: each thread grows its own slots only */
        float *wf = bf16_scratch(c, 1 + 2 * i, (size_t)P * K), *tile = bf16_scratch(c, 2 + 2 * i, (size_t)T * P);
        #pragma omp for schedule(dynamic, 1)
        for (int n0 = 0; n0 < N; n0 += P) {
            const int nn = N - n0 < P ? N - n0 : P;
            widen_bf16(wf, W + (size_t)n0 * K, (size_t)nn * K);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, nn, K, 1.0f, xf, K, wf, K, 0.0f, tile, P);
            epi_tile(e, tile, P, 0, T, n0, nn);
        }
    }
}

/* The FMA GEMM (cpu_gemm_bf16w.c) on x widened once; each tile through epi_tile. */
static void fma_epi(const void *ctx, const float *tile, int ld, int t0, int m, int n0, int nn) {
    epi_tile(ctx, tile, ld, t0, m, n0, nn);
}

static void fma_path(tp_backend *b, const bf16 *x, const bf16 *W, int T, int N, int K, const epi *e) {
    tp_cpu_bf16 *c = bf16_impl(b);
    const int nt = c->n_threads;
    float *xf = bf16_scratch(c, 0, (size_t)T * K);
    widen_bf16(xf, x, (size_t)T * K);
    float **pack = tp_malloc((size_t)nt * sizeof *pack);
    for (int i = 0; i < nt; i++) pack[i] = bf16_scratch(c, 1 + 2 * i, cpu_gemm_bf16w_pack_floats(K));
    cpu_gemm_bf16w_avx2(xf, W, T, N, K, fma_epi, e, pack, nt);
    free(pack);
}

/* ---- matrix layout: [N, K] bf16, then (oneDNN) its blocked W^T at a 4 KiB-aligned offset ---- */
static size_t plain_bytes(int N, int K) { return ((size_t)N * K * 2 + 4095) & ~(size_t)4095; }

size_t bf16_matrix_bytes(tp_backend *b, int rows, int cols) {
    tp_cpu_bf16 *c = bf16_impl(b);
    return plain_bytes(rows, cols) + (c->dnnl ? tp_dnnl_weights_bytes(c->dnnl, rows, cols) : 0);
}

/* Blocked copies made so far, by matrix address: matrix_upload reorders at once; a matrix
 * filled by fill_random (bench) is reordered at its first batched GEMM, once. */
typedef struct {
    const void **p;
    size_t n, cap;
} ptr_set;
static ptr_set g_ready; /* one process, one backend at a time */
static int ready_has(const void *p) {
    for (size_t i = 0; i < g_ready.n; i++)
        if (g_ready.p[i] == p) return 1;
    return 0;
}
static void ready_add(const void *p) {
    if (g_ready.n == g_ready.cap) {
        g_ready.cap = g_ready.cap ? 2 * g_ready.cap : 256;
        g_ready.p = tp_realloc(g_ready.p, g_ready.cap * sizeof *g_ready.p);
    }
    g_ready.p[g_ready.n++] = p;
}

void bf16_ready_clear(void) {
    free(g_ready.p);
    memset(&g_ready, 0, sizeof g_ready);
}

void bf16_matrix_upload(tp_backend *b, void *dst, const void *src_host, tp_dtype st, int rows, int cols) {
    b->upload(b, dst, src_host, st, (size_t)rows * cols);
    tp_cpu_bf16 *c = bf16_impl(b);
    if (c->dnnl) {
        tp_dnnl_reorder(c->dnnl, (char *)dst + plain_bytes(rows, cols), dst, rows, cols);
        if (!ready_has(dst)) ready_add(dst);
    }
}

/* The path by T (the file comment); bf16_gemm_kernel names it. */
typedef enum { PATH_GEMV, PATH_DNNL, PATH_BLAS, PATH_FMA } gemm_path;
static gemm_path path_pick(const tp_cpu_bf16 *c, int T) {
    return T <= c->few_tokens ? PATH_GEMV : c->dnnl ? PATH_DNNL : c->fma_gemm ? PATH_FMA : PATH_BLAS;
}

const char *bf16_gemm_kernel(tp_backend *b, int T) {
    tp_cpu_bf16 *c = bf16_impl(b);
    switch (path_pick(c, T)) {
    case PATH_GEMV:
        return c->isa == BF16_ISA_AVX512BF16 ? "gemv-bf16-avx512bf16" : c->isa == BF16_ISA_AVX2 ? "gemv-bf16-avx2"
                                                                                                : "gemv-bf16-c";
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
        snprintf(path, sizeof path, "GEMV %s (T <= %d)", bf16_isa_name(c->isa), c->few_tokens);
        bf16_report(b, bit, op, path);
        if (K <= 0) {
            for (int t = 0; t < T; t++)
                for (int n = 0; n < N; n++) epi_store(&e, t, n, 0.0f);
            return;
        }
        gemv_path(b, x, W, T, N, K, &e);
    } else if (pk == PATH_DNNL) {
        snprintf(path, sizeof path, "oneDNN matmul %s (T > %d)", tp_dnnl_impl(c->dnnl), c->few_tokens);
        bf16_report(b, bit + 1, op, path);
        if (!ready_has(W)) {
            tp_dnnl_reorder(c->dnnl, (char *)W + plain_bytes(N, K), W, N, K);
            ready_add(W);
        }
        tp_dnnl_matmul(c->dnnl, y, x, (const char *)W + plain_bytes(N, K), bias, T, N, K, accumulate, gelu, out_f32);
    } else if (pk == PATH_FMA) {
        snprintf(path, sizeof path, "FMA GEMM on bf16 weights packed to f32 (T > %d)", c->few_tokens);
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
