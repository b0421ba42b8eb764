/* What the int4 GEMV and GEMM kernels (cpu_int4.c's plain-C twin, cpu_int4_avx512.c,
 * cpu_int4_avx2.c, cpu_int4_amx.c) share: the packed layout of a matrix, x's integer form and
 * the arithmetic every kernel follows, so that all of them give the same bits.
 *
 * Arithmetic (cpu_int4.c, file comment): x is rounded to int16 per token as the int8 family
 * does (cpu_int8_quantize_x: xq, sx = max|x| / XQ_MAX); per kernel group g of KG consecutive k
 * the integer sum
 *     s[t, n, g] = sum_{k in g} (q[n, k] - zero[n, g]) * xq[t, k]      (exact in int32)
 * then, groups in order 0, 1, ..., one fused multiply-add each (one rounding),
 *     acc = fmaf((float)s[t, n, g], scale[n, g], acc),  acc starting at +0
 * and y[t, n] = epi(acc * sx[t]) (cpu_i4_epi_row). A kernel may form s as
 * sum q xq - zero * sum xq in wrapping int32 (the true value fits, so the wrapped one is it).
 * 8-bit activations (opt-in, tp_backend_cpu_int4_act8): x is rounded per token and kernel group
 * to int8 instead (xq in -127..127, gx[t, g] = max_g |x| / 127, sx[t] = 1), and the group's
 * product uses the scale times x's: acc = fmaf((float)s, scale[n, g] * gx[t, g], acc) (the
 * product rounded to f32 first). xq's hi bytes are then 0: kernels may skip them.
 *
 * The kernel files include this header and nothing of cpu_int4.c, which calls them. */
#ifndef TPGEN_CPU_INT4_KERNELS_H
#define TPGEN_CPU_INT4_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/common/tp_act.h"
#include "kernels/common/tp_quant4.h"

/* ---- a matrix buffer of the int4 backend: a header, then the data ----
 * Both kinds of matrix the backend holds start with it (cpu_int4.c): CPU_I4_KIND_INT8, an int8
 * matrix of the int8 backend (lm_head, a Linear a checkpoint leaves unquantized) at + CPU_I4_HEAD;
 * CPU_I4_KIND_INT4, the panels below. matmul reads the kind from the buffer. */
#define CPU_I4_HEAD 64 /* bytes: keeps the data 64-byte aligned */
#define CPU_I4_MAGIC 0x34517054u /* "TpQ4" */
enum { CPU_I4_KIND_INT8 = 8, CPU_I4_KIND_INT4 = 4 };
typedef struct {
    uint32_t magic, kind;
    int32_t N, K;
    int32_t group;  /* the checkpoint's (tp_q4_host.group); 0 for int8 */
    int32_t kgroup; /* the kernels' group: group, or a divisor of it (CPU_I4_MAX_KG) */
} cpu_i4_head;
_Static_assert(sizeof(cpu_i4_head) <= CPU_I4_HEAD, "the header fits its bytes");

/* The kernels' group is at most this many k: |s| <= KG * 15 * XQ_MAX < 2^31 (8192 * 15 * 16383 =
 * 2,013,069,312). A larger group (GPTQ's per-row "group -1" on a long row) is split into equal
 * groups of its scale and zero (the largest divisor of it that is a multiple of
 * TP_Q4_GROUP_ALIGN and at most this): the same weights, summed in f32 a little more often. */
#define CPU_I4_MAX_KG 8192

/* ---- the panels ----
 * Panel P holds rows [16 P, 16 P + 16) of the matrix (zero rows past N, whose scales and zeros
 * are 0), one after the other, each CPU_I4_PANEL_BYTES(K, KG) bytes:
 *  - nibbles: K / 8 lines of 64 bytes. Line s covers k [8 s, 8 s + 8) of the 16 rows as 32
 *    little-endian uint16 words; word 2 j + h holds, in its nibble i (bits 4 i .. 4 i + 3),
 *    q[16 P + j, 8 s + 2 i + h]. So (word >> 4 i) & 15 over the 32 words is k pair 4 s + i of
 *    the 16 rows interleaved (row j at words 2 j, 2 j + 1): the int8 panel's pair layout
 *    (cpu_int8_kernels.h) in int16, ready for vpmaddwd / vpdpwssd against x's pair broadcast;
 *    a ymm half of the line is rows 0-7 or 8-15.
 *  - scales: [K / KG][16] f32 (64 bytes a group, aligned: 8 K is a multiple of 256)
 *  - zeros: [K / KG][16] uint8, then zero bytes to a multiple of 64.
 * K is a multiple of TP_Q4_GROUP_ALIGN (the group divides it): no partial line. */
