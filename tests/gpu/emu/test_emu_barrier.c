/* One rotary_kv_write on the CUDA module named by TPGEN_CUDA_MODULE (the emulated one, or its copy
 * with a barrier removed: tests/gpu/emu/missing_barrier.sh), on fixed inputs: prints a hash of
 * every byte it wrote and how many rotated values differ from the CPU backend's.
 *
 * usage: test_emu_barrier     (TPGEN_EMU_SEED picks the emulator's thread order)
 * Output: "rotary_kv_write: hash H; W of N rotated q, k values differ from the CPU backend's"
 *
 * The shape makes rotary_kv_kernel's first barrier matter and a fixed thread order hide its loss:
 * 24 tokens at positions 0..23 (a different angle table per block), 4 + 4 heads of 64 dims fully
 * rotated (R / 2 = 32 angles), so the kernel runs 256 threads and thread t reads the angles of
 * thread t % 32 (<= t): in ascending order every angle is written before it is read; only a
 * thread order where t runs before t % 32 reads the previous block's table. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/cuda_module.h"
#include "kernels/dtype.h"

enum { T = 24, HL = 4, HKL = 4, D = 64, R = 64, BS = 16, MAX_BLOCKS = 2, N_BLOCKS = 2 };

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float rnd(void) { /* xorshift64*, uniform in [-1, 1) */
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return (float)((g_rng * 2685821657736338717ull) >> 40) / (float)(1 << 23) - 1.0f;
}

/* Runs the op on b from the f32 inputs; returns qkv and the k cache as f32, and their raw bytes. */
static void run(tp_backend *b, const float *qkv, size_t nq, size_t nc, float *q_out, float *k_out, unsigned char *raw) {
    const int32_t pos[T] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23};
    const int32_t seq[T] = {0}, bt[MAX_BLOCKS] = {1, 0}; /* the sequence's blocks out of order */
    const size_t es = tp_dtype_size(b->act);
    int32_t *dpos = b->alloc(b, sizeof pos, "pos"), *dseq = b->alloc(b, sizeof seq, "seq");
    int32_t *dbt = b->alloc(b, sizeof bt, "block table");
    b->to_device(b, dpos, pos, sizeof pos);
    b->to_device(b, dseq, seq, sizeof seq);
    b->to_device(b, dbt, bt, sizeof bt);
    void *dq = b->alloc(b, nq * es, "qkv"), *kc = b->alloc(b, nc * es, "k cache"), *vc = b->alloc(b, nc * es, "v cache");
    b->upload(b, dq, qkv, TP_F32, nq);
    unsigned char *zero = calloc(nc, es);
    b->to_device(b, kc, zero, nc * es);
    b->to_device(b, vc, zero, nc * es);
    const tp_step st = {T, 1, BS, MAX_BLOCKS, T - 1, dpos, dseq, dbt};
    const tp_attn_shape as = {HL, HKL, D, R, TP_ROPE_NEOX, 10000.0f};
    b->rotary_kv_write(b, dq, kc, vc, &st, &as);
    unsigned char *tq = malloc(nq * es), *tk = malloc(nc * es);
    b->to_host(b, tq, dq, nq * es);
    b->to_host(b, tk, kc, nc * es);
    tp_convert_to_f32(q_out, tq, b->act, nq);
    tp_convert_to_f32(k_out, tk, b->act, nc);
    if (raw) {
        memcpy(raw, tq, nq * es);
        memcpy(raw + nq * es, tk, nc * es);
    }
    free(tq); free(tk); free(zero);
    b->free(b, dpos); b->free(b, dseq); b->free(b, dbt); b->free(b, dq); b->free(b, kc); b->free(b, vc);
}

int main(void) {
    char err[2048];
    if (tp_cuda_module_load(err, sizeof err) != 0) {
        fprintf(stderr, "test_emu_barrier: %s\n", err);
        return 1;
    }
    tp_backend *gpu = tp_backend_cuda_create(0, TP_F16, err, sizeof err), *cpu = tp_backend_cpu_create(1);
    if (!gpu) {
        fprintf(stderr, "test_emu_barrier: %s\n", err);
        return 1;
    }
    const size_t nq = (size_t)T * (HL + 2 * HKL) * D, nc = (size_t)N_BLOCKS * BS * HKL * D;
    float *x = malloc(nq * sizeof(float));
    uint16_t *h = malloc(nq * 2);
    for (size_t i = 0; i < nq; i++) x[i] = rnd();
    tp_convert_from_f32(h, TP_F16, x, nq); /* both backends on the same F16 values */
    tp_convert_to_f32(x, h, TP_F16, nq);
    float *gq = malloc(nq * 4), *gk = malloc(nc * 4), *cq = malloc(nq * 4), *ck = malloc(nc * 4);
    unsigned char *raw = malloc((nq + nc) * 2);
    run(gpu, x, nq, nc, gq, gk, raw);
    run(cpu, x, nq, nc, cq, ck, NULL);
    uint64_t hash = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < (nq + nc) * 2; i++) hash = (hash ^ raw[i]) * 1099511628211ull;
    /* the rotated values: q and k of every token (q rows and k cache slots); one F16 rounding of a
     * rotation is < 1e-3 relative, a wrong angle moves a value by about its size */
    size_t wrong = 0, n = 0;
    for (size_t i = 0; i < nq; i++) {
        if (i % ((HL + 2 * HKL) * D) >= (size_t)(HL + HKL) * D) continue; /* v: not rotated */
        n++;
        wrong += !(fabsf(gq[i] - cq[i]) <= 4e-3f * (1.0f + fabsf(cq[i])));
    }
    for (size_t i = 0; i < nc; i++) {
        n++;
        wrong += !(fabsf(gk[i] - ck[i]) <= 4e-3f * (1.0f + fabsf(ck[i])));
    }
    printf("rotary_kv_write: hash %016llx; %zu of %zu rotated q, k values differ from the CPU backend's\n",
           (unsigned long long)hash, wrong, n);
    gpu->destroy(gpu);
    cpu->destroy(cpu);
    free(x); free(h); free(gq); free(gk); free(cq); free(ck); free(raw);
    return 0;
}
