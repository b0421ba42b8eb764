/* Kernel selection by measurement (kernels/cpu/cpu_tune.c) for the int8 and bf16 GEMV families
 * (f32's rows kernel and attention too, below):
 * the choice is one of this CPU's candidates, the cache file is written, read back (an edited
 * line is obeyed under TPGEN_KERNEL_RECHECK=off: proof it is read, not measured again; re-checked
 * without it, a slow one is contradicted and measured again), a corrupt file or line is ignored with a
 * warning (ctest checks the warnings' text) and rewritten, TPGEN_CPU_ISA overrides without
 * touching the file, TPGEN_KERNEL_CACHE=off neither reads nor writes, small matrices are not
 * measured, and the chosen kernel's outputs are the c twin's bits (int8). Never which is fastest.
 *
 * usage: test_kernel_tune DIR (a scratch directory; the cache file goes there) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_attn.h"
#include "kernels/cpu/cpu_bf16.h"
#include "kernels/cpu/cpu_int8.h"
#include "kernels/cpu/cpu_isa.h"
#include "tests/common/check.h"

static char g_cache[1024];

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 16];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strdup(buf);
}
static void spit(const char *path, const char *txt) {
    FILE *f = fopen(path, "wb");
    if (!f || fputs(txt, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "test_kernel_tune: cannot write %s\n", path);
        exit(1);
    }
}

/* The int8 / bf16 kernels this CPU runs, by name (CPUID through kernels/cpu/cpu_isa.c). */
static int int8_candidate(const char *k) {
    const cpu_features *f = cpu_features_get();
    return !strcmp(k, "c") || (!strcmp(k, "avx2") && f->avx2_fma) || (!strcmp(k, "avxvnni") && f->avxvnni) ||
           (!strcmp(k, "avx512vnni") && f->avx512vnni);
}
static int bf16_candidate(const char *k) {
    const cpu_features *f = cpu_features_get();
    return !strcmp(k, "c") || (!strcmp(k, "avx2") && f->avx2_fma) || (!strcmp(k, "avx512bf16") && f->avx512bf16);
}

enum { N = 1024, K = 1024 };
static float *g_w, *g_x;

/* An int8 backend with a [N, K] matrix uploaded (the upload measures); its choice and how. */
static tp_backend *int8_load(void **W, const char **kern, const char **how) {
    char err[512];
    tp_backend *b = tp_backend_cpu_create(2);
    if (tp_backend_use_int8(b, 1, err, sizeof err)) {
        fprintf(stderr, "test_kernel_tune: %s\n", err);
        exit(1);
    }
    *W = b->alloc(b, b->matrix_bytes(b, N, K), "W");
    b->matrix_upload(b, *W, g_w, TP_F32, N, K);
    *kern = cpu_int8_gemv_choice(b, N, K, how);
    return b;
}

