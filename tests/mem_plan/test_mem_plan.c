/* The memory plan (kernels/mem_plan.h, engine/model/model_plan.c, kernels/cuda/cuda_plan.c) on the CPU,
 * for configs/codegen-16B.json (or the config given: CodeGen2.5-7B, and a grouped-query variant
 * of it, tests/mem_plan.cmake) at TP 1/2/4/8 (first and last rank: the vocab padding differs),
 * batch 1..64, steps of up to 512 tokens, context up to n_positions.
 *
 * A fake device backend stands in for the CUDA backend: F16, 141 GiB, 132 multiprocessors (an
 * H200), the CUDA backend's matrix layout and its scratch rules (plan_scratch and
 * reserve_scratch run the same cuda_plan.c code the CUDA backend runs). Its alloc allocates
 * nothing: it records every request (name, bytes) and hands out addresses no one reads. Then:
 *  - the plan made before loading equals the requests of loading weights, reserving the scratch
 *    and allocating activations and KV, item by item and in total, with nothing else asked for;
 *  - planning again after the weights are in (weights now held) picks the same KV blocks;
 *  - every step the limits allow (each decode token count, each context up to the block table's
 *    capacity, as a CUDA graph capture sizes it) needs no more split-K scratch than reserved;
 *  - a device too small is refused with the plan's table, naming the weights.
 * One line per configuration; exit 1 on any failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_plan.h"
#include "model/model.h"
#include "kernels/cuda/cuda_plan.h"
#include "util/log.h"

#define MAX_REQ 64
#define GiB (1024.0 * 1024.0 * 1024.0)

typedef struct {
    tp_backend base;
    char name[MAX_REQ][40];
    size_t bytes[MAX_REQ];
    int n_req;
    size_t total, used;
    uintptr_t next;
    int sm_count;
} fake_dev;

static void *f_alloc(tp_backend *b, size_t bytes, const char *what) {
    fake_dev *f = (fake_dev *)b;
    if (f->n_req == MAX_REQ) tp_die("fake device: too many allocations");
    snprintf(f->name[f->n_req], sizeof f->name[0], "%s", what);
    f->bytes[f->n_req++] = bytes;
    if (f->used + bytes > f->total) tp_die("fake device: out of memory: %s needs %zu bytes", what, bytes);
    f->used += bytes;
    void *p = (void *)f->next;
    f->next += (bytes + 4095) / 4096 * 4096 + 4096;
    return p;
}
static void f_free(tp_backend *b, void *p) { (void)b; (void)p; }
static size_t f_mem_available(tp_backend *b) { fake_dev *f = (fake_dev *)b; return f->total - f->used; }
static size_t f_matrix_bytes(tp_backend *b, int rows, int cols) { (void)b; return (size_t)rows * cols * 2; }
static void f_fill_random(tp_backend *b, void *d, size_t n, uint64_t s, float m, float sd) {
    (void)b; (void)d; (void)n; (void)s; (void)m; (void)sd;
}
static void f_sync(tp_backend *b) { (void)b; }
/* never called (no step runs): present so a LLaMA config passes tp_arch_backend_ok */
static void f_rmsnorm(tp_backend *b, void *y, const void *x, const void *g, int T, int E, float eps) {
    (void)b; (void)y; (void)x; (void)g; (void)T; (void)E; (void)eps;
}
static void f_silu_mul(tp_backend *b, void *y, const void *gu, int T, int N) {
    (void)b; (void)y; (void)gu; (void)T; (void)N;
}
static void f_plan_scratch(tp_backend *b, const tp_step_limits *lim, tp_mem_plan *p) {
    tpc_plan_scratch(lim, ((fake_dev *)b)->sm_count, p);
}
static void f_reserve_scratch(tp_backend *b, const tp_step_limits *lim) {
    tpc_scratch s;
    tpc_scratch_reserve(b, lim, ((fake_dev *)b)->sm_count, &s);
}

static void fake_init(fake_dev *f, double gib) {
    memset(f, 0, sizeof *f);
    f->base.name = "fake-cuda";
    f->base.act = TP_F16;
    f->base.kv = TP_F16;
    f->base.alloc = f_alloc;
    f->base.free = f_free;
    f->base.mem_available = f_mem_available;
    f->base.matrix_bytes = f_matrix_bytes;
    f->base.fill_random = f_fill_random;
    f->base.sync = f_sync;
    f->base.rmsnorm = f_rmsnorm;
    f->base.silu_mul = f_silu_mul;
    f->base.plan_scratch = f_plan_scratch;
    f->base.reserve_scratch = f_reserve_scratch;
    f->total = (size_t)(gib * GiB);
    f->next = 1u << 20;
    f->sm_count = 132;
}

