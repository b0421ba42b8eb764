/* The CUDA backend's element-wise, norm and attention kernels (kernels/cuda/cuda_norm_act.cu,
 * cuda_attention.cu, rewritten by cu_for_host.py) behind a tp_backend whose device memory is host
 * memory, run by the emulator of emu.h. Only the ops those two files define are set; uploads
 * convert on the host (the conversion kernel is not what is under test), and graph capture is a
 * no-op (every step runs eagerly, as it would without capture). */
#include "tests/gpu/emu/emu.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_internal.h"
/* no CUDA runtime to ask: the emulator stops on its own errors */
#undef CUDA_CHECK
#define CUDA_CHECK(call) ((void)0)
#undef CUDA_CHECK_LAUNCH
#define CUDA_CHECK_LAUNCH() ((void)0)
#include "cuda_device_helpers.h" /* cuda_internal.h's __CUDACC__ block, generated */
#include "cuda_attention.host.cpp"
#include "cuda_norm_act.host.cpp"

/* cuda_backend.cu's scratch rule without a memory plan: grow on demand */
float *tpc_attn_part(tp_cuda *c, size_t bytes) {
    if (bytes > c->attn_part_bytes) {
        free(c->attn_part);
        c->attn_part = (float *)malloc(bytes);
        if (!c->attn_part) tp_die("emu: out of memory for %zu bytes of attention partials", bytes);
        memset(c->attn_part, 0xff, bytes); /* NaN: a partial never written shows */
        c->attn_part_bytes = bytes;
    }
    return c->attn_part;
}

static void *emu_alloc(tp_backend *, size_t bytes, const char *what) {
    void *p = malloc(bytes ? bytes : 16);
    if (!p) tp_die("emu: out of memory for %s (%zu bytes)", what ? what : "a buffer", bytes);
    memset(p, 0x5a, bytes);
    return p;
}
static void emu_free(tp_backend *, void *p) { free(p); }
static void emu_copy(tp_backend *, void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
static void emu_sync(tp_backend *) {}
static void emu_upload(tp_backend *b, void *dst, const void *src, tp_dtype st, size_t n) {
    float *t = (float *)malloc(n * sizeof(float) + sizeof(float));
    if (!t) tp_die("emu: out of memory converting %zu elements", n);
    tp_convert_to_f32(t, src, st, n);
    tp_convert_from_f32(dst, b->act, t, n);
    free(t);
}
static int emu_graph_launch(tp_backend *, int) { return 0; }
static void emu_graph_nop(tp_backend *, int) {}
static void emu_destroy(tp_backend *b) {
    tp_cuda *c = tpc(b);
    free(c->attn_part);
    free(c);
}

extern "C" tp_backend *tp_backend_cuda_emu_create(tp_dtype act) {
    tp_cuda *c = (tp_cuda *)calloc(1, sizeof *c);
    if (!c) tp_die("emu: out of memory");
    c->sm_count = 132; /* an H100/H200: sizes the decode splits as there */
    tp_backend *b = &c->base;
    b->name = "cuda-emu";
    b->act = act;
    b->alloc = emu_alloc;
    b->free = emu_free;
    b->to_device = emu_copy;
    b->to_host = emu_copy;
    b->copy = emu_copy;
    b->sync = emu_sync;
    b->upload = emu_upload;
    b->embed = tpc_embed;
    b->layernorm = tpc_layernorm;
    b->rmsnorm = tpc_rmsnorm;
    b->gelu_new = tpc_gelu_new;
    b->silu_mul = tpc_silu_mul;
    b->add = tpc_add;
    b->gather_rows = tpc_gather_rows;
    b->rotary_kv_write = tpc_rotary_kv_write;
    b->attention = tpc_attention;
    b->graph_launch = emu_graph_launch;
    b->graph_begin = emu_graph_nop;
    b->graph_end = emu_graph_nop;
    b->destroy = emu_destroy;
    b->impl = c;
    return b;
}

extern "C" long tp_cuda_emu_barriers(void) { return emu_barrier_count(); }
