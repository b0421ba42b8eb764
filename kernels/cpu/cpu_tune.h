/* Kernel selection by measurement (issue 35): a family (int8 GEMV, bf16 GEMV, attention) times each kernel
 * this CPU runs on one of the model's real shapes, at load, for a few milliseconds, and keeps the
 * fastest, so a higher tier can never lose to a lower one on the user's machine, whatever the
 * author's machine was.
 *
 * The choice is cached in a text file, one line per (CPU model, family, shape, kernel set),
 * read at the next load instead of timing again:
 *   TPGEN_KERNEL_CACHE=PATH (or "off": neither read nor written), else
 *   $XDG_CACHE_HOME/tpgen/cpu-kernels.tsv, else $HOME/.cache/tpgen/cpu-kernels.tsv.
 * Deleting it measures again. A line that does not parse (or a file without the header) is
 * ignored with a warning; the file is then rewritten from what did parse plus the new choices.
 *
 * Timing: one GEMV of the whole matrix at T = 1 on the calling thread, in that thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID): time the thread spends preempted does not count, so a loaded
 * machine does not pick at random (wall time across threads did, measured: 5-13 ms for a 0.8 ms
 * kernel), and the threads split the rows alike for every kernel. Each candidate runs once
 * untimed, once timed (one slower than 4x the fastest drops out), then rounds of one run each, the
 * candidates in an order rotated every round, until ~30 ms have passed (at least 2 and at most 8
 * rounds); the least time of each is compared, and a later candidate (a lower tier) wins only
 * when more than 2% faster: at T = 1 the tiers are often level on the memory bus, and a coin
 * toss between them would change bf16's roundings from one load to the next. */
#ifndef TPGEN_CPU_TUNE_H
#define TPGEN_CPU_TUNE_H

#include <stddef.h>

#define CPU_TUNE_MAX_CAND 6

typedef struct {
    const char *family;       /* "int8-gemv", "bf16-gemv", "attention" */
    const char *kernel_set;   /* bumps when a kernel changes: older lines no longer match */
    int N, K;                 /* the shape (a GEMM's) */
    int T;                    /* tokens a timed run multiplies (for the report) */
    int n_cand;               /* <= CPU_TUNE_MAX_CAND */
    const char *const *names; /* [n_cand] candidate names, in order of preference (highest tier first) */
    const char *shape;        /* NULL: the shape is "NxK"; else these words (a family whose shape is no
                                 N x K, e.g. attention's heads and block size; no tab or newline) */
    const char *run;          /* NULL: the report says "at T = <T>"; else "at <run>" (what one timed run is) */
} cpu_tune_key;

/* Runs candidate cand once on the shape (the caller's scratch inputs and outputs). */
typedef void cpu_tune_run_fn(void *ctx, int cand);

/* The index of the chosen candidate; how (how_size bytes): "measured at T = 1 (ms: NAME 0.410, ...),
 * saved to PATH" or "cached in PATH". One candidate: chosen without timing. */
int cpu_tune_pick(const cpu_tune_key *k, cpu_tune_run_fn *run, void *ctx, char *how, size_t how_size);

/* The cache file's path (above), or "" when TPGEN_KERNEL_CACHE=off or no home is known. */
void cpu_tune_cache_path(char *path, size_t size);

#endif
