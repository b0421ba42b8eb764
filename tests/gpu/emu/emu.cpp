/* The scheduler of tests/gpu/emu/emu.h: a block's threads as ucontext coroutines. */
#include "tests/gpu/emu/emu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <vector>

dim3 emu_threadIdx, emu_blockIdx, emu_blockDim, emu_gridDim;
void *emu_dyn_smem;

enum { RUNNABLE, AT_SYNC, AT_SHUFFLE, DONE };
static const size_t STACK_BYTES = 256 * 1024;
static std::vector<ucontext_t> g_ctx;
static std::vector<char *> g_stacks;
static std::vector<int> g_state;
static std::vector<float> g_xchg; /* shuffle values by thread */
static ucontext_t g_sched;
static int g_cur;
static const std::function<void()> *g_body;
static long g_barriers;

long emu_barrier_count(void) { return g_barriers; }

static void thread_main(void) {
    (*g_body)();
    g_state[g_cur] = DONE;
} /* returns to uc_link: the scheduler */

static void wait_at(int kind) {
    g_state[g_cur] = kind;
    g_barriers++;
    if (swapcontext(&g_ctx[g_cur], &g_sched) != 0) {
        perror("emu: swapcontext");
        exit(2);
    }
}

void emu_syncthreads(void) { wait_at(AT_SYNC); }

float emu_shfl_xor(float v, int lane_mask) {
    g_xchg[g_cur] = v;
    wait_at(AT_SHUFFLE);
    const int src = g_cur ^ lane_mask;
    if (lane_mask < 0 || lane_mask > 31 || src >= (int)g_state.size() || g_state[src] == DONE) {
        fprintf(stderr, "emu: block (%u,%u,%u) thread %d shuffles with lane mask %d: thread %d has exited\n",
                emu_blockIdx.x, emu_blockIdx.y, emu_blockIdx.z, g_cur, lane_mask, src);
        exit(2);
    }
    const float r = g_xchg[src];
    wait_at(AT_SHUFFLE); /* nobody overwrites g_xchg before every thread has read it */
    return r;
}

void emu_run(dim3 grid, dim3 block, size_t smem_bytes, const std::function<void()> &f) {
    if (block.y != 1 || block.z != 1 || block.x == 0 || block.x > 1024) {
        fprintf(stderr, "emu: blocks of (%u,%u,%u) threads: only 1-D blocks of 1..1024\n", block.x, block.y, block.z);
        exit(2);
    }
    const int n = (int)block.x;
    g_ctx.resize(n);
    g_state.assign(n, DONE);
    g_xchg.assign(n, 0.0f);
    while ((int)g_stacks.size() < n) {
        char *s = (char *)malloc(STACK_BYTES);
        if (!s) {
            fprintf(stderr, "emu: out of memory for thread stacks\n");
            exit(2);
        }
        g_stacks.push_back(s);
    }
    std::vector<char> dyn(smem_bytes + 16);
    g_body = &f;
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
                for (;;) { /* run every thread to its next barrier (or its end), then release them */
                    for (int i = 0; i < n; i++)
                        if (g_state[i] == RUNNABLE) {
                            g_cur = i;
                            emu_threadIdx = dim3(i, 0, 0);
                            if (swapcontext(&g_sched, &g_ctx[i]) != 0) {
                                perror("emu: swapcontext");
                                exit(2);
                            }
                        }
                    int n_sync = 0, n_shfl = 0;
                    for (int i = 0; i < n; i++) {
                        n_sync += g_state[i] == AT_SYNC;
                        n_shfl += g_state[i] == AT_SHUFFLE;
                    }
                    if (n_sync && n_shfl) {
                        fprintf(stderr,
                                "emu: in block (%u,%u,%u), %d threads wait at __syncthreads and %d at a shuffle "
                                "(a barrier or a shuffle in divergent code)\n",
                                bx, by, bz, n_sync, n_shfl);
                        exit(2);
                    }
                    if (!n_sync && !n_shfl) break;
                    for (int i = 0; i < n; i++)
                        if (g_state[i] != DONE) g_state[i] = RUNNABLE;
                }
            }
}