static int g_fail, g_checks;

/* One configuration: plan, then do what the launcher does, and compare. */
static void run_case(const tp_config *cfg, int tp, int rank, int S, int T, long kv_tokens) {
    fake_dev f;
    fake_init(&f, 141.0);
    tp_model m;
    memset(&m, 0, sizeof m);
    m.cfg = *cfg;
    char err[8192];
    if (tp_shard_plan(cfg, tp, rank, &m.sh, err, sizeof err)) tp_die("%s", err);
    m.b = &f.base;
    tp_plan_args pa = {.max_tokens = T, .max_rows = S, .max_seqs = S, .block_size = 16, .max_k = 64,
                       .kv_tokens = kv_tokens, .kv_mem = 0.9,
                       .kv_tokens_needed = (long)S * cfg->n_positions, .sharing = 1};
    tp_mem_plan plan, plan2;
    const long blocks = tp_model_plan(&m, &pa, f_mem_available(&f.base), &plan, err, sizeof err);
    char what[128], det[512] = "";
    snprintf(what, sizeof what, "TP=%d rank %d batch %2d step %3d tokens, KV %s", tp, rank, S, T,
             kv_tokens ? "given" : "from free memory");
    int ok = blocks >= 1;
    if (!ok) snprintf(det, sizeof det, "plan refused: %.200s", err);

    /* what the launcher does: load, reserve, allocate */
    if (ok) {
        tp_model_load_weights(&m, NULL, 1, 7);
        const long blocks2 = tp_model_plan(&m, &pa, f_mem_available(&f.base), &plan2, err, sizeof err);
        tp_step_limits lim;
        pa.kv_blocks = blocks; /* as tp_job_alloc: the table's capacity bounds the context */
        tp_model_step_limits(&m, &pa, &lim);
        f.base.reserve_scratch(&f.base, &lim);
        tp_model_alloc(&m, T, S, S, (int)blocks, pa.block_size);
        /* every DEVICE item of the plan was asked for once, with its bytes; nothing else was */
        int matched = 0;
        size_t asked = 0;
        for (int i = 0; i < f.n_req; i++) asked += f.bytes[i];
        for (int i = 0; i < plan.n && ok; i++) {
            const tp_mem_item *it = &plan.item[i];
            if (it->kind != TP_MEM_DEVICE) continue;
            int found = 0;
            for (int r = 0; r < f.n_req; r++)
                if (strcmp(f.name[r], it->name) == 0) {
                    found++;
                    if (f.bytes[r] != it->bytes) {
                        ok = 0;
                        snprintf(det, sizeof det, "%s: plan %zu bytes, allocator asked for %zu", it->name, it->bytes,
                                 f.bytes[r]);
                    }
                }
            if (found != 1 && it->bytes > 0) {
                ok = 0;
                snprintf(det, sizeof det, "%s: asked for %d times (plan: once)", it->name, found);
            }
            matched += found;
        }
        if (ok && (matched != f.n_req || asked != tp_mem_plan_sum(&plan, TP_MEM_DEVICE))) {
            ok = 0;
            snprintf(det, sizeof det, "%d requests (%zu bytes) but %d planned (%zu bytes)", f.n_req, asked, matched,
                     tp_mem_plan_sum(&plan, TP_MEM_DEVICE));
        }
        if (ok && blocks2 != blocks) {
            ok = 0;
            snprintf(det, sizeof det, "KV blocks %ld before loading, %ld after", blocks, blocks2);
        }
        /* a sequence reaches at most the table's capacity: n_positions and the whole cache */
        if (ok && (long)lim.max_ctx > blocks * pa.block_size) {
            ok = 0;
            snprintf(det, sizeof det, "scratch sized for context %d, the cache holds %ld tokens", lim.max_ctx,
                     blocks * pa.block_size);
        }
        /* every step within the limits fits the reserved split-K scratch */
        const size_t reserved = tp_mem_plan_find(&plan, TPC_PLAN_ATTN)->bytes;
        size_t worst = 0;
        int worst_T = 0;
        long worst_ctx = 0;
        for (int t = 1; t <= T && ok; t++) {
            if (!tpc_attn_is_decode(t, S)) continue;
            for (long ctx = 1; ctx <= lim.max_ctx; ctx++) {
                const size_t need =
                    tpc_attn_part_bytes(t, m.sh.n_heads, cfg->head_dim, tpc_attn_splits(ctx, t, m.sh.n_heads, 132, NULL));
                if (need > worst) { worst = need; worst_T = t; worst_ctx = ctx; }
            }
        }
        if (ok && (worst > reserved || worst == 0)) {
            ok = 0;
            snprintf(det, sizeof det, "split-K scratch: step T=%d ctx=%ld needs %zu, reserved %zu", worst_T, worst_ctx,
                     worst, reserved);
        }
        if (ok)
            snprintf(det, sizeof det, "weights %.2f GiB, acts %.1f MiB, split-K %.1f MiB (T=%d ctx=%ld), KV %ld blocks "
                     "(%.1f GiB), %d allocations",
                     tp_mem_plan_find(&plan, "weights")->bytes / GiB,
                     tp_mem_plan_find(&plan, "activations")->bytes / 1048576.0, reserved / 1048576.0, worst_T,
                     worst_ctx, blocks, tp_mem_plan_find(&plan, "KV cache")->bytes / GiB, f.n_req);
        free(m.w.layers);
        tp_kv_cache_free(&m.kv, &f.base);
    }
    g_checks++;
    if (!ok) g_fail++;
    printf("%-4s %-58s %s\n", ok ? "ok" : "FAIL", what, det);
}

