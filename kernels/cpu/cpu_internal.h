/* Internals shared by the CPU backend's files (kernels/cpu).
 *
 * The CPU backend keeps everything in f32 host memory (act = TP_F32): weights as uploaded
 * (Linear weights stay in HF layout [N, K], which cblas reads transposed; --weights int8 keeps
 * them in panels, cpu_int8_kernels.h), activations and the paged KV cache. Ops are OpenMP loops; GEMM
 * is OpenBLAS. Each op function here has the signature of its tp_backend pointer. */
#ifndef TPGEN_CPU_INTERNAL_H
#define TPGEN_CPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

/* The f32 rows kernel's tiers (cpu_matmul.c, cpu_isa.h). */
typedef enum { F32_TIER_C = 0, F32_TIER_AVX2 = 1, F32_TIER_AVX512 = 2 } f32_tier;
#define F32_N_TIER 3
#define CPU_ROWS_SHAPES 16

typedef struct {
    int n_threads; /* OpenMP threads for every op (OpenBLAS runs single-threaded inside them) */
    struct { int N, K, tier; } rows_shapes[CPU_ROWS_SHAPES]; /* the rows kernel's tier per shape (cpu_matmul.c) */
    int n_rows_shapes;
    unsigned rows_used;  /* bit per tier the rows kernel ran (kernel_name) */
    char rows_name[40];  /* kernel_name's string for it */
} tp_cpu;

static inline int cpu_threads(const tp_backend *b) { return ((const tp_cpu *)b->impl)->n_threads; }

/* Hot loops are written with 8-float GCC/clang vector types and compiled twice: for x86-64-v3
 * (AVX2 + FMA) and for the baseline, picked at load time (ifunc), so one binary runs anywhere
 * and still uses the wide units where they exist. */
/* Not under ThreadSanitizer (gcc's -fsanitize=thread defines __SANITIZE_THREAD__): gcc instruments
 * the ifunc resolver too, which the dynamic loader runs before libtsan is relocated (SIGSEGV at
 * start). The TSan build (tools/dev/test-sanitize.sh --thread) checks the server's threads, not
 * kernel speed.
 * clang 14 exports the resolver of a cloned function as "<name>.resolver" even when the function
 * is static: a cloned function's name must be unique across the backend's files. */
#if defined(__has_feature) /* clang's spelling of __SANITIZE_THREAD__ */
#if __has_feature(thread_sanitizer) && !defined(__SANITIZE_THREAD__)
#define __SANITIZE_THREAD__ 1
#endif
#endif
/* clang before 17 does not know "x86-64-v3" as a CPU level: its target_clones resolver for
 * arch=x86-64-v3 tests the CPU vendor instead (clang 14: the v3 clone on an unknown vendor, the
 * baseline on Intel and AMD), and __builtin_cpu_supports("x86-64-v3") does not compile. There the
 * kernels are built once, for the baseline. */
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__) && \
    ((defined(__clang__) && __clang_major__ >= 17) || (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 12))
#define CPU_HAVE_CLONES 1
#define CPU_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CPU_HAVE_CLONES 0
#define CPU_SIMD_CLONES
#endif
/* The build a CPU_SIMD_CLONES function runs here, for kernel names: "avx2" (x86-64-v3) or "c". */
static inline const char *cpu_clone_isa(void) {
#if CPU_HAVE_CLONES
    __builtin_cpu_init();
    return __builtin_cpu_supports("x86-64-v3") ? "avx2" : "c";
#else
    return "c";
#endif
}
/* The helpers are macros, not functions: a function that takes or returns a 32-byte vector has a
 * different ABI with and without AVX, which clang refuses (an error) when an AVX clone calls a
 * baseline helper, even an always_inline one, and GCC notes (-Wpsabi). As macros they compile
 * into whichever clone uses them. v8_load/v8_store go through an unaligned, may_alias view of
 * the vector (the same unaligned move the memcpy form compiled to). */
