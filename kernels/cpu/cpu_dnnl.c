/* oneDNN matmul for the bf16 CPU backend's batched GEMMs (kernels/cpu/cpu_bf16.h).
 *
 * One primitive per shape class (N, K, epilogue), M (tokens) a runtime dimension, created at its
 * first use and cached: never created again in the per-token loop. The weights descriptor is
 * format "any", so oneDNN picks its blocked layout; every W is reordered into it once. With
 * AMX, the kernel must grant the process the tile state first (cpu_features_get asks for it).
 * TPGEN_CPU_ISA caps oneDNN's ISA as it caps our kernels (cpu_isa.h; max_isa_cap).
 * Built without oneDNN (TPGEN_HAVE_DNNL undefined), the stubs say so and --dtype bf16 is refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "kernels/cpu/cpu_bf16.h"
#include "kernels/cpu/cpu_isa.h"

#ifndef TPGEN_HAVE_DNNL
int tp_dnnl_compiled(void) { return 0; }
tp_dnnl *tp_dnnl_create(int n_threads, int force, char *err, size_t err_size) {
    (void)n_threads; (void)force;
    snprintf(err, err_size, "built without oneDNN");
    return NULL;
}
void tp_dnnl_destroy(tp_dnnl *d) { (void)d; }
const char *tp_dnnl_impl(tp_dnnl *d) { (void)d; return "none"; }
size_t tp_dnnl_weights_bytes(tp_dnnl *d, int N, int K) { (void)d; (void)N; (void)K; return 0; }
void tp_dnnl_reorder(tp_dnnl *d, void *dst, const uint16_t *W, int N, int K) {
    (void)d; (void)dst; (void)W; (void)N; (void)K;
    tp_die("internal: oneDNN reorder without oneDNN");
}
void tp_dnnl_matmul(tp_dnnl *d, void *y, const uint16_t *x, const void *Wb, const uint16_t *bias, int T, int N,
                    int K, int accumulate, int gelu, int out_f32) {
    (void)d; (void)y; (void)x; (void)Wb; (void)bias; (void)T; (void)N; (void)K; (void)accumulate; (void)gelu;
    (void)out_f32;
    tp_die("internal: oneDNN matmul without oneDNN");
}
#else
#include <oneapi/dnnl/dnnl.h>

#define DNNL_CHECK(call)                                                                                  \
    do {                                                                                                  \
        dnnl_status_t st_ = (call);                                                                       \
        if (st_ != dnnl_success) tp_die("%s:%d: oneDNN: %s failed (status %d)", __FILE__, __LINE__, #call, \
                                        (int)st_);                                                        \
    } while (0)

typedef struct {
    int N, K, flags; /* flags: 1 accumulate, 2 gelu, 4 f32 out, 8 bias */
    dnnl_primitive_t prim;
    dnnl_memory_desc_t wei; /* the blocked weights layout this primitive reads */
} prim_entry;

struct tp_dnnl {
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    prim_entry *prims;
    int n_prims, cap;
    char impl[128];
};

int tp_dnnl_compiled(void) { return 1; }

static dnnl_status_t make_pd(tp_dnnl *d, int N, int K, int flags, dnnl_primitive_desc_t *pd) {
    dnnl_memory_desc_t src, wei, dst, bias;
    const dnnl_dims_t sd = {DNNL_RUNTIME_DIM_VAL, K}, wd = {K, N}, dd = {DNNL_RUNTIME_DIM_VAL, N}, bd = {1, N};
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&src, 2, sd, dnnl_bf16, dnnl_ab));
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&wei, 2, wd, dnnl_bf16, dnnl_format_tag_any));
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&dst, 2, dd, (flags & 4) ? dnnl_f32 : dnnl_bf16, dnnl_ab));
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&bias, 2, bd, dnnl_bf16, dnnl_ab));
    dnnl_matmul_desc_t md;
    DNNL_CHECK(dnnl_matmul_desc_init(&md, &src, &wei, (flags & 8) ? &bias : NULL, &dst));
    dnnl_primitive_attr_t attr;
    dnnl_post_ops_t po;
    DNNL_CHECK(dnnl_primitive_attr_create(&attr));
    DNNL_CHECK(dnnl_post_ops_create(&po));
    if (flags & 1) DNNL_CHECK(dnnl_post_ops_append_sum(po, 1.0f)); /* y + xW^T (+ bias): f32, one rounding */
    if (flags & 2) DNNL_CHECK(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_gelu_tanh, 0.0f, 0.0f));
    DNNL_CHECK(dnnl_primitive_attr_set_post_ops(attr, po));
    dnnl_status_t st = dnnl_primitive_desc_create(pd, &md, attr, d->eng, NULL);
    dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    return st;
}