static void test_int8(void) {
    void *W;
    const char *k, *how;
    remove(g_cache);
    /* 1. measured, one of the candidates, saved */
    tp_backend *b = int8_load(&W, &k, &how);
    CHECK(k && int8_candidate(k), "int8: chose %s, not a kernel this CPU runs", k ? k : "(none)");
    CHECK(strncmp(how, "measured", 8) == 0 && strstr(how, "saved to"), "int8: not measured and saved: %s", how);
    char *txt = slurp(g_cache);
    CHECK(txt && strncmp(txt, "# tpgen CPU kernel choices", 26) == 0, "int8: no cache file with its header at %s",
          g_cache);
    char want[128];
    snprintf(want, sizeof want, "\tint8-gemv\t%dx%d\t", N, K);
    CHECK(txt && strstr(txt, want), "int8: the cache has no line for the shape: %s", txt ? txt : "");
    /* and apart for larger GEMV steps (a tier can win one token and lose eight: cpu_int8.c) */
    char want_b[128];
    snprintf(want_b, sizeof want_b, "\tint8-gemv-batch\t%dx%d\t", N, K);
    CHECK(txt && strstr(txt, want_b), "int8: the cache has no batch GEMV line for the shape: %s", txt ? txt : "");
    { /* the integer GEMM's tiers (avx2 and up) are measured too where there are two or more, for
       * batched decode and for prefill apart */
        const cpu_features *f = cpu_features_get();
        char wg[128], wp[128];
        snprintf(wg, sizeof wg, "\tint8-gemm\t%dx%d\t", N, K);
        snprintf(wp, sizeof wp, "\tint8-prefill\t%dx%d\t", N, K);
        if (f->avx2_fma && (f->avxvnni || f->avx512vnni)) {
            CHECK(txt && strstr(txt, wg), "int8: the cache has no GEMM line for the shape: %s", txt ? txt : "");
            CHECK(txt && strstr(txt, wp), "int8: the cache has no prefill GEMM line for the shape: %s", txt ? txt : "");
        }
    }
    /* the chosen kernel computes the c twin's bits */
    setenv("TPGEN_CPU_ISA", "c", 1);
    void *Wc;
    const char *kc, *hc;
    tp_backend *bc = int8_load(&Wc, &kc, &hc);
    unsetenv("TPGEN_CPU_ISA");
    CHECK(kc && strcmp(kc, "c") == 0 && strstr(hc, "TPGEN_CPU_ISA"), "TPGEN_CPU_ISA=c: chose %s (%s)", kc, hc);
    char *txt2 = slurp(g_cache);
    CHECK(txt && txt2 && strcmp(txt, txt2) == 0, "TPGEN_CPU_ISA=c changed the cache file");
    free(txt2);
    float y[3][N], yc[3][N];
    b->matmul(b, y, g_x, W, NULL, 3, N, K, 0);
    bc->matmul(bc, yc, g_x, Wc, NULL, 3, N, K, 0);
    CHECK(memcmp(y, yc, sizeof y) == 0, "int8: the chosen kernel (%s) and the c twin differ", k);
    bc->free(bc, Wc);
    bc->destroy(bc);
    b->free(b, W);
    b->destroy(b);
    /* 2. read back: as it is with TPGEN_KERNEL_RECHECK=off; re-checked without it (confirmed, or
     * contradicted on a machine busy at one of the two loads: either says the recheck ran) */
    setenv("TPGEN_KERNEL_RECHECK", "off", 1);
    b = int8_load(&W, &k, &how);
    unsetenv("TPGEN_KERNEL_RECHECK");
    CHECK(strncmp(how, "cached in", 9) == 0 && !strstr(how, "re-checked"), "int8: second load not from the cache: %s",
          how);
    b->free(b, W);
    b->destroy(b);
    b = int8_load(&W, &k, &how);
    CHECK((strncmp(how, "cached in", 9) == 0 && strstr(how, "re-checked")) || strstr(how, "was contradicted"),
          "int8: a cached choice was not re-checked: %s", how);
    b->free(b, W);
    b->destroy(b);
    /* 3. an edited line is read: with TPGEN_KERNEL_RECHECK=off obeyed as it is; re-checked, the plain-C
     * twin (over 4x slower than the SIMD tiers) is contradicted, measured again and replaced */
    char *p = txt ? strstr(txt, want) : NULL;
    if (p) {
        char *chosen = p + strlen(want);
        chosen = strchr(chosen, '\t') + 1; /* past the candidates field */
        char *end = strchr(chosen, '\t');
        char edited[1 << 16];
        snprintf(edited, sizeof edited, "%.*sc%s", (int)(chosen - txt), txt, end);
        spit(g_cache, edited);
        setenv("TPGEN_KERNEL_RECHECK", "off", 1);
        b = int8_load(&W, &k, &how);
        unsetenv("TPGEN_KERNEL_RECHECK");
        CHECK(k && strcmp(k, "c") == 0 && strncmp(how, "cached", 6) == 0, "int8: the edited cache line (c) was not "
              "obeyed: %s (%s)", k, how);
        b->free(b, W);
        b->destroy(b);
        if (cpu_features_get()->avx2_fma) {
            b = int8_load(&W, &k, &how);
            CHECK(k && strcmp(k, "c") != 0 && strstr(how, "the cached choice c") && strstr(how, "was contradicted"),
                  "int8: the edited cache line (c) was not re-checked: %s (%s)", k, how);
            char *now = slurp(g_cache);
            CHECK(now && strstr(now, want) && !strstr(now, "\tc\t"), "int8: the contradicted line was kept: %s",
                  now ? now : "");
            free(now);
            b->free(b, W);
            b->destroy(b);
        }
    }
    /* 4. a corrupt line: ignored with a warning, measured again, the file rewritten well-formed */
    spit(g_cache, "# tpgen CPU kernel choices, measured at load (docs/KERNELS.md); delete this file to measure again\n"
                  "this line is not a choice\n");
    b = int8_load(&W, &k, &how);
    CHECK(strncmp(how, "measured", 8) == 0, "int8: a corrupt line was not ignored: %s", how);
    b->free(b, W);
    b->destroy(b);
    free(txt);
    txt = slurp(g_cache);
    CHECK(txt && strstr(txt, want) && !strstr(txt, "not a choice"), "int8: the corrupt line was kept: %s", txt);
    /* 5. a corrupt file (no header): ignored with a warning and replaced */
    spit(g_cache, "garbage\x01\x02\n\tint8-gemv\t1x1\n");
    b = int8_load(&W, &k, &how);
    CHECK(strncmp(how, "measured", 8) == 0 && k && int8_candidate(k), "int8: a corrupt file was not ignored: %s", how);
    b->free(b, W);
    b->destroy(b);
    free(txt);
    txt = slurp(g_cache);
    CHECK(txt && strncmp(txt, "# tpgen CPU kernel choices", 26) == 0 && !strstr(txt, "garbage"),
          "int8: the corrupt file was not replaced: %s", txt);
    free(txt);
    /* 6. TPGEN_KERNEL_CACHE=off: measured, nothing written */
    remove(g_cache);
    setenv("TPGEN_KERNEL_CACHE", "off", 1);
    b = int8_load(&W, &k, &how);
    setenv("TPGEN_KERNEL_CACHE", g_cache, 1);
    CHECK(strstr(how, "not cached"), "int8: TPGEN_KERNEL_CACHE=off: %s", how);
    struct stat st;
    CHECK(stat(g_cache, &st) != 0, "int8: TPGEN_KERNEL_CACHE=off wrote %s", g_cache);
    /* 7. a small matrix is not measured */
    const char *ks = cpu_int8_gemv_choice(b, 64, 64, &how);
    CHECK(ks && strstr(how, "below the measured size"), "int8: a 64 x 64 matrix: %s", how);
    b->free(b, W);
    b->destroy(b);
    /* 8. every TPGEN_CPU_ISA tier this CPU runs is what the GEMV runs; none writes the file */
    static const char *const tiers[][2] = {{"avx2", "avx2"}, {"avxvnni", "avxvnni"}, {"avx512", "avx512vnni"}};
    for (int i = 0; i < 3; i++) {
        if (!int8_candidate(tiers[i][1])) continue;
        setenv("TPGEN_CPU_ISA", tiers[i][0], 1);
        b = int8_load(&W, &k, &how);
        CHECK(k && strcmp(k, tiers[i][1]) == 0 && strstr(how, "TPGEN_CPU_ISA"), "TPGEN_CPU_ISA=%s: int8 ran %s (%s)",
              tiers[i][0], k, how);
        b->free(b, W);
        b->destroy(b);
    }
    unsetenv("TPGEN_CPU_ISA");
    CHECK(stat(g_cache, &st) != 0, "TPGEN_CPU_ISA wrote %s", g_cache);
}

