/* cuda_emu: the CUDA backend's norm, activation, rotary and attention kernels, run on the host by
 * the emulator of tests/gpu/emu/emu.h, against the CPU backend -- test_cuda_ops' own cases, on any
 * machine that builds with CUDA, GPU or not. It checks what the source of the kernels computes
 * (indexing, head mapping, split-K and combine, barriers between shared-memory phases) and, in a
 * TPGEN_SANITIZE=address build, every access of the kernels against its buffer; not the device's
 * arithmetic, scheduling or memory model (that is test_cuda_ops on a GPU).
 *
 * usage: test_cuda_emu [SEED]    (default: a fresh seed, printed; ctest passes a fixed one)
 *        test_cuda_emu --bad kv-heads|rotary-dim|rope-style   (one op on a shape the backend
 *                                  must refuse: it dies with the message, ctest cuda_emu_refuses_*)
 * The element-wise ops run in F16 and BF16; attention, rotary and the decode graphs in BF16 only
 * (one template serves both dtypes, and each emulated attention case costs seconds). */
#pragma GCC diagnostic ignored "-Wunused-function" /* test_cuda_ops' cases this test does not run */
#define main test_cuda_ops_main
#include "tests/gpu/test_cuda_ops.c"
#undef main

tp_backend *tp_backend_cuda_emu_create(tp_dtype act);
long tp_cuda_emu_barriers(void);

/* An attention shape the CUDA backend refuses, on its first check, before any kernel runs. */
static int run_bad(const char *what) {
    tp_backend *b = tp_backend_cuda_emu_create(TP_BF16);
    g_rng = 1;
    int ctx[1] = {4}, seq[1] = {0}, pos[1] = {3};
    kv_case c;
    kv_case_make(&c, 1, ctx, 4, 1);
    kv_case_tokens(&c, 1, seq, pos);
    dev_step d;
    dev_step_make(b, &d, &c);
    tp_attn_shape a = {4, 4, 8, 8, TP_ROPE_NEOX, 10000.0f};
    if (!strcmp(what, "kv-heads")) a.n_kv_heads = 3;
    else if (!strcmp(what, "rotary-dim")) a.rotary_dim = 5;
    else if (!strcmp(what, "rope-style")) a.rope_style = (tp_rope_style)7;
    else {
        fprintf(stderr, "test_cuda_emu: --bad %s: not one of kv-heads, rotary-dim, rope-style\n", what);
        return 2;
    }
    void *qkv = b->alloc(b, 4096, "qkv"), *kc = b->alloc(b, 4096, "k"), *vc = b->alloc(b, 4096, "v");
    void *out = b->alloc(b, 4096, "out");
    if (!strcmp(what, "kv-heads")) b->attention(b, out, qkv, kc, vc, &d.st, &a);
    else b->rotary_kv_write(b, qkv, kc, vc, &d.st, &a);
    fprintf(stderr, "test_cuda_emu: --bad %s: the op returned instead of refusing the shape\n", what);
    return 1;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--bad")) return run_bad(argv[2]);
    g_rng = argc > 1 ? strtoull(argv[1], NULL, 10) : (uint64_t)time(NULL);
    printf("seed %llu (rerun: test_cuda_emu %llu); the CUDA kernels emulated on the host\n",
           (unsigned long long)g_rng, (unsigned long long)g_rng);
    if (!g_rng) g_rng = 1;
    g_cpu = tp_backend_cpu_create(2);
    tp_dtype dts[2] = {TP_F16, TP_BF16};
    for (int i = 0; i < 2; i++) {
        g_gpu = tp_backend_cuda_emu_create(dts[i]);
        run_norm_act();
        if (dts[i] == TP_BF16) {
            attn_cases();
            run_decode_graphs();
        }
        g_gpu->destroy(g_gpu);
    }
    g_cpu->destroy(g_cpu);
    printf("%d of %d checks failed (%ld emulated barrier arrivals)\n", g_fail, g_checks, tp_cuda_emu_barriers());
    return g_fail ? 1 : 0;
}