static const char *pd_impl(dnnl_primitive_desc_t pd) {
    const char *s = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s) != dnnl_success || !s) return "?";
    return s;
}

/* TPGEN_CPU_ISA's cap on oneDNN (process-wide, set before its first kernel): c -> no oneDNN;
 * avx2, avxvnni -> oneDNN's avx2 / avx2_vnni (no native bf16 there: refused as reference code
 * unless forced); avx512 -> avx512_core_bf16 (AVX-512 without AMX); amx -> no cap. -1 with err
 * when oneDNN cannot be held to it (its ISA was fixed earlier in the process). */
static int max_isa_cap(char *err, size_t err_size) {
    cpu_tier cap;
    int forced;
    if (cpu_tier_forced(&cap, &forced, err, err_size)) return -1;
    if (!forced || cap == CPU_TIER_AMX) return 0;
    if (cap == CPU_TIER_C) {
        snprintf(err, err_size, "TPGEN_CPU_ISA=c: oneDNN has no plain-C kernels");
        return -1;
    }
    const dnnl_cpu_isa_t want = cap == CPU_TIER_AVX2      ? dnnl_cpu_isa_avx2
                                : cap == CPU_TIER_AVXVNNI ? dnnl_cpu_isa_avx2_vnni
                                                          : dnnl_cpu_isa_avx512_core_bf16;
    if (dnnl_set_max_cpu_isa(want) != dnnl_success && dnnl_get_effective_cpu_isa() != want) {
        snprintf(err, err_size, "TPGEN_CPU_ISA=%s: oneDNN's ISA was already fixed in this process (0x%x)",
                 cpu_tier_name(cap), (unsigned)dnnl_get_effective_cpu_isa());
        return -1;
    }
    return 0;
}

tp_dnnl *tp_dnnl_create(int n_threads, int force, char *err, size_t err_size) {
    (void)n_threads; /* oneDNN (OpenMP build) runs on the OpenMP pool the backend sized */
    if (max_isa_cap(err, err_size)) return NULL;
    (void)cpu_features_get(); /* asks Linux for the AMX tile data where the CPU has AMX (cpu_isa.c) */
    tp_dnnl *d = tp_calloc(1, sizeof *d);
    DNNL_CHECK(dnnl_engine_create(&d->eng, dnnl_cpu, 0));
    DNNL_CHECK(dnnl_stream_create(&d->stream, d->eng, dnnl_stream_default_flags));
    /* Probe a CodeGen-like shape: which implementation does oneDNN pick for bf16 here? */
    dnnl_primitive_desc_t pd;
    if (make_pd(d, 1024, 1024, 0, &pd) != dnnl_success) {
        snprintf(err, err_size, "oneDNN has no bf16 matmul on this CPU");
        tp_dnnl_destroy(d);
        return NULL;
    }
    snprintf(d->impl, sizeof d->impl, "%s", pd_impl(pd));
    dnnl_primitive_desc_destroy(pd);
    if (!force && strncmp(d->impl, "ref", 3) == 0) {
        snprintf(err, err_size, "oneDNN runs bf16 matmul on this CPU only through its reference code (%s; it needs "
                                "AVX-512)", d->impl);
        tp_dnnl_destroy(d);
        return NULL;
    }
    return d;
}

void tp_dnnl_destroy(tp_dnnl *d) {
    if (!d) return;
    for (int i = 0; i < d->n_prims; i++) dnnl_primitive_destroy(d->prims[i].prim);
    free(d->prims);
    if (d->stream) dnnl_stream_destroy(d->stream);
    if (d->eng) dnnl_engine_destroy(d->eng);
    free(d);
}

const char *tp_dnnl_impl(tp_dnnl *d) { return d->impl; }

