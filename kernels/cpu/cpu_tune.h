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
 * Timing: what one run does is the family's choice. The weight GEMV families run what a decode
 * step runs (issue 43): the whole matrix with the backend's threads, split as in a step, and with
 * `stream` set the matrix is evicted from the caches before every timed run, so it is read from
 * memory as in a step, where the model's weights are far larger than the last-level cache (timed
 * on one thread with the matrix cached, the bf16 GEMV chose avx2 on an AMX Xeon, 0.75 vs 1.15 ms,
 * where a decode step was 1.16x faster on avx512bf16). Such a run times itself: each thread its
 * own CPU time (CLOCK_THREAD_CPUTIME_ID) over its share, the run's time the largest
 * (cpu_tune_thread_seconds); a run that returns a negative number is timed by the caller in the
 * calling thread's CPU time (attention's single-thread builds). CPU time: time a thread spends
 * preempted does not count, so a loaded machine does not pick at random (wall time across
 * threads did, measured: 5-13 ms for a 0.8 ms kernel, and 30 ms for a 0.2 ms one while two
 * builds ran). Each candidate runs once untimed, once timed (one slower than 4x the fastest drops
 * out), then rounds of one run each, the candidates in an order rotated every round, until ~30 ms
 * have passed (at least 3 and at most 12 rounds); the least time of each is compared, and a later
 * candidate (a lower tier) wins only when more than 2% faster: at T = 1 the tiers are often level
 * on the memory bus, and a coin toss between them would change bf16's roundings from one load to
 * the next.
 *
 * Re-check (`recheck` set: the weight GEMVs): a cached choice is timed again at load against the
 * other candidates, 3 rounds, the least of each; when another is faster by more than 8%, the
 * cached choice is contradicted (measured while the machine was busy, or the machine changed
 * under the same key), and the shape is measured again and the line rewritten. A few ms a shape.
 * TPGEN_KERNEL_RECHECK=off uses cached choices as they are (and an edited line as edited). */
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
    const void *stream;       /* NULL, or memory a run reads that a step reads from DRAM: evicted before each timed run */
    size_t stream_bytes;
    int recheck;              /* re-check a cached choice (file comment) */
} cpu_tune_key;

/* Runs candidate cand once on the shape (the caller's scratch inputs and outputs); returns the
 * seconds it took (file comment: its threads' CPU time, the largest), or a negative number for
 * "time me" (the calling thread's CPU time). */
typedef double cpu_tune_run_fn(void *ctx, int cand);

/* CPU time of the calling thread, in seconds (CLOCK_THREAD_CPUTIME_ID). */
double cpu_tune_thread_seconds(void);

/* The index of the chosen candidate; how (how_size bytes): "measured at T = 1 (ms: NAME 0.410, ...),
 * saved to PATH" or "cached in PATH". One candidate: chosen without timing. */
int cpu_tune_pick(const cpu_tune_key *k, cpu_tune_run_fn *run, void *ctx, char *how, size_t how_size);

/* The weight GEMVs' two choices per shape (bf16 and int8): a tier can win one token and lose eight
 * (on an AMX Xeon bf16 decode ran 27.9 ms at batch 1 on avx512bf16 against avx2's 29.3, and 61.8 at
 * batch 8 against 52.8; on Zen 5 the int8 [4096 x 1024] GEMV took 0.035 ms at T = 1 on avx2 against
 * avx512vnni's 0.081, and 0.18 at T = 8 against 0.079), so a sum of the two picked one that loses
 * decode. pick[0]: for steps of up to CPU_TUNE_ONE_T tokens, measured at T = 1 (family k->family);
 * pick[1]: for larger GEMV steps, measured at T = CPU_TUNE_T2 (family "<k->family>-batch"). *T is
 * the token count the caller's run multiplies (set here before each measurement); how[i] as
 * cpu_tune_pick's. label: NULL, or the log's prefix ("cpu int8"): both choices are then logged. */
#define CPU_TUNE_ONE_T 2
#define CPU_TUNE_T2 8
void cpu_tune_pick_gemv(const cpu_tune_key *k, cpu_tune_run_fn *run, void *ctx, int *T, int pick[2], char *how[2],
                        size_t how_size, const char *label);

/* The cache file's path (above), or "" when TPGEN_KERNEL_CACHE=off or no home is known. */
void cpu_tune_cache_path(char *path, size_t size);

#endif
