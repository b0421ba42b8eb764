/* cpu_split.h: a GEMV's panels over the threads, each range taken by its owner from the front and
 * by idle threads from the back. A range is one 64-bit word (next << 32 | end) changed by
 * compare-and-swap, so an owner and a thief never take the same panel and none is skipped. */
#include "kernels/cpu/cpu_split.h"

#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdint.h>

#include "kernels/cpu/cpu_tune.h"

typedef struct {
    _Alignas(64) _Atomic uint64_t r; /* next << 32 | end: panels [next, end) not yet taken */
} range;

static uint64_t pack(uint32_t next, uint32_t end) { return (uint64_t)next << 32 | end; }

/* Takes about n panels of *g from the front (owner: n, a multiple of align) or the back (thief:
 * from a multiple of align, so that every chunk starts on a tile) -> [*P0, *P1); 0 when empty. */
static int take(range *g, int n, int align, int back, int *P0, int *P1) {
    uint64_t v = atomic_load_explicit(&g->r, memory_order_relaxed);
    for (;;) {
        const uint32_t next = (uint32_t)(v >> 32), end = (uint32_t)v;
        if (next >= end) return 0;
        uint32_t a = next, b = end - next < (uint32_t)n ? end : next + (uint32_t)n; /* the front's */
        if (back) {
            a = end - next < (uint32_t)n ? next : (end - (uint32_t)n) / (uint32_t)align * (uint32_t)align;
            if (a < next) a = next;
            b = end;
        }
        const uint64_t w = back ? pack(next, a) : pack(b, end);
        if (atomic_compare_exchange_weak_explicit(&g->r, &v, w, memory_order_relaxed, memory_order_relaxed)) {
            *P0 = (int)a;
            *P1 = (int)b;
            return 1;
        }
    }
}

/* The range with the most panels left (-1: all empty). */
static int fullest(range *g, int nt) {
    int best = -1;
    uint32_t most = 0;
    for (int i = 0; i < nt; i++) {
        const uint64_t v = atomic_load_explicit(&g[i].r, memory_order_relaxed);
        const uint32_t next = (uint32_t)(v >> 32), end = (uint32_t)v, left = next < end ? end - next : 0;
        if (left > most) most = left, best = i;
    }
    return best;
}

void cpu_split_panels(int np, int nt, int parallel, size_t panel_bytes, size_t chunk_bytes, int align,
                      cpu_split_fn *fn, void *ctx, double *cpu_s) {
    if (np <= 0) {
        if (cpu_s) *cpu_s = 0.0;
        return;
    }
    if (!parallel || nt <= 1) {
        const double t0 = cpu_s ? cpu_tune_thread_seconds() : 0.0;
        fn(ctx, 0, np);
        if (cpu_s) *cpu_s = cpu_tune_thread_seconds() - t0;
        return;
    }
    int chunk = (int)(chunk_bytes / (panel_bytes ? panel_bytes : 1));
    if (align < 1) align = 1;
    chunk = chunk < align ? align : chunk / align * align;
    /* the ranges: the static split's, each a multiple of align but the last */
    const int per = ((np + nt - 1) / nt + align - 1) / align * align;
    range g[nt];
    for (int t = 0; t < nt; t++) {
        const int a = t * per < np ? t * per : np, b = (t + 1) * per < np ? (t + 1) * per : np;
        atomic_init(&g[t].r, pack((uint32_t)a, (uint32_t)b));
    }
    double worst = 0.0;
    #pragma omp parallel num_threads(nt) reduction(max : worst)
    {
        const double t0 = cpu_s ? cpu_tune_thread_seconds() : 0.0;
        const int me = omp_get_thread_num();
        int P0, P1;
        while (take(&g[me], chunk, align, 0, &P0, &P1)) fn(ctx, P0, P1);
        for (int v; (v = fullest(g, nt)) >= 0;)
            if (take(&g[v], chunk, align, 1, &P0, &P1)) fn(ctx, P0, P1);
        if (cpu_s) worst = fmax(worst, cpu_tune_thread_seconds() - t0);
    }
    if (cpu_s) *cpu_s = worst;
}
