/* Op tests of the attention kernels (kernels/cpu/cpu_attn.h): f32 q and K/V (the f32 backend),
 * bf16 q and K/V (the bf16 backend), f32 q over bf16 K/V (the f32 backend's --kv-cache-dtype bf16).
 *
 * usage: test_cpu_attn THREADS ISA    (ISA: c | avx2 | avx512)
 * Exits 77 (ctest SKIPPED) when this CPU or build cannot run ISA.
 *
 * Every case builds a paged cache with its blocks scattered (unwritten slots and the k/v part of
 * qkv hold NaN: a kernel that reads them fails), runs cpu_attn_run with ISA and checks:
 *  - against a double reference on the same (bf16-rounded) inputs: |got - ref| <= 1e-4 vmax
 *    (+ 2^-8 |ref|, one rounding, for a bf16 output), vmax = max |v| of the sequence;
 *  - for avx2/avx512, against the plain-C twin (ATT_ISA_C) on the same inputs: f32 within
 *    2e-6 vmax (summation order and the polynomial exp), a bf16 output within one bf16 ulp (2^-7
 *    relative) of the larger of the two plus that (both round once; a value near a rounding
 *    boundary may land on either side).
 * Cases (prefills of 13+ tokens give items of several tiles: groups, and tiles of two lane
 * vectors): decode (one query per sequence), prefill and chunked prefill (causal, several sequences
 * of different lengths, lengths not multiples of 8/16, partial last blocks), two queries of one
 * sequence, head_dim 64, 80, 256 and 12, block sizes 16 and 5, keys whose scores grow with
 * position by ~20 nats over the context (the running max moves: the rescaling is exercised), and
 * grouped-query attention (Hkl < Hl KV heads: query head h reads KV head h / (Hl / Hkl)). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/common/tp_kv.h"
#include "kernels/common/tp_round.h"
#include "kernels/cpu/cpu_attn.h"
#include "tests/common/check.h"

static att_isa g_isa;
static int g_threads;
static double g_worst_ref, g_worst_twin; /* largest error / tolerance seen */

typedef struct {
    int Hl, Hkl, D, bs, S, act_bf16, kv_bf16; /* act_bf16: q and the output */
    const int *before, *n_new; /* [S]: context already cached, queries this step */
} att_case;

/* element i of a buffer of the case's dtype */
static double elem(const void *p, size_t i, int bf16) {
    return bf16 ? tp_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}
static void put(void *p, size_t i, int bf16, double v) {
    if (bf16) ((uint16_t *)p)[i] = tp_f32_to_bf16((float)v);
    else ((float *)p)[i] = (float)v;
}

