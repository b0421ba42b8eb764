/* Micro-benchmark of decode attention against context on the CPU backends (issue 35: the KV
 * layout), attention alone, as one decode step runs it: L layers, each its own K/V caches (so a
 * step streams L layers' K/V from memory, as the model does, not one layer's from cache), S
 * sequences of one new token at position ctx - 1, blocks scattered. Prints, per context, the median
 * ms of the L calls over reps runs and the GB/s of K+V they read. Not a test: numbers only.
 *
 * usage: bench_attention [f32|bf16] [threads] [contexts, e.g. 96,1000,2000] [S] [L] [Hl] [D] [reps]
 * defaults: f32, 0 (all cores), 96,1000,1900,2000, 1, 20, 16, 64 (CodeGen-350M's heads), 15. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "kernels/backend.h"

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    const char *dt = argc > 1 ? argv[1] : "f32";
    const int nt = argc > 2 ? atoi(argv[2]) : 0;
    const char *ctxs = argc > 3 ? argv[3] : "96,1000,1900,2000";
    const int S = argc > 4 ? atoi(argv[4]) : 1, L = argc > 5 ? atoi(argv[5]) : 20;
    const int Hl = argc > 6 ? atoi(argv[6]) : 16, D = argc > 7 ? atoi(argv[7]) : 64;
    const int reps = argc > 8 ? atoi(argv[8]) : 15, bs = 16;
    if (S < 1 || L < 1 || Hl < 1 || D < 1 || reps < 1) tp_die("bench_attention: S, L, Hl, D and reps must be >= 1");
    char err[256];
    tp_backend *b = strcmp(dt, "bf16") == 0 ? tp_backend_cpu_bf16_create(nt, 0, err, sizeof err)
                    : strcmp(dt, "f32") == 0 ? tp_backend_cpu_create(nt) : NULL;
    if (!b) tp_die("bench_attention: dtype %s: %s", dt, strcmp(dt, "bf16") == 0 ? err : "expected f32 or bf16");
    const size_t es = tp_dtype_size(b->act), HD = (size_t)Hl * D;
    int max_ctx = 0;
    for (const char *p = ctxs; *p;) {
        const int c = atoi(p);
        max_ctx = c > max_ctx ? c : max_ctx;
        p = strchr(p, ',') ? strchr(p, ',') + 1 : p + strlen(p);
    }
    const int max_blocks = (max_ctx + bs - 1) / bs, n_blocks = S * max_blocks;
    const size_t cache_n = (size_t)n_blocks * bs * HD;
    void **kc = tp_malloc((size_t)L * sizeof *kc), **vc = tp_malloc((size_t)L * sizeof *vc);
    for (int l = 0; l < L; l++) {
        kc[l] = b->alloc(b, cache_n * es, "k cache");
        vc[l] = b->alloc(b, cache_n * es, "v cache");
        b->fill_random(b, kc[l], cache_n, 10 + 2 * l, 0.0f, 1.0f);
        b->fill_random(b, vc[l], cache_n, 11 + 2 * l, 0.0f, 1.0f);
    }
    int32_t *bt = b->alloc(b, (size_t)S * max_blocks * 4, "block table");
    for (int i = 0; i < S * max_blocks; i++) bt[i] = (int32_t)(((long)i * 7919) % n_blocks); /* a permutation */
    int32_t *pos = b->alloc(b, (size_t)S * 4, "pos"), *seq = b->alloc(b, (size_t)S * 4, "seq");
    void *qkv = b->alloc(b, (size_t)S * 3 * HD * es, "qkv"), *out = b->alloc(b, (size_t)S * HD * es, "out");
    b->fill_random(b, qkv, (size_t)S * 3 * HD, 6, 0.0f, 1.0f);
    const tp_attn_shape shape = {Hl, Hl, D, 0, TP_ROPE_GPTJ, 10000.0f};
    printf("cpu %s attention, %d threads (0 = all), S=%d L=%d Hl=%d D=%d bs=%d, kernel %s\n", dt, nt, S, L, Hl, D, bs,
           b->kernel_name ? b->kernel_name(b, TP_OP_ATTENTION, 1, D) : "?");
    double *t = tp_malloc((size_t)reps * sizeof(double));
    for (const char *p = ctxs; *p;) {
        const int ctx = atoi(p);
        p = strchr(p, ',') ? strchr(p, ',') + 1 : p + strlen(p);
        for (int s = 0; s < S; s++) pos[s] = ctx - 1, seq[s] = s;
        const tp_step st = {.n_tokens = S, .n_seqs = S, .block_size = bs, .max_blocks = max_blocks, .max_pos = ctx - 1,
                            .pos = pos, .seq = seq, .block_table = bt};
        for (int r = -1; r < reps; r++) { /* r = -1: a warm-up */
            const double t0 = tp_now_seconds();
            for (int l = 0; l < L; l++) b->attention(b, out, qkv, kc[l], vc[l], &st, &shape);
            if (r >= 0) t[r] = tp_now_seconds() - t0;
        }
        qsort(t, (size_t)reps, sizeof *t, cmp_d);
        const double med = t[reps / 2], bytes = 2.0 * L * S * ctx * HD * es;
        printf("context %5d: %8.3f ms per step (median of %d; min %.3f)  %6.1f GB/s of K+V\n", ctx, med * 1e3, reps,
               t[0] * 1e3, bytes / med * 1e-9);
    }
    for (int l = 0; l < L; l++) b->free(b, kc[l]), b->free(b, vc[l]);
    free(kc); free(vc); free(t);
    b->free(b, bt); b->free(b, pos); b->free(b, seq); b->free(b, qkv); b->free(b, out);
    b->destroy(b);
    return 0;
}
