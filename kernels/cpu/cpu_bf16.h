/* The CPU backend in bf16 (`--dtype bf16`): internals shared by cpu_bf16_ops.c, cpu_bf16_gemm.c
 * and cpu_dnnl.c.
 *
 * Weights, activations and the KV cache hold bf16 (uint16_t bit patterns); every op converts to
 * f32, computes in f32 and rounds its output once (kernels/common/tp_round.h, nearest even), at
 * the points the CUDA backend's bf16 path rounds: each GEMM output after bias, accumulate and
 * GELU (its fused f32 epilogue), layer norm output, the residual add, rotary q/k, the attention
 * output (scores, softmax and the P.V sum stay f32). Logits stay f32.
 *
 * Linear weights: panels of BF16_NR = 8 rows, [K2][8][2] bf16 each (K2 = ceil(K / 2): rows
 * interleaved by k pairs, one 32-byte vector per pair, zero past N and K; the layout every GEMV
 * tier reads -- avx512bf16's vdpbf16ps takes a pair vector as it is -- so the tier can be chosen
 * per shape after the matrix is stored), followed, when oneDNN is in use, by oneDNN's own
 * blocked copy of W^T (reordered once, at matrix_upload or matrix_fill_random), which the
 * batched GEMMs read. */
#ifndef TPGEN_CPU_BF16_H
#define TPGEN_CPU_BF16_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"
#include "util/log.h"

/* GEMV kernel tiers: each shape's chosen by measurement at load among those this CPU runs
 * (cpu_tune.h); TPGEN_CPU_ISA caps the tier instead (cpu_isa.h; tests run each in turn). */
typedef enum { BF16_ISA_C = 0, BF16_ISA_AVX2 = 1, BF16_ISA_AVX512BF16 = 2 } bf16_isa;
#define BF16_N_ISA 3
#define BF16_MAX_SHAPES 16
typedef struct {
    int N, K;
    bf16_isa isa;       /* steps of one or two tokens (measured at T = 1) */
    bf16_isa isa_batch; /* larger decode batches (measured at T = 8) */
    char how[512], how_batch[512]; /* measured (times), cached, ... */
} bf16_shape;

typedef struct tp_dnnl tp_dnnl; /* cpu_dnnl.c; NULL when oneDNN is not used */

typedef struct {
    int n_threads; /* first member: cpu_threads() of cpu_internal.h reads it */
    int verbose;
    bf16_isa isa;     /* the highest GEMV tier allowed here (CPUID, capped by TPGEN_CPU_ISA) */
    int isa_forced;   /* TPGEN_CPU_ISA set: isa for every shape, nothing measured */
    unsigned isa_cands; /* bit per tier this CPU runs at or below isa: the candidates */
    bf16_shape shapes[BF16_MAX_SHAPES]; /* the GEMV tier measured or cached per shape */
    int n_shapes;
    unsigned isa_used; /* bit per tier the GEMV ran (kernel_name) */
    int few_tokens;   /* T <= this: the GEMV kernels (W streamed once per step) */
    tp_dnnl *dnnl;    /* batched GEMMs (T > few_tokens) when set; else fma_gemm's or OpenBLAS's */
    int fma_gemm;     /* no dnnl: 1 = the FMA GEMM of cpu_gemm_bf16w.c (AVX2, panels), 0 = OpenBLAS on f32 blocks */
    unsigned printed; /* bit per (op, path) already reported under --verbose */
    char dnnl_name[160]; /* kernel_name of the oneDNN path, made at its first query */
    char gemv_name[64];  /* kernel_name of the GEMV path */
    /* f32 scratch kept between GEMMs (a fresh malloc of MiBs per call came back as new pages to
     * fault in and clear, ~5% of a prefill): slot 0 x widened, 1 + 2 i and 2 + 2 i thread i's
     * f32 block of W and tile (blas path). n_scratch = 1 + 2 n_threads. */
    float **scratch;
    size_t *scratch_cap; /* floats */
    int n_scratch;
} tp_cpu_bf16;

static inline tp_cpu_bf16 *bf16_impl(tp_backend *b) { return (tp_cpu_bf16 *)b->impl; }
/* --verbose: one line the first time an op takes a path (bit: a distinct id per op and path). */
static inline void bf16_report(tp_backend *b, unsigned bit, const char *op, const char *path) {
    tp_cpu_bf16 *c = bf16_impl(b);
    if (!c->verbose || (c->printed & (1u << bit))) return;
    c->printed |= 1u << bit;
    tp_log0("cpu bf16: %s -> %s\n", op, path);
}

const char *bf16_isa_name(bf16_isa isa);
/* Scratch slot (above) of at least n floats; contents are not kept when it grows. */
float *bf16_scratch(tp_cpu_bf16 *c, int slot, size_t n);
/* The highest tier this CPU runs, capped by TPGEN_CPU_ISA if set (dies on a bad value or a tier
 * the CPU lacks); *forced: TPGEN_CPU_ISA set; *cands: bit per tier this CPU runs up to the cap. */
