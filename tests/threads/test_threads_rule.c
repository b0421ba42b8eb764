/* util/threads.h's thread-count rule: ranks x threads <= cores for every node size and rank
 * count, the affinity mask of a bound rank, and the user's --threads / OMP_NUM_THREADS first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/threads.h"
#include "tests/common/check.h"


int main(void) {
    const char *why;
    /* unbound ranks (mask = the node): each gets online / ranks, all of them fit */
    for (int cores = 1; cores <= 128; cores++)
        for (int ranks = 1; ranks <= cores; ranks++) {
            int t = tp_threads_pick(0, NULL, cores, cores, ranks, &why);
            CHECK(t >= 1 && ranks * t <= cores && ranks * (t + 1) > cores, "cores %d ranks %d -> %d threads", cores,
                  ranks, t);
            CHECK(strcmp(why, "online CPUs / ranks on this node") == 0, "why %s", why);
        }
    /* more ranks than cores (oversubscribed tests): one thread each, never 0 */
    CHECK(tp_threads_pick(0, NULL, 2, 2, 4, NULL) == 1, "2 cores 4 ranks");
    /* a rank bound by its launcher: the mask is its share, not divided again */
    CHECK(tp_threads_pick(0, NULL, 16, 4, 4, &why) == 4 && strstr(why, "affinity"), "16 cores, 4-CPU mask");
    CHECK(tp_threads_pick(0, NULL, 2, 1, 2, NULL) == 1, "2 cores, 1-CPU mask, 2 ranks");
    CHECK(tp_threads_pick(0, NULL, 8, 0, 2, NULL) == 4, "mask unknown");
    /* the user's choices win, in this order: --threads, OMP_NUM_THREADS */
    CHECK(tp_threads_pick(0, "3", 16, 16, 2, &why) == 3 && !strcmp(why, "OMP_NUM_THREADS"), "OMP_NUM_THREADS=3");
    CHECK(tp_threads_pick(0, "6,2", 16, 16, 1, NULL) == 6, "OMP_NUM_THREADS=6,2 (nested list)");
    CHECK(tp_threads_pick(0, "junk", 16, 16, 2, NULL) == 8, "OMP_NUM_THREADS=junk falls back to the rule");
    CHECK(tp_threads_pick(0, "0", 16, 16, 2, NULL) == 8, "OMP_NUM_THREADS=0 falls back to the rule");
    CHECK(tp_threads_pick(5, "3", 16, 16, 2, &why) == 5 && !strcmp(why, "--threads"), "--threads 5 over env");
    /* this process, through the environment */
    setenv("OMP_NUM_THREADS", "7", 1);
    CHECK(tp_threads_for_rank(0, 1, &why) == 7 && !strcmp(why, "OMP_NUM_THREADS"), "for_rank with OMP_NUM_THREADS");
    unsetenv("OMP_NUM_THREADS");
    CHECK(tp_threads_for_rank(0, 1, NULL) >= 1, "for_rank");
    /* ranks per node from the launcher's environment */
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "3", 1);
    CHECK(tp_threads_local_ranks_env() == 3, "OMPI_COMM_WORLD_LOCAL_SIZE");
    unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    /* OPENBLAS_NUM_THREADS: the user's when tpgen did not set it */
    setenv("OPENBLAS_NUM_THREADS", "4", 1);
    unsetenv(TP_THREADS_SET_VAR);
    CHECK(tp_threads_user_blas() == 1, "user's OPENBLAS_NUM_THREADS");
    setenv(TP_THREADS_SET_VAR, "OMP_WAIT_POLICY,OPENBLAS_NUM_THREADS", 1);
    CHECK(tp_threads_user_blas() == 0, "tpgen's OPENBLAS_NUM_THREADS");
    if (g_fail) return 1;
    printf("threads rule: ok\n");
    return 0;
}
