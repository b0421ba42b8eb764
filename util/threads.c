/* The threading model (util/threads.h): the early environment of the runtimes and the
 * thread-count rule. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif
#include "util/threads.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int set_in_env(const char *name) {
    const char *v = getenv(name);
    return v && *v;
}

/* name is in TPGEN_THREADS_SET: tpgen set it, not the user. */
int tp_threads_set_by_tpgen(const char *name) {
    const char *s = getenv(TP_THREADS_SET_VAR);
    size_t n = strlen(name);
    for (const char *p = s; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0) return 1;
        p = e ? e + 1 : NULL;
    }
    return 0;
}

void tp_threads_env_early(char **argv, const char *blas_core) {
    /* Open MPI reads this at MPI_Init (no re-exec needed): a rank waiting in a collective (the
     * workers between steps) yields its core to runnable threads instead of only polling. */
    if (!set_in_env("OMPI_MCA_mpi_yield_when_idle")) (void)setenv("OMPI_MCA_mpi_yield_when_idle", "1", 1);
    if (getenv(TP_THREADS_SET_VAR)) return; /* this is the re-executed process (or a child of one) */
    char set[128] = "";
    if (!set_in_env("OMP_WAIT_POLICY") && !set_in_env("GOMP_SPINCOUNT")) {
        if (setenv("GOMP_SPINCOUNT", TP_THREADS_SPIN, 1) != 0) return;
        strcat(set, "GOMP_SPINCOUNT");
    }
    if (!set_in_env("OPENBLAS_NUM_THREADS") && !set_in_env("GOTO_NUM_THREADS")) {
        /* OpenBLAS (pthreads build) starts its pool in its constructor; one thread: no pool */
        if (setenv("OPENBLAS_NUM_THREADS", "1", 1) != 0) return;
        strcat(set, *set ? ",OPENBLAS_NUM_THREADS" : "OPENBLAS_NUM_THREADS");
    }
    if (blas_core && !set_in_env("OPENBLAS_CORETYPE")) { /* OpenBLAS took a generic core for this CPU */
        if (setenv("OPENBLAS_CORETYPE", blas_core, 1) != 0) return;
        strcat(set, *set ? ",OPENBLAS_CORETYPE" : "OPENBLAS_CORETYPE");
    }
    if (!*set) return; /* the user chose them all: nothing for the runtimes to re-read */
    if (setenv(TP_THREADS_SET_VAR, set, 1) != 0) return;
    execv("/proc/self/exe", argv);
    /* still here: the runtimes keep the defaults they read before main (spinning waits) */
    fprintf(stderr, "tpgen: warning: cannot re-execute /proc/self/exe to set %s for OpenMP/OpenBLAS (%s); their "
                    "defaults stay (set them in the environment yourself)\n", set, strerror(errno));
    unsetenv(TP_THREADS_SET_VAR); /* and ours: they would read as the user's (tp_threads_user_blas) */
    if (strstr(set, "GOMP_SPINCOUNT")) unsetenv("GOMP_SPINCOUNT");
    if (strstr(set, "OPENBLAS_NUM_THREADS")) unsetenv("OPENBLAS_NUM_THREADS");
    if (strstr(set, "OPENBLAS_CORETYPE")) unsetenv("OPENBLAS_CORETYPE");
}

int tp_threads_env_check(char *err, size_t err_size) {
    const char *v = getenv("OMP_NUM_THREADS");
    for (const char *p = v; p && *p;) { /* each level of the list; what does not parse is libgomp's to judge */
        char *end;
        errno = 0;
        const long n = strtol(p, &end, 10);
        if (end != p && (n > TP_THREADS_MAX || errno == ERANGE)) {
            snprintf(err, err_size, "OMP_NUM_THREADS=%s: %.*s threads per rank is above tpgen's limit %d (as for "
                     "--threads); set it to at most %d or unset it", v, (int)(end - p), p, TP_THREADS_MAX,
                     TP_THREADS_MAX);
            return -1;
        }
        const char *c = strchr(p, ',');
        p = c ? c + 1 : NULL;
    }
    return 0;
}

int tp_threads_pick(int flag, const char *omp_env, int online, int allowed, int local_ranks, const char **why) {
    const char *w;
    int n;
    if (flag > 0) {
        n = flag;
        w = "--threads";
    } else if (omp_env && atoi(omp_env) > 0) { /* "4" or "4,2": libgomp's first level */
        n = atoi(omp_env);
        w = "OMP_NUM_THREADS";
    } else {
        if (online < 1) online = 1;
        if (local_ranks < 1) local_ranks = 1;
        if (allowed > 0 && allowed < online) {
            n = allowed;
            w = "this rank's CPU affinity mask";
        } else {
            n = online / local_ranks;
            w = "online CPUs / ranks on this node";
        }
    }
    if (why) *why = w;
    return n < 1 ? 1 : n;
}

int tp_threads_for_rank(int flag, int local_ranks, const char **why) {
    cpu_set_t mask;
    int allowed = sched_getaffinity(0, sizeof mask, &mask) == 0 ? CPU_COUNT(&mask) : 0;
    return tp_threads_pick(flag, getenv("OMP_NUM_THREADS"), (int)sysconf(_SC_NPROCESSORS_ONLN), allowed, local_ranks,
                           why);
}

int tp_threads_local_ranks_env(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && atoi(v) > 0) return atoi(v);
    }
    return 1;
}

int tp_threads_user_blas(void) {
    return (set_in_env("OPENBLAS_NUM_THREADS") && !tp_threads_set_by_tpgen("OPENBLAS_NUM_THREADS")) ||
           set_in_env("GOTO_NUM_THREADS");
}

void tp_threads_describe(char *buf, int size, int threads, const char *why) {
    char wait[160], blas[160];
    const char *pol = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT");
    if (tp_threads_set_by_tpgen("GOMP_SPINCOUNT"))
        snprintf(wait, sizeof wait, "a short spin, then sleep (GOMP_SPINCOUNT=%s, set by tpgen)", TP_THREADS_SPIN);
    else if (set_in_env("OMP_WAIT_POLICY") || set_in_env("GOMP_SPINCOUNT"))
        snprintf(wait, sizeof wait, "the user's (OMP_WAIT_POLICY=%s, GOMP_SPINCOUNT=%s)", pol ? pol : "unset",
                 spin ? spin : "unset");
    else snprintf(wait, sizeof wait, "the runtime's default (spins before sleeping: tpgen could not set it)");
    const char *ob = getenv("OPENBLAS_NUM_THREADS");
    if (tp_threads_user_blas())
        snprintf(blas, sizeof blas, "the user's OPENBLAS_NUM_THREADS=%s / GOTO_NUM_THREADS=%s per call",
                 ob ? ob : "unset", getenv("GOTO_NUM_THREADS") ? getenv("GOTO_NUM_THREADS") : "unset");
    else snprintf(blas, sizeof blas, "1 thread inside tpgen's OpenMP threads%s",
                  tp_threads_set_by_tpgen("OPENBLAS_NUM_THREADS") ? " (OPENBLAS_NUM_THREADS=1, set by tpgen)" : "");
    snprintf(buf, (size_t)size, "threads: %d OpenMP per rank (%s); OpenMP waiting: %s; OpenBLAS: %s", threads, why,
             wait, blas);
}