bf16_isa bf16_isa_pick(int *forced, unsigned *cands);
/* The GEMV tier chosen for a [N, K] matrix and how (tests, --verbose); NULL if b is not bf16. */
const char *cpu_bf16_gemv_choice(tp_backend *b, int N, int K, const char **how);

/* The panel layout (file comment). Element (n, k) of W [N, K] sits at
 * bf16_panel(W, K, n / 8)[(k / 2) * 16 + (n % 8) * 2 + k % 2]. */
#define BF16_NR 8
static inline int bf16_k2(int K) { return (K + 1) / 2; }
static inline int bf16_n_panels(int N) { return (N + BF16_NR - 1) / BF16_NR; }
static inline size_t bf16_panel_elems(int K) { return (size_t)bf16_k2(K) * 2 * BF16_NR; }
/* Row stride of x widened to f32 for the panel kernels (whole pairs). */
static inline size_t bf16_ldx(int K) { return 2 * (size_t)bf16_k2(K); }
static inline const uint16_t *bf16_panel(const uint16_t *W, int K, int P) { return W + (size_t)P * bf16_panel_elems(K); }
/* plain [N, K] -> panels at dst (threads take whole panels). */
void bf16_pack_panels(uint16_t *dst, const uint16_t *plain, int N, int K, int n_threads);

/* cpu_gemm_bf16w.c, on the FMA units (AVX2; the caller checks the CPU): y = x @ W^T with W in
 * panels, x [T, bf16_ldx(K)] f32 (zero at k = K when K is odd). Each tile of at most 6
 * tokens x 8 rows goes to epi: rows [t0, t0 + m) x columns [n0, n0 + nn) of y as f32 (row
 * stride ld). cpu_bf16_panels_avx2: panels [P0, P1) for all T tokens on the calling thread
 * (the GEMV); cpu_gemm_bf16w_avx2: all of N on n_threads (the batched GEMM). */
typedef void cpu_gemm_epi_fn(const void *ctx, const float *tile, int ld, int t0, int m, int n0, int nn);
void cpu_bf16_panels_avx2(const float *xf, const uint16_t *W, int T, int N, int K, int P0, int P1,
                          cpu_gemm_epi_fn *epi, const void *ctx);
void cpu_gemm_bf16w_avx2(const float *xf, const uint16_t *W, int T, int N, int K, cpu_gemm_epi_fn *epi,
                         const void *ctx, int n_threads);

/* cpu_bf16_gemm.c: the GEMM entry points (tp_backend signatures) and matrix layout. */
size_t bf16_matrix_bytes(tp_backend *b, int rows, int cols);
void bf16_matrix_upload(tp_backend *b, void *dst, const void *src_host, tp_dtype st, int rows, int cols);
void bf16_matrix_fill_random(tp_backend *b, void *dst, int rows, int cols, uint64_t seed, float mean, float std);
/* cpu_bf16_ops.c: dst[i] = fill_random's draw first + i, rounded (n elements). */
void bf16_fill_random_range(tp_backend *b, uint16_t *dst, size_t first, size_t n, uint64_t seed, float mean,
                            float std);
const char *bf16_gemm_kernel(tp_backend *b, int T); /* kernel_name of the GEMM path at T tokens */
void bf16_matmul(tp_backend *b, void *y, const void *x, const void *W, const void *bias, int T, int N, int K,
                 int accumulate);
void bf16_matmul_f32out(tp_backend *b, float *y, const void *x, const void *W, const void *bias, int T, int N,
                        int K);
void bf16_matmul_gelu(tp_backend *b, void *y, const void *x, const void *W, const void *bias, int T, int N, int K);

/* cpu_dnnl.c (stubs when built without oneDNN). */
int tp_dnnl_compiled(void);
/* NULL (reason in err) when oneDNN cannot run bf16 matmul here, or only through its reference
 * implementation (unless force). */
tp_dnnl *tp_dnnl_create(int n_threads, int force, char *err, size_t err_size);
void tp_dnnl_destroy(tp_dnnl *d);
const char *tp_dnnl_impl(tp_dnnl *d); /* implementation oneDNN chose, e.g. "brg:avx512_core_amx" */
/* Bytes of the blocked copy of W^T ([K, N] logical) oneDNN asks for. */
size_t tp_dnnl_weights_bytes(tp_dnnl *d, int N, int K);
/* Reorders plain W [N, K] bf16 into dst (tp_dnnl_weights_bytes of it). */
void tp_dnnl_reorder(tp_dnnl *d, void *dst, const uint16_t *W, int N, int K);
/* y[T,N] = epilogue(x[T,K] @ W^T) with Wb the blocked copy: out_f32 -> f32 y (+ bias); else
 * bf16 y = round((accumulate ? y : 0) + x W^T + bias), GELU after when gelu. bias bf16 or NULL. */
void tp_dnnl_matmul(tp_dnnl *d, void *y, const uint16_t *x, const void *Wb, const uint16_t *bias, int T, int N,
                    int K, int accumulate, int gelu, int out_f32);

#endif
