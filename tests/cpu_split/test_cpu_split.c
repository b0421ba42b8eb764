/* kernels/cpu/cpu_split.c (ctest cpu_split): every panel of a GEMV's split runs exactly once, for
 * thread counts 1-7, panel counts around the chunk and alignment edges, with threads slowed at
 * random (so ranges are stolen from); every chunk starts on the alignment (a tile);
 * cpu_s is filled. usage: test_cpu_split */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kernels/cpu/cpu_split.h"

typedef struct {
    _Atomic int *count; /* runs per panel */
    _Atomic int misaligned, calls;
    int align;
    unsigned seed;
} ctx;

static void run(void *p, int P0, int P1) {
    ctx *c = p;
    atomic_fetch_add(&c->calls, 1);
    if (P0 % c->align) atomic_fetch_add(&c->misaligned, 1); /* every chunk starts on a tile */
    for (int i = P0; i < P1; i++) atomic_fetch_add(&c->count[i], 1);
    unsigned s = (unsigned)P0 * 2654435761u ^ c->seed;
    if (s % 3 == 0) { /* a slow thread: the others steal */
        struct timespec ts = {0, (long)(s % 200) * 1000};
        nanosleep(&ts, NULL);
    }
}

int main(void) {
    int fails = 0, cases = 0;
    const int nps[] = {1, 2, 3, 7, 16, 63, 64, 65, 192, 1000, 3200};
    for (int nt = 1; nt <= 7; nt++)
        for (size_t a = 0; a < sizeof nps / sizeof *nps; a++)
            for (int align = 1; align <= 2; align++)
                for (int rep = 0; rep < 3; rep++) {
                    const int np = nps[a];
                    _Atomic int *count = calloc((size_t)np, sizeof *count);
                    ctx c = {count, 0, 0, align, (unsigned)(rep * 7919 + nt)};
                    double cpu_s = -1.0;
                    /* chunks of 2 or 3 panels (bytes per panel 1000, chunk 2500 bytes) */
                    cpu_split_panels(np, nt, 1, 1000, 2500, align, run, &c, &cpu_s);
                    int bad = 0;
                    for (int i = 0; i < np; i++) bad += count[i] != 1;
                    cases++;
                    if (bad || cpu_s < 0.0 || atomic_load(&c.misaligned)) {
                        fails++;
                        printf("FAIL: %d threads, %d panels, align %d: %d panels not run exactly once, %d misaligned "
                               "chunks, cpu_s %g\n", nt, np, align, bad, atomic_load(&c.misaligned), cpu_s);
                    }
                    free(count);
                }
    /* not parallel: one call of every panel on the calling thread */
    {
        _Atomic int count[10] = {0};
        ctx c = {count, 0, 0, 1, 1};
        cpu_split_panels(10, 4, 0, 1000, 2500, 1, run, &c, NULL);
        cases++;
        if (atomic_load(&c.calls) != 1 || count[0] != 1 || count[9] != 1) {
            fails++;
            printf("FAIL: parallel 0: %d calls (expected 1)\n", atomic_load(&c.calls));
        }
    }
    printf("%s: %d cases, %d failed\n", fails ? "FAIL" : "ok", cases, fails);
    return fails != 0;
}
