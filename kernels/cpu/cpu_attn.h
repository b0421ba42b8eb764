/* Attention over the paged KV cache, f32 or bf16 K/V, for both CPU backends (cpu_attn_run.c
 * schedules the work, cpu_attn_kernels.c holds the kernels).
 *
 * One work item: a tile of nq queries of one sequence (sorted by position) and one head. K/V
 * are read one cache block (block_size tokens) at a time -- a bf16 block is first widened into
 * f32 scratch -- and each block gives the scores of the tile's queries, a running max m and sum
 * l per query (online softmax: when m grows, l and the partial V sum are scaled by
 * exp(m_old - m_new)), and its P.V contribution. The output is acc / l, f32 or rounded once to
 * bf16. Scores are q.k divided by sqrtf(D) (as HF CodeGen); causal: query i sees positions
 * <= its own.
 *
 * Three builds of the kernels (cpu_attn_isa_pick: TPGEN_CPU_ATTN=avx512|avx2|c, TPGEN_CPU_ISA, or
 * measured at load on the model's shape):
 *   avx512: 16 lanes (AVX-512F), avx2: 8 lanes (AVX2 + FMA), c: plain C -- the reference twin the
 *   other two are tested against (tests/cpu_attn). Both vector builds use two layouts:
 *   tile (nq >= 3, up to 2 vectors of lanes: 16 or 32 queries): lanes = queries, a score is D
 *   broadcast FMAs (no horizontal sums);
 *   dot (nq <= 2, decode): lanes run along D, one horizontal sum per key. */
#ifndef TPGEN_CPU_ATTN_H
#define TPGEN_CPU_ATTN_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

typedef enum { ATT_ISA_C = 0, ATT_ISA_AVX2 = 1, ATT_ISA_AVX512 = 2 } att_isa;

/* Grouped-query attention: query head h reads KV head h / (Hl / Hkl) (Hkl == Hl: one each). A work
 * item is one query head; the Hl / Hkl query heads of a KV head on the same tokens read the same
 * K/V rows, and their items follow each other in the schedule (cpu_attn_run.c). */
typedef struct {
    const void *qkv;     /* [T, (Hl + 2 Hkl) D]: q heads, k heads, v heads; f32, or bf16 (act_bf16) */
    const void *kc, *vc; /* [n_blocks, Hkl, bs, D] (kernels/common/tp_kv.h); f32, or bf16 (kv_bf16) */
    void *out;           /* [T, Hl, D], qkv's dtype */
    const tp_step *st;   /* host pointers (the CPU backends' "device" memory is host memory) */
    int Hl, Hkl, D;
    int act_bf16, kv_bf16; /* the bf16 backend: both; the f32 backend: kv_bf16 under --kv-cache-dtype bf16 */
} att_args;

/* The KV head query head h reads. */
static inline int att_kv_head(const att_args *a, int h) { return h / (a->Hl / a->Hkl); }

/* The build, one per process (cpu_attn_pick.c): TPGEN_CPU_ATTN if set (dies naming the variable
 * when the value is unknown or the CPU lacks it); else under TPGEN_CPU_ISA=TIER the highest build
 * at or below the tier (c; avx2 for avx2 and avxvnni; avx512); both read at the first call (the
 * backend's creation) and nothing measured. Else the widest this CPU runs until cpu_attn_isa_tune
 * measures: called at load with the model's shape (the backend's attention_tune), it times every
 * build this CPU runs, highest first, on one decode token (T = 1) at context 1024 over synthetic
 * K/V of that shape (query heads Hl, KV heads Hkl, head dim D, block size, q and K/V dtypes) on the
 * calling thread, and keeps the fastest (a lower build must beat a higher one by cpu_tune's
 * margin), the choice cached in the kernel cache file (cpu_tune.h). Head dims under 32 (the test
 * models) keep the widest, unmeasured. cpu_attn_isa_why: which and why, for --verbose
 * ("measured at T = 1, context 1024 (ms: avx512 X, avx2 Y, c Z), saved to PATH", "cached in PATH",
 * "capped by TPGEN_CPU_ISA", ...). */
att_isa cpu_attn_isa_pick(void);
const char *cpu_attn_isa_why(void);
att_isa cpu_attn_isa_tune(int Hl, int Hkl, int D, int block_size, int act_bf16, int kv_bf16); /* the new pick */
int cpu_attn_isa_supported(att_isa isa); /* 1 when this CPU (and build) runs it */
const char *cpu_attn_isa_name(att_isa isa); /* "avx512", "avx2", "c" */
/* Queries per tile of a build (two vectors of lanes: avx512 32, avx2 16; c 8). */
int cpu_attn_tile(att_isa isa);
/* Tiles per work item at most (vector builds): each K/V block read serves them all while in L1. */
#define CPU_ATTN_GROUP 8
/* Kernel name for n queries of one sequence: "{dot|tile}-{f32|bf16}-{isa}" (bench JSON). */
const char *cpu_attn_kernel_name(att_isa isa, int kv_bf16, int n);

/* Scratch floats one thread needs for an item (cpu_attn_item's scr). */
size_t cpu_attn_scratch_floats(att_isa isa, int D, int block_size);
/* One item: queries toks[0..nq) (token indices, one sequence, ascending positions, nq <=
 * CPU_ATTN_GROUP * cpu_attn_tile(isa)), head h. */
void cpu_attn_item(att_isa isa, const att_args *a, const int *toks, int nq, int h, float *scr);

/* Token t's k and v ([Hkl, D] each, dtype act) into its cache slot, one row per KV head (the
 * head-contiguous layout, kernels/common/tp_kv.h), in the cache's dtype kv (f32 into bf16:
 * rounded to nearest even, as torch's .to(bfloat16)). Both CPU backends' rotary_kv_write. */
void cpu_kv_store(void *kc, void *vc, tp_dtype kv, const void *k, const void *v, tp_dtype act, const tp_step *st,
                  int t, int Hkl, int D);

/* The whole op (cpu_attn_run.c): items (tiles x heads) over n_threads OpenMP threads. */
void cpu_attn_run(att_isa isa, const att_args *a, int n_threads);

#endif