static void run_case(const att_case *c, const char *label) {
    const int Hl = c->Hl, Hkl = c->Hkl, D = c->D, bs = c->bs, S = c->S, bf = c->kv_bf16, qb = c->act_bf16;
    const size_t HD = (size_t)Hl * D, KD = (size_t)Hkl * D, QKV = HD + 2 * KD, es = bf ? 2 : 4, qes = qb ? 2 : 4;
    int T = 0, max_len = 0, max_pos = 0;
    for (int s = 0; s < S; s++) {
        T += c->n_new[s];
        const int len = c->before[s] + c->n_new[s];
        max_len = len > max_len ? len : max_len;
    }
    const int max_blocks = (max_len + bs - 1) / bs, n_blocks = S * max_blocks + 2;
    /* scattered blocks */
    int32_t *table = malloc((size_t)S * max_blocks * sizeof(int32_t)), *perm = malloc(n_blocks * sizeof(int32_t));
    for (int i = 0; i < n_blocks; i++) perm[i] = i;
    for (int i = n_blocks - 1; i > 0; i--) {
        const int j = (int)(urand() * (i + 1));
        const int32_t x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    for (int i = 0; i < S * max_blocks; i++) table[i] = perm[i];
    const size_t cache_n = (size_t)n_blocks * bs * KD;
    void *kc = malloc(cache_n * es), *vc = malloc(cache_n * es);
    for (size_t i = 0; i < cache_n; i++) put(kc, i, bf, NAN), put(vc, i, bf, NAN);
    double *vmax = calloc(S, sizeof(double));
    const double drift = 20.0 / sqrt((double)D); /* scores grow ~20 nats over the context */
    for (int s = 0; s < S; s++) {
        const int len = c->before[s] + c->n_new[s];
        for (int p = 0; p < len; p++) {
            for (size_t i = 0; i < KD; i++) { /* KV head i / D, dim i % D */
                const size_t at = tp_kv_pos_row(table + (size_t)s * max_blocks, p, (int)(i / D), Hkl, bs, D) + i % D;
                put(kc, at, bf, 2 * urand() - 1 + drift * p / (max_len > 1 ? max_len - 1 : 1));
                put(vc, at, bf, 2 * urand() - 1);
                const double v = fabs(elem(vc, at, bf));
                vmax[s] = v > vmax[s] ? v : vmax[s];
            }
        }
    }
    /* the step: each sequence's new tokens, then shuffled */
    int32_t *pos = malloc(T * sizeof(int32_t)), *seq = malloc(T * sizeof(int32_t));
    int t = 0;
    for (int s = 0; s < S; s++)
        for (int i = 0; i < c->n_new[s]; i++, t++) {
            seq[t] = s;
            pos[t] = c->before[s] + i;
            max_pos = pos[t] > max_pos ? pos[t] : max_pos;
        }
    for (int i = T - 1; i > 0; i--) {
        const int j = (int)(urand() * (i + 1));
        int32_t x = pos[i];
        pos[i] = pos[j];
        pos[j] = x;
        x = seq[i];
        seq[i] = seq[j];
        seq[j] = x;
    }
    void *qkv = malloc((size_t)T * QKV * qes);
    for (t = 0; t < T; t++)
        for (size_t i = 0; i < QKV; i++) put(qkv, (size_t)t * QKV + i, qb, i < HD ? 2 * urand() - 0.5 : NAN);
    tp_step st = {.n_tokens = T, .n_seqs = S, .block_size = bs, .max_blocks = max_blocks, .max_pos = max_pos,
                  .pos = pos, .seq = seq, .block_table = table};
    void *out = malloc((size_t)T * HD * qes), *twin = malloc((size_t)T * HD * qes);
    for (size_t i = 0; i < (size_t)T * HD; i++) put(out, i, qb, NAN), put(twin, i, qb, NAN);
    att_args a = {.qkv = qkv, .kc = kc, .vc = vc, .out = out, .st = &st, .Hl = Hl, .Hkl = Hkl, .D = D,
                  .act_bf16 = qb, .kv_bf16 = bf};
    cpu_attn_run(g_isa, &a, g_threads);
    a.out = twin;
    if (g_isa != ATT_ISA_C) cpu_attn_run(ATT_ISA_C, &a, g_threads);

    double *sc = malloc((size_t)(max_pos + 1) * sizeof(double)), *ref = malloc(D * sizeof(double));
    for (t = 0; t < T; t++)
        for (int h = 0; h < Hl; h++) {
            const int s = seq[t], g = h / (Hl / Hkl);
            const double vm = vmax[s];
            double mx = -INFINITY, sum = 0;
            for (int p = 0; p <= pos[t]; p++) {
                const size_t row = tp_kv_pos_row(table + (size_t)s * max_blocks, p, g, Hkl, bs, D);
                double dot = 0;
                for (int d = 0; d < D; d++)
                    dot += elem(qkv, (size_t)t * QKV + (size_t)h * D + d, qb) * elem(kc, row + d, bf);
                sc[p] = dot / sqrt((double)D);
                mx = sc[p] > mx ? sc[p] : mx;
            }
            for (int p = 0; p <= pos[t]; p++) sum += sc[p] = exp(sc[p] - mx);
            for (int d = 0; d < D; d++) ref[d] = 0;
            for (int p = 0; p <= pos[t]; p++) {
                const size_t row = tp_kv_pos_row(table + (size_t)s * max_blocks, p, g, Hkl, bs, D);
                for (int d = 0; d < D; d++) ref[d] += sc[p] / sum * elem(vc, row + d, bf);
            }
            for (int d = 0; d < D; d++) {
                const size_t i = (size_t)t * HD + (size_t)h * D + d;
                const double got = elem(out, i, qb), r = ref[d];
                const double tol = 1e-4 * vm + (qb ? ldexp(fabs(r), -8) : 0);
                const double e = fabs(got - r) / tol;
                g_worst_ref = e > g_worst_ref || isnan(e) ? e : g_worst_ref;
                CHECK(fabs(got - r) <= tol, "%s %s: vs reference, tok %d (seq %d pos %d) head %d d %d: got %.9g ref %.9g",
                      cpu_attn_isa_name(g_isa), label, t, s, pos[t], h, d, got, r);
                if (g_isa == ATT_ISA_C) continue;
                const double tw = elem(twin, i, qb);
                const double tt = 2e-6 * vm + (qb ? ldexp(fmax(fabs(got), fabs(tw)), -7) : 0);
                const double et = fabs(got - tw) / tt;
                g_worst_twin = et > g_worst_twin || isnan(et) ? et : g_worst_twin;
                CHECK(fabs(got - tw) <= tt, "%s %s: vs the C twin, tok %d (seq %d pos %d) head %d d %d: got %.9g twin %.9g",
                      cpu_attn_isa_name(g_isa), label, t, s, pos[t], h, d, got, tw);
            }
        }
    printf("%-6s %-34s q %s K/V %s Hl=%d Hkl=%d D=%d bs=%d T=%d max_pos=%d: %s\n", cpu_attn_isa_name(g_isa), label,
           qb ? "bf16" : "f32 ", bf ? "bf16" : "f32 ", Hl, Hkl, D, bs, T, max_pos, g_fail ? "FAIL" : "ok");
    free(table); free(perm); free(kc); free(vc); free(vmax); free(pos); free(seq); free(qkv); free(out);
    free(twin); free(sc); free(ref);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_cpu_attn THREADS c|avx2|avx512\n");
        return 2;
    }
    g_threads = atoi(argv[1]);
    if (strcmp(argv[2], "c") == 0) g_isa = ATT_ISA_C;
    else if (strcmp(argv[2], "avx2") == 0) g_isa = ATT_ISA_AVX2;
    else if (strcmp(argv[2], "avx512") == 0) g_isa = ATT_ISA_AVX512;
    else {
        fprintf(stderr, "ISA %s: expected c, avx2 or avx512\n", argv[2]);
        return 2;
    }
    if (g_threads < 1) {
        fprintf(stderr, "THREADS %s: expected >= 1\n", argv[1]);
        return 2;
    }
    if (!cpu_attn_isa_supported(g_isa)) {
        printf("SKIP: this CPU (or build) cannot run the %s attention kernels\n", argv[2]);
        return 77;
    }
    static const int modes[3][2] = {{0, 0}, {1, 1}, {0, 1}}; /* {q, K/V} bf16: f32, the bf16 backend, f32 over bf16 K/V */
    for (int mo = 0; mo < 3; mo++) {
        const int qb = modes[mo][0], bf = modes[mo][1];
#define CASE(Hl, D, bs, S, before, n_new, label) \
    run_case(&(att_case){Hl, Hl, D, bs, S, qb, bf, (const int[])before, (const int[])n_new}, label)
#define GQA(Hl, Hkl, D, bs, S, before, n_new, label) \
    run_case(&(att_case){Hl, Hkl, D, bs, S, qb, bf, (const int[])before, (const int[])n_new}, label)
#define L(...) {__VA_ARGS__}
        /* CodeGen-350M heads (D 64), block size 16 */
        CASE(4, 64, 16, 3, L(0, 0, 0), L(37, 16, 5), "prefill, 3 sequences");
        CASE(4, 64, 16, 4, L(99, 32, 7, 250), L(1, 1, 1, 1), "decode, 4 sequences");
        CASE(4, 64, 16, 3, L(45, 0, 20), L(29, 3, 2), "chunked prefill + 2 queries");
        CASE(2, 64, 16, 2, L(0, 700), L(300, 1), "long prefill + long decode");
        /* CodeGen-6B/16B heads (D 256) */
        CASE(2, 256, 16, 2, L(0, 76), L(21, 1), "prefill + decode");
        CASE(2, 256, 16, 1, L(13), L(40), "chunked prefill");
        /* CodeGen-2B heads (D 80: not a multiple of 16) */
        CASE(3, 80, 16, 2, L(0, 30), L(19, 1), "prefill + decode");
        /* D 12 (a tail in every vector loop), block size 5 */
        CASE(2, 12, 5, 2, L(0, 11), L(13, 2), "prefill + 2 queries");
        CASE(2, 12, 5, 2, L(23, 8), L(1, 1), "decode");
        /* grouped-query attention: 4 query heads per KV head (LLaMA-style D 64), every query head
         * on one KV head (multi-query), and 2 per KV head with D 12 and block size 5 */
        GQA(8, 2, 64, 16, 3, L(0, 40, 9), L(37, 1, 5), "GQA 8/2: prefill + decode");
        GQA(8, 2, 64, 16, 2, L(99, 250), L(1, 1), "GQA 8/2: decode");
        GQA(4, 1, 80, 16, 2, L(0, 30), L(19, 2), "GQA 4/1: prefill + 2 queries");
        GQA(6, 3, 12, 5, 2, L(0, 11), L(13, 1), "GQA 6/3: prefill + decode");
#undef CASE
#undef GQA
#undef L
    }
    printf("%s: %d checks, %d failed; worst error/tolerance: %.3g vs reference, %.3g vs the C twin\n", argv[2],
           g_checks, g_fail, g_worst_ref, g_worst_twin);
    return g_fail ? 1 : 0;
}