#define CPU_I4_NR 16
static inline int cpu_i4_panels(int N) { return (N + CPU_I4_NR - 1) / CPU_I4_NR; }
static inline size_t cpu_i4_panel_bytes(int K, int KG) {
    const size_t ng = (size_t)(K / KG);
    return (size_t)K * 8 + ng * 64 + ((ng * 16 + 63) & ~(size_t)63);
}
static inline const uint8_t *cpu_i4_panel(const uint8_t *q, int K, int KG, int P) {
    return q + (size_t)P * cpu_i4_panel_bytes(K, KG);
}
static inline const float *cpu_i4_scales(const uint8_t *panel, int K) {
    return (const float *)(panel + (size_t)K * 8);
}
static inline const uint8_t *cpu_i4_zeros(const uint8_t *panel, int K, int KG) {
    return panel + (size_t)K * 8 + (size_t)(K / KG) * 64;
}

/* ---- x: xq [T][K] int16 and sx [T] (cpu_int8_quantize_x), xsum [T][K / KG] int32, and xq in
 * two signed bytes for the byte dot products (vpdpbusd with the nibbles as its unsigned side,
 * AMX), xq = 256 hi + lo, lo = xq's low byte read as signed (-128..127), hi = (xq - lo) / 256 in
 * -64..64 (|xq| <= 16383): xlo, xhi [T][K], each 8 k of a token (a panel line's)
 * in the order CPU_I4_XPERM, so that 4 consecutive bytes are the k of one int32 lane of a line's
 * nibbles unpacked to bytes (cpu_i4_x_bytes); for the amx kernel in its A-tile order instead
 * (tiles, cpu_i4_x_tile_at), with zero rows up to a multiple of 16 tokens. ---- */
typedef struct {
    const int16_t *xq;
    const float *sx;
    const float *gx;     /* [T][K / KG]: x's scale per kernel group (8-bit activations), or NULL */
    const int32_t *xsum; /* sum of xq over each kernel group (the zero's term) */
    const int8_t *xlo, *xhi; /* xhi: NULL under 8-bit x (its high bytes are 0) */
    int T, K, KG;
    int tiles; /* 1: xlo, xhi in the amx kernel's A-tile order (cpu_i4_x_tile_at), for it alone */
    uint8_t *work; /* cpu_int4_amx_work_bytes of scratch for the amx kernel (64-byte aligned) */
} cpu_i4_x;

/* A line's 32 words, masked by bytes: (w & 0x0F0F) has in the 4 bytes of lane j (words 2 j,
 * 2 j + 1) q[j, k] for k = 8 s + {0, 4, 1, 5}; ((w >> 4) & 0x0F0F) for k = 8 s + {2, 6, 3, 7}.
 * x's bytes follow that order. */
static const int cpu_i4_xperm[8] = {0, 4, 1, 5, 2, 6, 3, 7};
static inline void cpu_i4_x_bytes(int8_t *lo, int8_t *hi, const int16_t *xq, int K) {
    for (int s = 0; s < K / 8; s++)
        for (int i = 0; i < 8; i++) {
            const int v = xq[8 * s + cpu_i4_xperm[i]], b = ((v + 128) & 255) - 128;
            lo[8 * s + i] = (int8_t)b;
            hi[8 * s + i] = (int8_t)((v - b) / 256);
        }
}

/* The amx kernel's k a tile step (TK): 64, or 32 where the group is an odd multiple of 32. */
static inline int cpu_i4_amx_tk(int KG) { return KG % 64 == 0 ? 64 : 32; }
/* x's planes in A-tile order ([Tp / 16][K / tk][16][tk] bytes: a tile load one contiguous run):
 * where byte k of token t goes. */
static inline size_t cpu_i4_x_tile_at(int t, int k, int K, int tk) {
    return ((size_t)(t / 16) * K + (size_t)(k / tk) * tk) * 16 + (size_t)(t % 16) * tk + (size_t)(k % tk);
}

/* ---- epilogue: v = acc * sx[t] (+ y) (+ bias[n]) (GELU), f32 ---- */
typedef struct {
    float *y;          /* [T, N] */
    const float *bias; /* [N] or NULL */
    int N, accumulate, gelu;
} cpu_i4_epi;

/* acc [nn] (the f32 sums of rows [n0, n0 + nn) of token t; scratch) through the epilogue into y:
 * one pass an operation, in this order, the last one storing (cpu_i8_epi_row's form: passes
 * through memory, so no compiler fuses a product and a sum in one kernel and not another). */
static inline void cpu_i4_epi_row(const cpu_i4_epi *e, int t, float sxt, int n0, int nn, float *v) {
    float *yp = e->y + (size_t)t * e->N + n0;
    const float *b = e->bias ? e->bias + n0 : NULL;
    const int last = e->gelu ? 3 : b ? 2 : e->accumulate ? 1 : 0; /* the pass that stores */
    float *o = last == 0 ? yp : v;
    #pragma omp simd
    for (int j = 0; j < nn; j++) o[j] = v[j] * sxt;
    if (e->accumulate) {
        o = last == 1 ? yp : v;
        #pragma omp simd
        for (int j = 0; j < nn; j++) o[j] = v[j] + yp[j];
    }
    if (b) {
        o = last == 2 ? yp : v;
        #pragma omp simd
        for (int j = 0; j < nn; j++) o[j] = v[j] + b[j];
    }
    if (e->gelu) {
        #pragma omp simd
        for (int j = 0; j < nn; j++) yp[j] = tp_gelu_new(v[j]);
    }
}

