/* Which attention build runs (kernels/cpu/cpu_attn.h): TPGEN_CPU_ATTN, else TPGEN_CPU_ISA's cap,
 * else measured at load on the model's shape (cpu_tune.h), else the widest this CPU runs.
 *
 * The choice is per process (one model a process): the environment is read at the first
 * cpu_attn_isa_pick (the backend's creation), the measurement replaces the widest when the
 * backend is told the model's shape (attention_tune, before the first step). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "kernels/common/tp_round.h"
#include "kernels/cpu/cpu_attn.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/cpu_tune.h"

#define ATT_KERNEL_SET "att1" /* bump when an attention kernel changes: cached choices are measured again */
#define ATT_TUNE_CTX 1024     /* the context a timed decode attends over */
/* Head dims below this (the test models': 8-16) keep the widest build unmeasured: their kernels
 * are not the ones a real model's heads (64-256) run, a run is a few microseconds of loop
 * overhead, and the hundreds of test processes would each time them and write the user's cache. */
#define ATT_TUNE_MIN_D 32

static att_isa g_pick = ATT_ISA_C;
static const char *g_why; /* NULL until the environment was read */
static int g_env;         /* TPGEN_CPU_ATTN or TPGEN_CPU_ISA decided: nothing is measured */
static char g_how[640];   /* the measured choice's why */

static att_isa widest(void) {
    if (cpu_attn_isa_supported(ATT_ISA_AVX512)) return ATT_ISA_AVX512;
    return cpu_attn_isa_supported(ATT_ISA_AVX2) ? ATT_ISA_AVX2 : ATT_ISA_C;
}

static att_isa pick_env(void) {
    const att_isa best = widest();
    const char *e = getenv("TPGEN_CPU_ATTN");
    if (e && *e) {
        att_isa want;
        if (strcmp(e, "avx512") == 0) want = ATT_ISA_AVX512;
        else if (strcmp(e, "avx2") == 0) want = ATT_ISA_AVX2;
        else if (strcmp(e, "c") == 0) want = ATT_ISA_C;
        else tp_die_all("TPGEN_CPU_ATTN=%s: expected avx512, avx2 or c", e);
        if (!cpu_attn_isa_supported(want))
            tp_die_all("TPGEN_CPU_ATTN=%s: this CPU does not support it (best here: %s)", e, cpu_attn_isa_name(best));
        g_env = 1;
        g_why = "forced by TPGEN_CPU_ATTN";
        return want;
    }
    cpu_tier tier;
    int forced;
    char err[256];
    if (cpu_tier_forced(&tier, &forced, err, sizeof err)) tp_die_all("%s", err);
    if (forced) { /* the family's highest build at or below the tier */
        const att_isa cap = tier >= CPU_TIER_AVX512 ? ATT_ISA_AVX512 : tier >= CPU_TIER_AVX2 ? ATT_ISA_AVX2 : ATT_ISA_C;
        g_env = 1;
        g_why = "capped by TPGEN_CPU_ISA";
        return cap < best ? cap : best;
    }
    g_why = "the widest this CPU runs (not measured: no model shape was given)";
    return best;
}

att_isa cpu_attn_isa_pick(void) {
    if (!g_why) g_pick = pick_env();
    return g_pick;
}

const char *cpu_attn_isa_why(void) {
    (void)cpu_attn_isa_pick();
    return g_why;
}

/* One decode token at position ATT_TUNE_CTX - 1 over synthetic K/V in scattered blocks, every
 * query head, on the calling thread (cpu_tune.h: each build on the same single thread). */
typedef struct {
    att_args a;
    tp_step st;
    att_isa isa[3];
} tune_ctx;
static double tune_run(void *ctx, int cand) {
    const tune_ctx *t = ctx;
    cpu_attn_run(t->isa[cand], &t->a, 1);
    return -1.0; /* one thread: cpu_tune times it */
}

