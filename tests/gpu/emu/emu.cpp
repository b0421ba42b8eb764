/* The scheduler of tests/gpu/emu/emu.h: a block's threads as ucontext coroutines, run in a seeded
 * random order between barriers. */
#include "tests/gpu/emu/emu.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <vector>

#include "tests/gpu/emu/emu_rt.h"

dim3 emu_threadIdx, emu_blockIdx, emu_blockDim, emu_gridDim;
void *emu_dyn_smem;

enum { RUNNABLE, AT_SYNC, AT_WARP, DONE };
static const size_t STACK_BYTES = 128 * 1024;
static std::vector<ucontext_t> g_ctx;
static std::vector<char *> g_stacks;
static std::vector<int> g_state, g_order;
static std::vector<uint64_t> g_xchg; /* warp exchange slots by thread */
static ucontext_t g_sched;
static int g_cur;
static const std::function<void()> *g_body;
static const char *g_kernel;
static long g_barriers;
static uint64_t g_rng;

long emu_barrier_count(void) { return g_barriers; }

static uint64_t next_rand(void) { /* xorshift64*: the thread order's draws */
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 2685821657736338717ull;
}

static void thread_main(void) {
    (*g_body)();
    g_state[g_cur] = DONE;
} /* returns to uc_link: the scheduler */

static void wait_at(int kind) {
    g_state[g_cur] = kind;
    g_barriers++;
    if (swapcontext(&g_ctx[g_cur], &g_sched) != 0) emu_fatal("swapcontext: %s", strerror(errno));
}

void emu_syncthreads(void) { wait_at(AT_SYNC); }

static unsigned warp_live(int w) {
    unsigned live = 0;
    const int n = (int)g_state.size();
    for (int l = 0; l < 32 && w * 32 + l < n; l++)
        if (g_state[w * 32 + l] != DONE) live |= 1u << l;
    return live;
}

void emu_warp_begin(uint64_t bits, const uint64_t **slots, unsigned *live) {
    g_xchg[g_cur] = bits;
    wait_at(AT_WARP);
    const int w = g_cur >> 5;
    *slots = &g_xchg[(size_t)w * 32];
    *live = warp_live(w);
}

void emu_warp_end(void) { wait_at(AT_WARP); }

void emu_lane_fault(const char *op, int lane, int src) {
    emu_fatal("kernel %s, block (%u,%u,%u) thread %u: %s by lane %d reads lane %d, which has exited or does not "
              "exist", g_kernel, emu_blockIdx.x, emu_blockIdx.y, emu_blockIdx.z, emu_threadIdx.x, op, lane, src);
}

unsigned emu_ballot(unsigned p) {
    const uint64_t *s;
    unsigned live, r = 0;
    emu_warp_begin(p, &s, &live);
    for (int l = 0; l < 32; l++)
        if ((live >> l & 1) && s[l]) r |= 1u << l;
    emu_warp_end();
    return r;
}

unsigned emu_match_any(uint64_t v) {
    const uint64_t *s;
    unsigned live, r = 0;
    emu_warp_begin(v, &s, &live);
    for (int l = 0; l < 32; l++)
        if ((live >> l & 1) && s[l] == v) r |= 1u << l;
    emu_warp_end();
    return r;
}

/* Runs every runnable thread (in a fresh random order) until it waits or ends. */
static void run_round(int n) {
    for (int i = n - 1; i > 0; i--) std::swap(g_order[i], g_order[next_rand() % (uint64_t)(i + 1)]);
    for (int k = 0; k < n; k++) {
        const int i = g_order[k];
        if (g_state[i] != RUNNABLE) continue;
        g_cur = i;
        emu_threadIdx = dim3(i, 0, 0);
        if (swapcontext(&g_sched, &g_ctx[i]) != 0) emu_fatal("swapcontext: %s", strerror(errno));
    }
}

/* Releases what can go on: whole warps at a warp operation, else the block at __syncthreads.
 * Returns 0 when every thread has ended. */
static int release(int n) {
    int any = 0;
    for (int w = 0; w * 32 < n; w++) {
        const unsigned live = warp_live(w);
        if (!live) continue;
        int all = 1;
        for (int l = 0; l < 32; l++)
            if ((live >> l & 1) && g_state[w * 32 + l] != AT_WARP) all = 0;
        if (!all) continue;
        for (int l = 0; l < 32; l++)
            if (live >> l & 1) g_state[w * 32 + l] = RUNNABLE;
        any = 1;
    }
    if (any) return 1;
    int n_sync = 0, n_warp = 0;
    for (int i = 0; i < n; i++) {
        n_sync += g_state[i] == AT_SYNC;
        n_warp += g_state[i] == AT_WARP;
    }
    if (!n_sync && !n_warp) return 0;
    if (n_warp)
        emu_fatal("kernel %s, block (%u,%u,%u): %d threads wait at __syncthreads and %d at a warp operation whose warp "
                  "never completes (a barrier or a warp operation in divergent code)",
                  g_kernel, emu_blockIdx.x, emu_blockIdx.y, emu_blockIdx.z, n_sync, n_warp);
    for (int i = 0; i < n; i++)
        if (g_state[i] == AT_SYNC) g_state[i] = RUNNABLE;
    return 1;
}

void emu_run(const char *kernel, dim3 grid, dim3 block, size_t smem_bytes, const std::function<void()> &f) {
    if (block.y != 1 || block.z != 1 || block.x == 0 || block.x > 1024)
        emu_fatal("kernel %s: blocks of (%u,%u,%u) threads: the emulator runs 1-D blocks of 1..1024", kernel, block.x,
                  block.y, block.z);
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 || grid.z > 65535)
        emu_fatal("kernel %s: grid (%u,%u,%u) is not a valid launch (y and z at most 65535, none 0)", kernel, grid.x,
                  grid.y, grid.z);
    if (!g_rng) {
        const char *s = getenv("TPGEN_EMU_SEED");
        g_rng = s && *s ? strtoull(s, NULL, 10) * 0x9E3779B97F4A7C15ull + 1 : 0x2545F4914F6CDD1Dull;
    }
    const int n = (int)block.x;
    g_ctx.resize(n);
    g_state.assign(n, DONE);
    g_xchg.assign((size_t)(n + 31) / 32 * 32, 0);
    g_order.resize(n);
    for (int i = 0; i < n; i++) g_order[i] = i;
    while ((int)g_stacks.size() < n) {
        char *s = (char *)malloc(STACK_BYTES);
        if (!s) emu_fatal("out of host memory for thread stacks");
        g_stacks.push_back(s);
    }
    std::vector<char> dyn(smem_bytes + 16);
    g_body = &f;
    g_kernel = kernel;
    emu_gridDim = grid;
    emu_blockDim = block;
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                emu_blockIdx = dim3(bx, by, bz);
                memset(dyn.data(), 0xa5, dyn.size()); /* shared memory starts as garbage, as on a GPU */
                emu_dyn_smem = dyn.data();
                for (int i = 0; i < n; i++) {
                    getcontext(&g_ctx[i]);
                    g_ctx[i].uc_stack.ss_sp = g_stacks[i];
                    g_ctx[i].uc_stack.ss_size = STACK_BYTES;
                    g_ctx[i].uc_link = &g_sched;
                    makecontext(&g_ctx[i], thread_main, 0);
                    g_state[i] = RUNNABLE;
                }
                do run_round(n);
                while (release(n));
            }
}