static void refuse_case(const tp_config *cfg, int tp, double gib, long kv_tokens, const char *must) {
    fake_dev f;
    fake_init(&f, gib);
    tp_model m;
    memset(&m, 0, sizeof m);
    m.cfg = *cfg;
    char err[8192], what[128];
    if (tp_shard_plan(cfg, tp, 0, &m.sh, err, sizeof err)) tp_die("%s", err);
    m.b = &f.base;
    tp_plan_args pa = {.max_tokens = 512, .max_rows = 32, .max_seqs = 32, .block_size = 16, .max_k = 64,
                       .kv_tokens = kv_tokens, .kv_mem = 0.9, .sharing = 1};
    tp_mem_plan plan;
    err[0] = '\0';
    const long blocks = tp_model_plan(&m, &pa, f_mem_available(&f.base), &plan, err, sizeof err);
    const int ok = blocks == 0 && strstr(err, "does not fit") && strstr(err, must) && strstr(err, "KV cache") &&
                   strstr(err, TPC_PLAN_ATTN);
    snprintf(what, sizeof what, "refused: TP=%d on %.0f GiB%s", tp, gib, kv_tokens ? ", --kv-cache-tokens" : "");
    g_checks++;
    if (!ok) g_fail++;
    const char *nl = strchr(err, '\n');
    printf("%-4s %-58s %.*s\n", ok ? "ok" : "FAIL", what, nl ? (int)(nl - err) : (int)strlen(err), err);
    if (!ok || getenv("PLAN_VERBOSE")) printf("%s", err);
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "configs/codegen-16B.json";
    tp_config cfg;
    char err[1024];
    if (tp_config_load(path, &cfg, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    tp_log_set_rank(1, 2); /* the engine's rank-0 progress lines stay quiet */
    const int tps[] = {1, 2, 4, 8}, batches[] = {1, 2, 3, 8, 16, 33, 64};
    for (int i = 0; i < 4; i++)
        for (int r = 0; r < 2; r++) {
            const int rank = r ? tps[i] - 1 : 0;
            if (r && tps[i] == 1) continue;
            for (int j = 0; j < 7; j++) {
                const int S = batches[j];
                run_case(&cfg, tps[i], rank, S, S, 0);               /* decode-only steps */
                run_case(&cfg, tps[i], rank, S, S > 512 ? S : 512, 0); /* with 512-token prefill chunks */
            }
            run_case(&cfg, tps[i], rank, 64, 2048, (long)64 * cfg.n_positions); /* all 64 at full context */
        }
    /* n_positions is only a limit: a huge one sizes nothing (the scratch follows the KV budget) */
    tp_config huge = cfg;
    huge.n_positions = 1000000000;
    run_case(&huge, 2, 0, 4, 4, 4096);
    run_case(&huge, 2, 1, 8, 512, 16384);
    /* a device too small: 24 GiB for 16B (30 GiB of F16 weights), 0.6 of the weights for a smaller
     * model (CodeGen2.5-7B: 12.8 GiB) -- TP 1 cannot hold the weights; TP 2 holds them, not 64
     * full contexts of KV */
    const double w_gib = (double)tp_arch_param_count(&cfg) * 2 / GiB, small = w_gib > 28 ? 24.0 : 0.6 * w_gib;
    refuse_case(&cfg, 1, small, 0, "weights");
    refuse_case(&cfg, 2, small, 64L * cfg.n_positions, "KV cache");
    printf("%d checks, %d failed\n", g_checks, g_fail);
    return g_fail ? 1 : 0;
}