/* Values in [-1, 1) from index i (any values time the same; no NaN, no overflow in exp). */
static float synth(size_t i, unsigned salt) { return (float)((i * 7919u + salt * 104729u) % 2048u) / 1024.0f - 1.0f; }
static void *synth_buf(size_t n, int bf16, unsigned salt) {
    void *p = tp_malloc(n * (bf16 ? 2 : 4));
    for (size_t i = 0; i < n; i++) {
        if (bf16) ((uint16_t *)p)[i] = tp_f32_to_bf16(synth(i, salt));
        else ((float *)p)[i] = synth(i, salt);
    }
    return p;
}

att_isa cpu_attn_isa_tune(int Hl, int Hkl, int D, int block_size, int act_bf16, int kv_bf16) {
    (void)cpu_attn_isa_pick();
    if (g_env) return g_pick; /* forced or capped: nothing measured */
    if (Hkl < 1 || Hl % Hkl) tp_die_all("cpu attention: %d query heads are not a multiple of %d KV heads", Hl, Hkl);
    g_pick = widest();
    if (D < ATT_TUNE_MIN_D) {
        snprintf(g_how, sizeof g_how, "the widest this CPU runs (head dim %d < %d, a test model's: not measured)", D,
                 ATT_TUNE_MIN_D);
        g_why = g_how;
        return g_pick;
    }
    tune_ctx t = {0};
    const char *names[3];
    int n = 0;
    for (int i = ATT_ISA_AVX512; i >= ATT_ISA_C; i--) /* highest first: a tie keeps it */
        if (cpu_attn_isa_supported((att_isa)i)) {
            t.isa[n] = (att_isa)i;
            names[n++] = cpu_attn_isa_name((att_isa)i);
        }
    if (n == 1) { /* nothing to time (no synthetic cache either) */
        snprintf(g_how, sizeof g_how, "the only build this CPU runs");
        g_why = g_how;
        return g_pick;
    }
    /* qkv [1, (Hl + 2 Hkl) D], out [1, Hl D] in the activations' dtype, caches [n_blocks, Hkl, bs, D]
     * in the K/V dtype; the blocks in a scattered order, as a long-running server's are */
    const int bs = block_size, n_blocks = (ATT_TUNE_CTX + bs - 1) / bs;
    const size_t cache_n = (size_t)n_blocks * Hkl * bs * D;
    int32_t *bt = tp_malloc((size_t)n_blocks * sizeof *bt);
    for (int i = 0; i < n_blocks; i++) bt[i] = (int32_t)(((long)i * 7919) % n_blocks); /* 7919 prime: a permutation */
    static const int32_t pos = ATT_TUNE_CTX - 1, seq = 0;
    t.st = (tp_step){.n_tokens = 1, .n_seqs = 1, .block_size = bs, .max_blocks = n_blocks, .max_pos = pos,
                     .pos = &pos, .seq = &seq, .block_table = bt};
    void *qkv = synth_buf((size_t)(Hl + 2 * Hkl) * D, act_bf16, 1), *kc = synth_buf(cache_n, kv_bf16, 2),
         *vc = synth_buf(cache_n, kv_bf16, 3), *out = synth_buf((size_t)Hl * D, act_bf16, 4);
    t.a = (att_args){.qkv = qkv, .kc = kc, .vc = vc, .out = out, .st = &t.st, .Hl = Hl, .Hkl = Hkl, .D = D,
                     .act_bf16 = act_bf16, .kv_bf16 = kv_bf16};
    char shape[128]; /* "kv X" alone when q has the K/V dtype (the keys cached before mixed dtypes) */
    snprintf(shape, sizeof shape, "kv %s%s, Hl %d, Hkl %d, D %d, bs %d", kv_bf16 ? "bf16" : "f32",
             act_bf16 == kv_bf16 ? "" : act_bf16 ? " (q bf16)" : " (q f32)", Hl, Hkl, D, bs);
    char run[64];
    snprintf(run, sizeof run, "T = 1, context %d", ATT_TUNE_CTX);
    const cpu_tune_key key = {.family = "attention", .kernel_set = ATT_KERNEL_SET, .T = 1, .n_cand = n,
                              .names = names, .shape = shape, .run = run};
    g_pick = t.isa[cpu_tune_pick(&key, tune_run, &t, g_how, sizeof g_how)];
    g_why = g_how;
    free(bt);
    free(qkv);
    free(kc);
    free(vc);
    free(out);
    return g_pick;
}
