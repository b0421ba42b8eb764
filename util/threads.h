/* The threading model of the CPU backend, decided once per process (docs/PERFORMANCE.md,
 * "Threading"):
 *  - one pool of threads: tpgen's OpenMP threads (oneDNN runs in the same libgomp pool);
 *    OpenBLAS runs single-threaded inside them, so no second pool competes for the cores;
 *  - threads per rank: --threads N, else OMP_NUM_THREADS, else the cores this rank may use
 *    divided by the ranks of its node, so ranks x threads <= cores;
 *  - a waiting thread spins briefly, then sleeps (GOMP_SPINCOUNT=TP_THREADS_SPIN, about 0.3 ms):
 *    a decode step runs a few hundred parallel regions microseconds apart, and a futex wake-up
 *    per region made batch-1 decode 1.7-1.9x slower than spinning (int4, int8: docs/PERFORMANCE.md
 *    "Threading"); the spin is short so that a thread waiting longer (between requests, on a
 *    shared machine) gives its core back (libgomp's own default spins 10x longer). libgomp
 *    itself cuts the spin to 100 turns while a process has more threads than CPUs.
 *  - MPI ranks waiting in a collective yield the core (OMPI_MCA_mpi_yield_when_idle=1).
 * The user's own OMP_WAIT_POLICY, GOMP_SPINCOUNT, OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and
 * OMPI_MCA_mpi_yield_when_idle win.
 * libgomp and OpenBLAS read their variables in their library constructors, before main(): so
 * tp_threads_env_early re-executes the program once with the variables set. */
#pragma once

#include <stddef.h>

/* The spin count tpgen gives libgomp when the user set neither OMP_WAIT_POLICY nor
 * GOMP_SPINCOUNT (libgomp counts ~100,000 turns a millisecond). clang's libomp ignores it and
 * keeps its own default (KMP_BLOCKTIME, 200 ms of spinning). */
#define TP_THREADS_SPIN "30000"

/* Variables tpgen sets for the runtimes when the user did not (comma-separated in
 * TPGEN_THREADS_SET after the re-exec, which also marks that it happened). */
#define TP_THREADS_SET_VAR "TPGEN_THREADS_SET"

/* First thing in main(): when GOMP_SPINCOUNT / OPENBLAS_NUM_THREADS are to be set and are not
 * yet, or blas_core is not NULL (OPENBLAS_CORETYPE to set: kernels/cpu/cpu_blas_core.c), sets
 * them and execv()s /proc/self/exe with the same argv (does not return then). When the exec
 * fails, warns once and returns (the process runs with the runtimes' defaults). */
void tp_threads_env_early(char **argv, const char *blas_core);

/* The most OpenMP threads per rank: --threads' limit, and OMP_NUM_THREADS's (libgomp crashes or
 * fails to create threads far above it). */
#define TP_THREADS_MAX 4096
/* OMP_NUM_THREADS ("N" or libgomp's list "N,M,..."): 0 when unset or every level is at most
 * TP_THREADS_MAX, else -1 with err naming the variable, the level's value and the limit. Checked
 * in main before any OpenMP region (libgomp reads the variable at startup, uses it at the first). */
int tp_threads_env_check(char *err, size_t err_size);

/* The thread-count rule (the header comment), a pure function for tests:
 *   flag: --threads (0 or less: not given); omp_env: OMP_NUM_THREADS or NULL (its first value
 *   counts, as libgomp reads a list); online: online CPUs; allowed: CPUs in this process's
 *   affinity mask (0: unknown); local_ranks: ranks of the job on this node.
 * The cores a rank may use: its mask when narrower than the node (the launcher bound it, the
 * mask is its share), else online / local_ranks. At least 1. *why names the source. */
int tp_threads_pick(int flag, const char *omp_env, int online, int allowed, int local_ranks, const char **why);

/* tp_threads_pick for this process (sysconf, sched_getaffinity, the environment). */
int tp_threads_for_rank(int flag, int local_ranks, const char **why);

/* Ranks on this node from the launcher's environment (Open MPI, MPICH/Hydra, Slurm), before or
 * without MPI_Init; 1 when none says. */
int tp_threads_local_ranks_env(void);

/* 1 when the user set OPENBLAS_NUM_THREADS (or GOTO_NUM_THREADS) themselves: the CPU backend then
 * leaves OpenBLAS's thread count as they asked instead of forcing 1. */
int tp_threads_user_blas(void);

/* One line describing the model in effect ("threads: 2 per rank (cores 2 / 1 ranks); OpenMP
 * wait: a short spin (tpgen); OpenBLAS: 1 thread inside OpenMP (tpgen)") into buf. */
void tp_threads_describe(char *buf, int size, int threads, const char *why);
/* 1 when the variable was set by tp_threads_env_early (listed in TPGEN_THREADS_SET), not the user. */
int tp_threads_set_by_tpgen(const char *name);