typedef float v8f __attribute__((vector_size(32)));
typedef float v8f_u __attribute__((vector_size(32), aligned(4), may_alias));
#define v8_load(p) (*(const v8f_u *)(p))
#define v8_store(p, v) (*(v8f_u *)(p) = (v))
#define v8_splat(x) __extension__({ const float s8_ = (x); (v8f){s8_, s8_, s8_, s8_, s8_, s8_, s8_, s8_}; })
/* ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7])): the order is fixed */
#define v8_sum(v) __extension__({ const v8f v8_ = (v); ((v8_[0] + v8_[4]) + (v8_[1] + v8_[5])) + ((v8_[2] + v8_[6]) + (v8_[3] + v8_[7])); })
#define V8_INLINE static inline __attribute__((always_inline))

/* Loops with fewer elements than this run on one thread: a parallel region costs more. */
#define CPU_PAR_MIN 16384

/* cpu_matmul.c */
void cpu_matmul(tp_backend *b, void *y, const void *x, const void *W, const void *bias, int T, int N, int K,
                int accumulate);
void cpu_matmul_f32out(tp_backend *b, float *y, const void *x, const void *W, const void *bias, int T, int N,
                       int K);
void cpu_matmul_gelu(tp_backend *b, void *y, const void *x, const void *W, const void *bias, int T, int N, int K);

/* The f32 backend's kernel_name (tp_backend; the int8 backend asks it for attention). */
const char *cpu_kernel_name(tp_backend *b, tp_op_class op, int T, int D);
const char *cpu_matmul_kernel(tp_backend *b, int T); /* cpu_matmul.c: the GEMM path at T tokens */
int cpu_matmul_check_env(char *err, size_t err_size); /* cpu_matmul.c: -1 on a bad TPGEN_CPU_ISA */
const char *cpu_attention_kernel(int T, int kv_bf16); /* cpu_attention.c: T queries of one sequence */

/* cpu_norm_act.c */
void cpu_embed(tp_backend *b, void *x, const void *wte, const int32_t *ids, int T, int E);
void cpu_layernorm(tp_backend *b, void *y, const void *x, const void *g, const void *beta, int T, int E,
                   float eps);
void cpu_gelu_new(tp_backend *b, void *x, size_t n);
void cpu_rmsnorm(tp_backend *b, void *y, const void *x, const void *g, int T, int E, float eps);
void cpu_silu_mul(tp_backend *b, void *y, const void *gu, int T, int N);
void cpu_add(tp_backend *b, void *y, const void *x, size_t n);
void cpu_gather_rows(tp_backend *b, void *dst, const void *src, const int32_t *rows_host, int n, int E);

/* cpu_attention.c */
void cpu_rotary_kv_write(tp_backend *b, void *qkv, void *k_cache, void *v_cache, const tp_step *st,
                         const tp_attn_shape *a);
void cpu_attention(tp_backend *b, void *out, const void *qkv, const void *k_cache, const void *v_cache,
                   const tp_step *st, const tp_attn_shape *a);
void cpu_attention_tune(tp_backend *b, const tp_attn_shape *a, int block_size, int verbose);

/* cpu_logits.c */
void cpu_logits_stats(tp_backend *b, const float *logits, int rows, int ld, int n_valid, int k,
                      const int32_t *targets_host, float *mx, float *se, float *topv, int32_t *topi,
                      float *tgt_val);

/* cpu_int8.c, cpu_int8_random.c (--weights int8) */
size_t cpu_int8_q_bytes(int N, int K); /* bytes of q [N, K] before the row scales (64-aligned) */
/* An int8 matrix from f32 rows: row_of(row, r, cols, ctx) writes row r [cols]; each row on its
 * own max |w|, or on row_absmax[r] where given. */
typedef void cpu_i8_row_fn(float *row, int r, int cols, const void *ctx);
void cpu_int8_quantize_matrix(tp_backend *b, void *dst, int rows, int cols, cpu_i8_row_fn *row_of, const void *ctx,
                              const float *row_absmax);
/* the row function of matrix_fill_random (cpu_int8_random.c): ctx is a cpu_i8_draws */
typedef struct {
    uint64_t key; /* tp_rng_key(seed) */
    float mean, std;
} cpu_i8_draws;
cpu_i8_row_fn *cpu_int8_random_rows(void);

/* cpu_random.c */
void cpu_fill_random(tp_backend *b, void *dst, size_t n, uint64_t seed, float mean, float std);

#endif