static void test_bf16(void) {
    char err[512];
    remove(g_cache);
    setenv("TPGEN_KERNEL_RECHECK", "off", 1); /* the second load reads the file as it is (int8 tests the recheck) */
    for (int round = 0; round < 2; round++) {
        tp_backend *b = tp_backend_cpu_bf16_create(2, 1, err, sizeof err);
        if (!b) { printf("bf16 part SKIPPED: %s\n", err); return; }
        void *W = b->alloc(b, b->matrix_bytes(b, N, K), "W");
        b->matrix_upload(b, W, g_w, TP_F32, N, K);
        const char *how, *k = cpu_bf16_gemv_choice(b, N, K, &how);
        CHECK(k && bf16_candidate(k), "bf16: chose %s, not a kernel this CPU runs", k ? k : "(none)");
        CHECK(strncmp(how, round ? "cached in" : "measured", round ? 9 : 8) == 0, "bf16 load %d: %s", round, how);
        b->free(b, W);
        b->destroy(b);
    }
    unsetenv("TPGEN_KERNEL_RECHECK");
    char *txt = slurp(g_cache);
    CHECK(txt && strstr(txt, "\tbf16-gemv\t1024x1024\t"), "bf16: no cache line: %s", txt ? txt : "");
    /* the GEMV's second choice, for decode batches above 2 tokens (cpu_bf16_gemm.c: ONE_T) */
    CHECK(txt && strstr(txt, "\tbf16-gemv-batch\t1024x1024\t"), "bf16: no batch-GEMV cache line: %s", txt ? txt : "");
    free(txt);
    setenv("TPGEN_CPU_ISA", "c", 1);
    tp_backend *b = tp_backend_cpu_bf16_create(2, 1, err, sizeof err);
    unsetenv("TPGEN_CPU_ISA");
    if (b) {
        void *W = b->alloc(b, b->matrix_bytes(b, N, K), "W");
        b->matrix_upload(b, W, g_w, TP_F32, N, K);
        const char *how, *k = cpu_bf16_gemv_choice(b, N, K, &how);
        CHECK(k && strcmp(k, "c") == 0 && strstr(how, "TPGEN_CPU_ISA"), "bf16 TPGEN_CPU_ISA=c: %s (%s)", k, how);
        b->free(b, W);
        b->destroy(b);
    }
}