/* ---- software prefetch along a thread's panels (the avx512vnni and ymm tiles) ----
 * A line a line, CPU_I4_PF ahead; in tiles of 1 or 2 tokens (decode: the GEMV streams the
 * weights from memory) each line is asked for 3 times, NEAR, MID and FAR ahead, so that a
 * prefetch the core dropped while its miss buffers were full is asked again. Without them the
 * T = 1 GEMV ran at half speed on a Zen 5 VM (avx512vnni), at a third (avx2, avxvnni: 9.2 -> 3.3 ms
 * for CodeGen-350M's 80 GEMVs, 2 threads, alternating in one process, 2026-12-07); the three
 * distances took 6-12% less time than one (4 to 32 KiB measured alike; 2 distances: 2-14% less):
 * docs/KERNELS.md, "int4 weights on the CPU". Where the weights sit in L3 the extra prefetches
 * cost time, but a decode step's weights do not fit it. */
#define CPU_I4_PF 12288
#define CPU_I4_PF_NEAR 4096
#define CPU_I4_PF_MID 16384
#define CPU_I4_PF_FAR 49152
/* The prefetch of a tile of MT tokens at a line: NEAR, MID and FAR at MT <= 2, else far ahead
 * (CPU_I4_PF, or what the caller's pattern needs). __builtin_prefetch(.., 0, 3) is prefetcht0. */
static inline __attribute__((always_inline)) void cpu_i4_prefetch(const uint8_t *line, int MT, size_t far) {
    if (MT <= 2) {
        __builtin_prefetch(line + CPU_I4_PF_NEAR, 0, 3);
        __builtin_prefetch(line + CPU_I4_PF_MID, 0, 3);
        __builtin_prefetch(line + CPU_I4_PF_FAR, 0, 3);
    } else __builtin_prefetch(line + far, 0, 3);
}

/* ---- the kernels: rows of panels [P0, P1) for tokens [t0, t1), on the calling thread ----
 * N: the matrix's rows (the last panel's rows past N are not stored). xq needs 4 readable bytes
 * past its end (a pair read as 32 bits). cpu_int4.c runs them over threads. */
typedef void cpu_i4_panels_fn(const cpu_i4_x *x, const uint8_t *q, int N, int P0, int P1, int t0, int t1,
                              const cpu_i4_epi *e);
/* cpu_int4.c: the plain-C twin (any CPU). */
void cpu_int4_panels_c(const cpu_i4_x *x, const uint8_t *q, int N, int P0, int P1, int t0, int t1,
                       const cpu_i4_epi *e);
/* cpu_int4_avx512.c (AVX-512 BW + VNNI), cpu_int4_avx2.c (AVX2; AVX-VNNI): the GEMV (tiles of a
 * few tokens, for T <= few) and the GEMM's tiles (more tokens a tile). The caller checks the CPU. */
void cpu_int4_gemv_avx512vnni(const cpu_i4_x *x, const uint8_t *q, int N, int P0, int P1, int t0, int t1,
                              const cpu_i4_epi *e);
void cpu_int4_gemm_avx512vnni(const cpu_i4_x *x, const uint8_t *q, int N, int P0, int P1, int t0, int t1,
                              const cpu_i4_epi *e);
void cpu_int4_gemv_avx2(const cpu_i4_x *x, const uint8_t *q, int N, int P0, int P1, int t0, int t1,
                        const cpu_i4_epi *e);
void cpu_int4_gemm_avx2(const cpu_i4_x *x, const uint8_t *q, int N, int P0, int P1, int t0, int t1,
                        const cpu_i4_epi *e);
void cpu_int4_gemv_avxvnni(const cpu_i4_x *x, const uint8_t *q, int N, int P0, int P1, int t0, int t1,
                           const cpu_i4_epi *e);
void cpu_int4_gemm_avxvnni(const cpu_i4_x *x, const uint8_t *q, int N, int P0, int P1, int t0, int t1,
                           const cpu_i4_epi *e);
/* cpu_int4_amx.c: the whole GEMM (all T tokens, all N rows) on AMX tiles, threads splitting the
 * panels; the caller checks the CPU (cpu_features: amx_int8). */
void cpu_int4_gemm_amx(const cpu_i4_x *x, const uint8_t *q, int N, const cpu_i4_epi *e, int n_threads);
/* The bytes of x->work it needs for K with n_threads (each thread's unpacked panels: kept by the
 * caller across calls, as fresh buffers of a few MiB a call were page-faulted in every call). */
size_t cpu_int4_amx_work_bytes(int K, int n_threads);

#endif
