/* Micro-benchmark of the CPU backend's heavy ops, to know the CPU roofline:
 *   matmul T=1 (GEMV: memory-bound, reported as GB/s of weight bytes streamed), T=8 (a decode
 *   batch, still memory-bound) and T=64 / T=512 (GFLOP/s), and attention at context 2048 (one decode token per sequence, and a 512-token
 *   prefill chunk), with rotary_kv_write for the same step.
 * Times are the best of several runs. Not a test: numbers only. Usage: bench_cpu_ops [n_threads (0 = all)] [N K] [Hl D] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "kernels/backend.h"

/* Best of reps runs after a warm-up: the least disturbed run, closest to what the hardware
 * does (this is meant for shared machines too). */
static double time_op(int reps, void (*fn)(void *), void *ctx) {
    fn(ctx);
    double best = 1e30;
    for (int i = 0; i < reps; i++) {
        const double t0 = tp_now_seconds();
        fn(ctx);
        const double dt = tp_now_seconds() - t0;
        best = dt < best ? dt : best;
    }
    return best;
}

typedef struct {
    tp_backend *b;
    void *y, *x, *W, *bias;
    int T, N, K;
} mm_ctx;
static void mm_run(void *p) {
    mm_ctx *c = p;
    c->b->matmul(c->b, c->y, c->x, c->W, c->bias, c->T, c->N, c->K, 0);
}

typedef struct {
    tp_backend *b;
    void *out, *qkv, *kc, *vc;
    tp_step st;
    int Hl, D;
} att_ctx;
static void att_run(void *p) {
    att_ctx *c = p;
    c->b->attention(c->b, c->out, c->qkv, c->kc, c->vc, &c->st, &(tp_attn_shape){c->Hl, c->Hl, c->D, 0, TP_ROPE_GPTJ, 10000.0f});
}
static void rot_run(void *p) {
    att_ctx *c = p;
    c->b->rotary_kv_write(c->b, c->qkv, c->kc, c->vc, &c->st, &(tp_attn_shape){c->Hl, c->Hl, c->D, c->D / 4, TP_ROPE_GPTJ, 10000.0f});
}

int main(int argc, char **argv) {
    int nt = argc > 1 ? atoi(argv[1]) : 0;
    int N = argc > 3 ? atoi(argv[2]) : 4096, K = argc > 3 ? atoi(argv[3]) : 4096;
    int Hl = argc > 5 ? atoi(argv[4]) : 16, D = argc > 5 ? atoi(argv[5]) : 64;
    tp_backend *b = tp_backend_cpu_create(nt);

    /* ---- matmul ---- */
    const int Tmax = 512;
    mm_ctx m = {.b = b, .N = N, .K = K};
    m.W = b->alloc(b, b->matrix_bytes(b, N, K), "bench W");
    m.x = b->alloc(b, (size_t)Tmax * K * 4, "bench x");
    m.y = b->alloc(b, (size_t)Tmax * N * 4, "bench y");
    m.bias = b->alloc(b, (size_t)N * 4, "bench bias");
    b->fill_random(b, m.W, (size_t)N * K, 1, 0.0f, 0.02f);
    b->fill_random(b, m.x, (size_t)Tmax * K, 2, 0.0f, 1.0f);
    b->fill_random(b, m.bias, N, 3, 0.0f, 0.1f);
    printf("cpu backend, %d threads (0 = all cores)\n", nt);
    int Ts[] = {1, 8, 64, Tmax};
    for (int i = 0; i < 4; i++) {
        m.T = Ts[i];
        int reps = m.T <= 8 ? 20 : m.T == 64 ? 5 : 2;
        double s = time_op(reps, mm_run, &m);
        double flops = 2.0 * m.T * N * K, wbytes = (double)N * K * 4;
        printf("matmul  T=%-4d N=%d K=%d   %8.3f ms  %7.1f GFLOP/s  %6.1f GB/s of weights\n", m.T, N, K, s * 1e3,
               flops / s * 1e-9, wbytes / s * 1e-9);
    }
    b->free(b, m.W); b->free(b, m.x); b->free(b, m.y); b->free(b, m.bias);

    /* ---- attention at context 2048 ---- */
    const int bs = 16, ctx = 2048, S = 8, max_blocks = (ctx + 512) / bs + 1, n_blocks = S * max_blocks;
    const size_t HD = (size_t)Hl * D, cache_n = (size_t)n_blocks * bs * HD;
    att_ctx a = {.b = b, .Hl = Hl, .D = D};
    a.kc = b->alloc(b, cache_n * 4, "bench k cache");
    a.vc = b->alloc(b, cache_n * 4, "bench v cache");
    b->fill_random(b, a.kc, cache_n, 4, 0.0f, 1.0f);
    b->fill_random(b, a.vc, cache_n, 5, 0.0f, 1.0f);
    int32_t *bt = b->alloc(b, (size_t)S * max_blocks * 4, "bench block table");
    for (int i = 0; i < S * max_blocks; i++) bt[i] = (i * 7919) % n_blocks; /* scattered, a permutation */
    int32_t *pos = b->alloc(b, 512 * 4, "pos"), *seq = b->alloc(b, 512 * 4, "seq");
    a.qkv = b->alloc(b, 512 * 3 * HD * 4, "bench qkv");
    a.out = b->alloc(b, 512 * HD * 4, "bench out");
    b->fill_random(b, a.qkv, 512 * 3 * HD, 6, 0.0f, 1.0f);

    /* decode: one token in each of S sequences at position ctx - 1 */
    for (int s = 0; s < S; s++) { pos[s] = ctx - 1; seq[s] = s; }
    a.st = (tp_step){.n_tokens = S, .n_seqs = S, .block_size = bs, .max_blocks = max_blocks, .max_pos = ctx - 1,
                     .pos = pos, .seq = seq, .block_table = bt};
    double s = time_op(10, att_run, &a);
    double kv_bytes = 2.0 * S * ctx * HD * 4;
    printf("attention decode  %d seqs x ctx %d, Hl=%d D=%d   %8.3f ms  %6.1f GB/s of K+V\n", S, ctx, Hl, D, s * 1e3,
           kv_bytes / s * 1e-9);
    double r = time_op(10, rot_run, &a);
    printf("rotary_kv_write   %d tokens                       %8.3f ms\n", S, r * 1e3);

    /* prefill chunk: 512 tokens of one sequence at positions ctx-512 .. ctx-1 */
    for (int t = 0; t < 512; t++) { pos[t] = ctx - 512 + t; seq[t] = 0; }
    a.st.n_tokens = 512;
    s = time_op(2, att_run, &a);
    double fl = 0;
    for (int t = 0; t < 512; t++) fl += 4.0 * (pos[t] + 1) * HD;
    printf("attention prefill 512 tokens at ctx %d..%d, Hl=%d D=%d  %8.3f ms  %6.1f GFLOP/s\n", ctx - 512, ctx - 1, Hl,
           D, s * 1e3, fl / s * 1e-9);
    r = time_op(2, rot_run, &a);
    printf("rotary_kv_write   512 tokens                      %8.3f ms\n", r * 1e3);
    b->destroy(b);
    return 0;
}