/* f32's rows kernel (T = 2..16) picks its tier at a shape's first use: measured, saved, named. */
static void test_f32(void) {
    remove(g_cache);
    for (int round = 0; round < 2; round++) {
        tp_backend *b = tp_backend_cpu_create(2);
        void *W = b->alloc(b, b->matrix_bytes(b, N, K), "W");
        b->matrix_upload(b, W, g_w, TP_F32, N, K);
        float y[3][N];
        b->matmul(b, y, g_x, W, NULL, 3, N, K, 0);
        const char *k = b->kernel_name(b, TP_OP_MATMUL, 3, 64);
        const cpu_features *f = cpu_features_get();
        CHECK(!strcmp(k, "rows-f32-c") || (!strcmp(k, "rows-f32-avx2") && f->avx2_fma) ||
              (!strcmp(k, "rows-f32-avx512") && f->avx512), "f32: the rows kernel is %s", k);
        b->free(b, W);
        b->destroy(b);
    }
    char *txt = slurp(g_cache);
    CHECK(txt && strstr(txt, "\tf32-rows\t1024x1024\t"), "f32: no cache line: %s", txt ? txt : "");
    free(txt);
}

/* Attention's build, measured when the backend is told the model's shape (attention_tune): one of
 * this CPU's builds, what the op and kernel_name then run, saved, read back, an edited line obeyed,
 * off writes nothing, GQA and bf16 K/V shapes keyed apart, tiny heads unmeasured. (Forced and capped
 * runs, read once per process, and a second process: tests/cpu_attn/isa_cap.sh.) */
static int attn_candidate(const char *k) {
    return (!strcmp(k, "c") && cpu_attn_isa_supported(ATT_ISA_C)) ||
           (!strcmp(k, "avx2") && cpu_attn_isa_supported(ATT_ISA_AVX2)) ||
           (!strcmp(k, "avx512") && cpu_attn_isa_supported(ATT_ISA_AVX512));
}
static const char *attn_tune(tp_backend *b, int Hl, int Hkl, int D, int bs) {
    const tp_attn_shape as = {Hl, Hkl, D, D / 2, TP_ROPE_GPTJ, 10000.0f};
    b->attention_tune(b, &as, bs, 0);
    return cpu_attn_isa_name(cpu_attn_isa_pick());
}