static prim_entry *get_prim(tp_dnnl *d, int N, int K, int flags) {
    for (int i = 0; i < d->n_prims; i++)
        if (d->prims[i].N == N && d->prims[i].K == K && d->prims[i].flags == flags) return &d->prims[i];
    dnnl_primitive_desc_t pd;
    dnnl_status_t st = make_pd(d, N, K, flags, &pd);
    if (st != dnnl_success)
        tp_die("oneDNN: no bf16 matmul for N=%d K=%d (accumulate %d, gelu %d, f32 out %d, bias %d): status %d", N, K,
               flags & 1, !!(flags & 2), !!(flags & 4), !!(flags & 8), (int)st);
    if (d->n_prims == d->cap) {
        d->cap = d->cap ? 2 * d->cap : 16;
        d->prims = tp_realloc(d->prims, (size_t)d->cap * sizeof *d->prims);
    }
    prim_entry *e = &d->prims[d->n_prims++];
    e->N = N;
    e->K = K;
    e->flags = flags;
    e->wei = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    DNNL_CHECK(dnnl_primitive_create(&e->prim, pd));
    dnnl_primitive_desc_destroy(pd);
    const int idx = d->n_prims - 1;
    if (flags != 0) { /* one weights copy serves every epilogue: the layouts must agree */
        const prim_entry *base = get_prim(d, N, K, 0); /* may grow d->prims */
        e = &d->prims[idx];
        if (!dnnl_memory_desc_equal(&base->wei, &e->wei))
            tp_die("oneDNN: the weights layout for N=%d K=%d differs between epilogues; tpgen keeps one copy", N, K);
    }
    return e;
}

size_t tp_dnnl_weights_bytes(tp_dnnl *d, int N, int K) {
    return dnnl_memory_desc_get_size(&get_prim(d, N, K, 0)->wei);
}

void tp_dnnl_reorder(tp_dnnl *d, void *dst, const uint16_t *W, int N, int K) {
    const prim_entry *e = get_prim(d, N, K, 0);
    dnnl_memory_desc_t plain;
    const dnnl_dims_t wd = {K, N};
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&plain, 2, wd, dnnl_bf16, dnnl_ba)); /* W [N, K] is W^T in "ba" */
    dnnl_primitive_desc_t rpd;
    DNNL_CHECK(dnnl_reorder_primitive_desc_create(&rpd, &plain, d->eng, &e->wei, d->eng, NULL));
    dnnl_primitive_t r;
    DNNL_CHECK(dnnl_primitive_create(&r, rpd));
    dnnl_memory_t ms, md;
    DNNL_CHECK(dnnl_memory_create(&ms, &plain, d->eng, (void *)W));
    DNNL_CHECK(dnnl_memory_create(&md, &e->wei, d->eng, dst));
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, ms}, {DNNL_ARG_TO, md}};
    DNNL_CHECK(dnnl_primitive_execute(r, d->stream, 2, args));
    DNNL_CHECK(dnnl_stream_wait(d->stream));
    dnnl_memory_destroy(ms);
    dnnl_memory_destroy(md);
    dnnl_primitive_destroy(r);
    dnnl_primitive_desc_destroy(rpd);
}

void tp_dnnl_matmul(tp_dnnl *d, void *y, const uint16_t *x, const void *Wb, const uint16_t *bias, int T, int N,
                    int K, int accumulate, int gelu, int out_f32) {
    const int flags = (accumulate ? 1 : 0) | (gelu ? 2 : 0) | (out_f32 ? 4 : 0) | (bias ? 8 : 0);
    const prim_entry *e = get_prim(d, N, K, flags);
    dnnl_memory_desc_t src, dst, bmd;
    const dnnl_dims_t sd = {T, K}, dd = {T, N}, bd = {1, N};
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&src, 2, sd, dnnl_bf16, dnnl_ab));
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&dst, 2, dd, out_f32 ? dnnl_f32 : dnnl_bf16, dnnl_ab));
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&bmd, 2, bd, dnnl_bf16, dnnl_ab));
    dnnl_memory_t ms, mw, md, mb = NULL;
    DNNL_CHECK(dnnl_memory_create(&ms, &src, d->eng, (void *)x));
    DNNL_CHECK(dnnl_memory_create(&mw, &e->wei, d->eng, (void *)Wb));
    DNNL_CHECK(dnnl_memory_create(&md, &dst, d->eng, y));
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, md}};
    int n = 3;
    if (bias) {
        DNNL_CHECK(dnnl_memory_create(&mb, &bmd, d->eng, (void *)bias));
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, mb};
    }
    DNNL_CHECK(dnnl_primitive_execute(e->prim, d->stream, n, args));
    DNNL_CHECK(dnnl_stream_wait(d->stream));
    dnnl_memory_destroy(ms);
    dnnl_memory_destroy(mw);
    dnnl_memory_destroy(md);
    if (mb) dnnl_memory_destroy(mb);
}
#endif