static void test_attn(void) {
    remove(g_cache);
    tp_backend *b = tp_backend_cpu_create(2);
    /* 1. measured, one of this CPU's builds, saved; the op and its name follow it */
    const char *k = attn_tune(b, 4, 4, 64, 16);
    const char *how = cpu_attn_isa_why();
    CHECK(attn_candidate(k), "attention: chose %s, not a build this CPU runs", k);
    CHECK(strncmp(how, "measured at T = 1, context 1024 (ms: ", 37) == 0 && strstr(how, "saved to"),
          "attention: not measured and saved: %s", how);
    char want_name[32];
    snprintf(want_name, sizeof want_name, "dot-f32-%s", k);
    const char *name = b->kernel_name(b, TP_OP_ATTENTION, 1, 64);
    CHECK(strcmp(name, want_name) == 0, "attention: measured %s but kernel_name says %s", k, name);
    char *txt = slurp(g_cache);
    const char *want = "\tattention\tkv f32, Hl 4, Hkl 4, D 64, bs 16\t";
    CHECK(txt && strstr(txt, want), "attention: the cache has no line for the shape: %s", txt ? txt : "");
    /* 2. read back */
    const char *k2 = attn_tune(b, 4, 4, 64, 16);
    CHECK(strcmp(k2, k) == 0 && strncmp(cpu_attn_isa_why(), "cached in", 9) == 0,
          "attention: second pick %s (%s), want %s cached", k2, cpu_attn_isa_why(), k);
    /* 3. an edited line naming another build of this CPU is obeyed */
    const char *other = strcmp(k, "c") ? "c" : cpu_attn_isa_supported(ATT_ISA_AVX2) ? "avx2" : NULL;
    char *p = txt ? strstr(txt, want) : NULL;
    if (p && other) {
        char *chosen = strchr(p + strlen(want), '\t') + 1; /* past the candidates field */
        char *end = strchr(chosen, '\t');
        char edited[1 << 16];
        snprintf(edited, sizeof edited, "%.*s%s%s", (int)(chosen - txt), txt, other, end);
        spit(g_cache, edited);
        const char *k3 = attn_tune(b, 4, 4, 64, 16);
        CHECK(strcmp(k3, other) == 0 && strncmp(cpu_attn_isa_why(), "cached in", 9) == 0,
              "attention: the edited cache line (%s) was not obeyed: %s (%s)", other, k3, cpu_attn_isa_why());
        snprintf(want_name, sizeof want_name, "dot-f32-%s", other);
        name = b->kernel_name(b, TP_OP_ATTENTION, 1, 64);
        CHECK(strcmp(name, want_name) == 0, "attention: the cache chose %s but kernel_name says %s", other, name);
    }
    free(txt);
    b->destroy(b);
    /* 4. grouped-query heads with bf16 K/V: a line of their own */
    char err[512];
    tp_backend *bb = tp_backend_cpu_bf16_create(2, 0, err, sizeof err);
    if (bb) {
        k = attn_tune(bb, 8, 2, 64, 32);
        CHECK(attn_candidate(k) && strncmp(cpu_attn_isa_why(), "measured", 8) == 0, "attention bf16 GQA: %s (%s)", k,
              cpu_attn_isa_why());
        snprintf(want_name, sizeof want_name, "dot-bf16-%s", k);
        name = bb->kernel_name(bb, TP_OP_ATTENTION, 1, 64);
        CHECK(strcmp(name, want_name) == 0, "attention bf16: measured %s but kernel_name says %s", k, name);
        txt = slurp(g_cache);
        CHECK(txt && strstr(txt, "\tattention\tkv bf16, Hl 8, Hkl 2, D 64, bs 32\t") && strstr(txt, want),
              "attention bf16 GQA: its line, and the f32 one kept: %s", txt ? txt : "");
        free(txt);
        bb->destroy(bb);
    } else printf("attention bf16 part SKIPPED: %s\n", err);
    /* 5. TPGEN_KERNEL_CACHE=off: measured, nothing written */
    remove(g_cache);
    setenv("TPGEN_KERNEL_CACHE", "off", 1);
    b = tp_backend_cpu_create(2);
    k = attn_tune(b, 4, 4, 64, 16);
    setenv("TPGEN_KERNEL_CACHE", g_cache, 1);
    CHECK(attn_candidate(k) && strstr(cpu_attn_isa_why(), "not cached"), "attention: TPGEN_KERNEL_CACHE=off: %s",
          cpu_attn_isa_why());
    struct stat st;
    CHECK(stat(g_cache, &st) != 0, "attention: TPGEN_KERNEL_CACHE=off wrote %s", g_cache);
    /* 6. a test model's 16-dim heads: the widest build, not measured, nothing written */
    const char *widest = cpu_attn_isa_supported(ATT_ISA_AVX512) ? "avx512"
                         : cpu_attn_isa_supported(ATT_ISA_AVX2) ? "avx2" : "c";
    k = attn_tune(b, 4, 4, 16, 16);
    CHECK(strcmp(k, widest) == 0 && strstr(cpu_attn_isa_why(), "not measured"), "attention D = 16: %s (%s)", k,
          cpu_attn_isa_why());
    CHECK(stat(g_cache, &st) != 0, "attention D = 16 wrote %s", g_cache);
    b->destroy(b);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_kernel_tune DIR\n");
        return 2;
    }
    snprintf(g_cache, sizeof g_cache, "%s/sub/dir/cpu-kernels.tsv", argv[1]); /* directories made as needed */
    setenv("TPGEN_KERNEL_CACHE", g_cache, 1);
    unsetenv("TPGEN_CPU_ISA");
    unsetenv("TPGEN_INT8_GEMM");
    unsetenv("TPGEN_CPU_ATTN");
    g_w = malloc((size_t)N * K * sizeof *g_w);
    g_x = malloc((size_t)3 * K * sizeof *g_x);
    for (size_t i = 0; i < (size_t)N * K; i++) g_w[i] = (float)(2 * urand() - 1);
    for (size_t i = 0; i < (size_t)3 * K; i++) g_x[i] = (float)(2 * urand() - 1);
    test_int8();
    test_bf16();
    test_f32();
    test_attn();
    free(g_w);
    free(g_x);
    printf("test_kernel_tune: %d checks, %d failed\n", g_checks, g_fail);
    return g_fail ? 1 : 0;
}
