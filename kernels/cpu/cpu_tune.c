/* Kernel selection by measurement and its cache file (cpu_tune.h).
 *
 * A line of the file: 6 tab-separated fields
 *   machine ("HOST: CPU brand [cpuid HASH]"), family, shape (NxK, or the family's words: cpu_tune_key.shape),
 *   candidates@kernel_set, chosen, times (ms, as measured)
 * after the header line CACHE_HEADER. */
#include "kernels/cpu/cpu_tune.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "util/log.h"

#define CACHE_HEADER "# tpgen CPU kernel choices, measured at load (docs/KERNELS.md); delete this file to measure again"
#define TUNE_BUDGET_S 0.030
#define TUNE_MIN_ROUNDS 3
#define TUNE_MAX_ROUNDS 12
#define RECHECK_ROUNDS 3
#define RECHECK_MARGIN 0.08 /* a cached choice is contradicted when another candidate is faster by more */
#define TUNE_DROP 4.0 /* a first timed run slower than this times the fastest: out of the rounds */
#define TUNE_MARGIN 0.02 /* a later (lower) candidate wins only when faster by more than this */

/* CPU time of the calling thread (file comment of cpu_tune.h: preemption does not count). */
double cpu_tune_thread_seconds(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return tp_now_seconds();
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Evicts [p, p + n) from every cache level (clflush: write-back and invalidate), so the next run
 * reads it from memory as a decode step does; a no-op off x86-64. */
static void evict(const void *p, size_t n) {
#if defined(__x86_64__)
    const char *c = (const char *)((uintptr_t)p & ~(uintptr_t)63), *end = (const char *)p + n;
    for (; c < end; c += 64) __builtin_ia32_clflush(c);
    __builtin_ia32_mfence();
#else
    (void)p, (void)n;
#endif
}

/* One timed run of candidate i: its seconds (cpu_tune.h: as the run timed itself, or the calling
 * thread's CPU time). */
static double timed_run(const cpu_tune_key *k, cpu_tune_run_fn *run, void *ctx, int i) {
    if (k->stream) evict(k->stream, k->stream_bytes);
    const double t0 = cpu_tune_thread_seconds(), own = run(ctx, i);
    return own >= 0 ? own : cpu_tune_thread_seconds() - t0;
}

/* The CPU's brand string (CPUID 0x80000002-4), spaces trimmed; "unknown-cpu" elsewhere. */
static void cpu_brand(char *out, size_t size) {
    snprintf(out, size, "unknown-cpu");
#if defined(__x86_64__)
    unsigned r[12];
    if ((unsigned)__get_cpuid_max(0x80000000u, NULL) < 0x80000004u) return;
    for (unsigned i = 0; i < 3; i++) __get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
    char s[49];
    memcpy(s, r, 48);
    s[48] = 0;
    char *p = s;
    while (*p == ' ') p++;
    size_t n = strlen(p);
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t')) p[--n] = 0;
    for (char *q = p; *q; q++)
        if (*q == '\t' || *q == '\n') *q = ' ';
    if (n) snprintf(out, size, "%s", p);
#endif
}

/* FNV-1a of the CPUID feature words (leaf 1 ECX/EDX, leaf 7.0 EBX/ECX/EDX, leaf 7.1 EAX) and of
 * XCR0 (the register state the OS enables: AVX-512 may be in the CPUID words and still off).
 * Two machines with one brand string and different features (a VM that masks AVX-512, a BIOS
 * that disables it) differ here. 0 off x86-64. */
static unsigned cpu_features_hash(void) {
    unsigned h = 2166136261u;
#if defined(__x86_64__)
    unsigned w[8] = {0}, a, b, c, d;
    if (__get_cpuid(1, &a, &b, &c, &d)) w[0] = c, w[1] = d;
    if ((unsigned)__get_cpuid_max(0, NULL) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        w[2] = b, w[3] = c, w[4] = d;
        __cpuid_count(7, 1, a, b, c, d);
        w[5] = a;
    }
    if (w[0] & (1u << 27)) { /* OSXSAVE: xgetbv reads XCR0 */
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        w[6] = lo, w[7] = hi;
    }
    const unsigned char *p = (const unsigned char *)w;
    for (size_t i = 0; i < sizeof w; i++) h = (h ^ p[i]) * 16777619u;
#endif
    return h;
}

/* The cache line's machine field: "HOST: BRAND [cpuid HASH]". The host name is in it because a
 * cache file on shared storage is read by every node of a cluster, and a node must never take
 * another node's choice: the same CPU model can differ in memory channels, BIOS settings or
 * features, and the timing measured what that node does. */
static void machine_id(char *out, size_t size) {
    char host[256] = "unknown-host", brand[64];
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "unknown-host");
    host[sizeof host - 1] = 0;
    for (char *q = host; *q; q++)
        if (*q == '\t' || *q == '\n') *q = ' ';
    cpu_brand(brand, sizeof brand);
    snprintf(out, size, "%s: %s [cpuid %08x]", host, brand, cpu_features_hash());
}

void cpu_tune_cache_path(char *path, size_t size) {
    const char *e = getenv("TPGEN_KERNEL_CACHE");
    path[0] = 0;
    if (e && *e) {
        if (strcmp(e, "off") != 0) snprintf(path, size, "%s", e);
        return;
    }
    const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    if (x && *x) snprintf(path, size, "%s/tpgen/cpu-kernels.tsv", x);
    else if (h && *h) snprintf(path, size, "%s/.cache/tpgen/cpu-kernels.tsv", h);
}

/* "candidates@kernel_set" and the line's key (fields 1-5 joined by tabs). */
static void make_key(const cpu_tune_key *k, char *key, size_t size) {
    char machine[384], cands[256] = "";
    machine_id(machine, sizeof machine);
    for (int i = 0; i < k->n_cand; i++)
        snprintf(cands + strlen(cands), sizeof cands - strlen(cands), "%s%s", i ? "," : "", k->names[i]);
    char shape[160];
    if (k->shape) snprintf(shape, sizeof shape, "%s", k->shape);
    else snprintf(shape, sizeof shape, "%dx%d", k->N, k->K);
    snprintf(key, size, "%s\t%s\t%s\t%s@%s", machine, k->family, shape, cands, k->kernel_set);
}

/* Whether line (no newline) is a well-formed choice; its chosen field's start and length. */
static int line_ok(const char *line, const char **chosen, size_t *chosen_len) {
    const char *f[7];
    size_t len[7];
    int n = 0;
    const char *p = line;
    while (n < 7) {
        const char *t = strchr(p, '\t');
        f[n] = p;
        len[n] = t ? (size_t)(t - p) : strlen(p);
        n++;
        if (!t) break;
        p = t + 1;
    }
    if (n != 6) return 0;
    int N, K;
    char rest;
    char buf[160];
    if (len[2] == 0 || len[2] >= sizeof buf || len[4] == 0) return 0;
    memcpy(buf, f[2], len[2]), buf[len[2]] = 0;
    /* NxK, both positive; or a family's words (cpu_tune_key.shape): printable, not starting with a digit */
    if (buf[0] >= '0' && buf[0] <= '9') {
        if (sscanf(buf, "%dx%d%c", &N, &K, &rest) != 2 || N < 1 || K < 1) return 0;
    } else {
        for (const char *c = buf; *c; c++)
            if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e) return 0;
    }
    const char *at = memchr(f[3], '@', len[3]);
    if (!at) return 0;
    /* the chosen name is one of the candidates */
    for (const char *c = f[3]; c < at;) {
        const char *e = memchr(c, ',', (size_t)(at - c));
        const size_t cl = e ? (size_t)(e - c) : (size_t)(at - c);
        if (cl == len[4] && memcmp(c, f[4], cl) == 0) {
            *chosen = f[4];
            *chosen_len = len[4];
            return 1;
        }
        c += cl + 1;
    }
    return 0;
}

/* Reads the cache: the chosen index for key (-1 if none) and, in keep (caller frees), the
 * file's well-formed lines other than key's, for a rewrite. Warns once per bad line, unless quiet
 * (the second read, before a write, of a file the first read warned about). */
static int cache_read(const char *path, const char *key, const cpu_tune_key *k, char **keep, int quiet) {
    *keep = tp_strdup("");
    size_t len;
    char *txt = tp_read_file(path, &len); /* NULL: none yet, or unreadable (the write will say) */
    if (!txt) return -1;
    int found = -1, lineno = 0, bad = 0;
    size_t keep_len = 0;
    for (char *s = txt; s && *s;) {
        char *nl = strchr(s, '\n');
        if (nl) *nl = 0;
        lineno++;
        if (lineno == 1) {
            if (strcmp(s, CACHE_HEADER) != 0) {
                if (!quiet)
                    tp_log0("cpu kernels: warning: %s is not a tpgen kernel cache (its first line is not the header): "
                        "ignored, and rewritten with the choices measured now\n", path);
                free(txt);
                return -1;
            }
        } else if (*s && *s != '#') {
            const char *ch;
            size_t chl;
            if (!line_ok(s, &ch, &chl)) {
                if (!bad++ && !quiet)
                    tp_log0("cpu kernels: warning: %s line %d is not a kernel choice: ignored (delete the file to "
                            "measure everything again)\n", path, lineno);
            } else if (strncmp(s, key, strlen(key)) == 0 && s[strlen(key)] == '\t') {
                for (int i = 0; i < k->n_cand; i++)
                    if (strlen(k->names[i]) == chl && memcmp(k->names[i], ch, chl) == 0) found = i;
            } else {
                const size_t l = strlen(s);
                *keep = tp_realloc(*keep, keep_len + l + 2);
                memcpy(*keep + keep_len, s, l);
                keep_len += l;
                (*keep)[keep_len++] = '\n';
                (*keep)[keep_len] = 0;
            }
        }
        s = nl ? nl + 1 : NULL;
    }
    free(txt);
    return found;
}

/* mkdir -p of path's directory (best effort: the write reports what fails). */
static void make_dirs(const char *path) {
    char d[1024];
    snprintf(d, sizeof d, "%s", path);
    char *slash = strrchr(d, '/');
    if (!slash || slash == d) return;
    *slash = 0;
    for (char *p = d + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(d, 0755);
            *p = '/';
        }
    mkdir(d, 0755);
}

/* The header, the kept lines and the new one, through a temporary file renamed over path (two
 * processes writing at once: one's line is lost and measured again next time, never torn). The
 * temporary is made by mkstemp (O_CREAT|O_EXCL, an unguessable name) in path's directory: a
 * predictable name opened with fopen("wb") followed a symlink planted there and overwrote its target. */
static int cache_write(const char *path, const char *keep, const char *line) {
    make_dirs(path);
    char tmp[1100];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path) >= (int)sizeof tmp) return -1;
    const int fd = mkstemp(tmp);
    if (fd < 0) return -1;
    /* mkstemp makes it 0600; the cache stays readable as before (a fopen'd file, umask 022) */
    FILE *fp = fchmod(fd, 0644) == 0 ? fdopen(fd, "wb") : NULL;
    if (!fp) {
        close(fd);
        unlink(tmp);
        return -1;
    }
    int ok = fprintf(fp, "%s\n%s%s\n", CACHE_HEADER, keep, line) > 0;
    ok = (fclose(fp) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        return -1;
    }
    return 0;
}

/* Saves line (key's choice): under an exclusive lock of PATH.lock the file is read again and
 * rewritten with its lines other than key's plus line. Every rank of every node measures at the
 * same load, and on shared storage a rewrite from the copy read before measuring dropped the
 * lines the others saved meanwhile. No lock (a planted symlink: O_NOFOLLOW; a file system
 * without locks): the write goes on unlocked. Returns cache_write's result, errno kept. */
static int cache_store(const char *path, const char *key, const cpu_tune_key *k, const char *line) {
    char lock[1100];
    if (snprintf(lock, sizeof lock, "%s.lock", path) >= (int)sizeof lock) return -1;
    make_dirs(path);
    const int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    while (fd >= 0 && fcntl(fd, F_SETLKW, &fl) != 0 && errno == EINTR) {
    }
    char *keep = NULL;
    cache_read(path, key, k, &keep, 1);
    const int rc = cache_write(path, keep, line);
    const int e = errno;
    free(keep);
    if (fd >= 0) close(fd); /* releases the lock */
    errno = e;
    return rc;
}

/* The least time of each candidate over at least min_rounds rounds, then until budget seconds have
 * passed (max_rounds at most), the order rotated every round, after a warm-up run each; a first
 * timed run over TUNE_DROP x the fastest leaves the rounds (live[i] = 0). */
static void time_rounds(const cpu_tune_key *k, cpu_tune_run_fn *run, void *ctx, int nc, int min_rounds,
                        int max_rounds, double budget, double *best, int *live) {
    double warm_min = 1e30;
    for (int i = 0; i < nc; i++) run(ctx, i); /* untimed: caches, page tables, the AVX-512 units woken */
    for (int i = 0; i < nc; i++) {
        best[i] = timed_run(k, run, ctx, i);
        warm_min = best[i] < warm_min ? best[i] : warm_min;
    }
    for (int i = 0; i < nc; i++) live[i] = best[i] <= TUNE_DROP * warm_min;
    const double start = tp_now_seconds();
    for (int r = 0; r < max_rounds; r++) {
        if (r >= min_rounds && tp_now_seconds() - start > budget) break;
        for (int j = 0; j < nc; j++) {
            const int i = (j + r) % nc;
            if (!live[i]) continue;
            const double dt = timed_run(k, run, ctx, i);
            best[i] = dt < best[i] ? dt : best[i];
        }
    }
}

/* "NAME 0.410, NAME 0.388 (dropped: ...)" */
static void times_str(char *out, size_t size, const cpu_tune_key *k, int nc, const double *best, const int *live) {
    out[0] = 0;
    for (int i = 0; i < nc; i++)
        snprintf(out + strlen(out), size - strlen(out), "%s%s %.3f%s", i ? ", " : "", k->names[i], best[i] * 1e3,
                 live[i] ? "" : " (dropped: over 4x the fastest)");
}

/* The re-check of a cached choice c (cpu_tune.h): 1 when another candidate is faster by more
 * than RECHECK_MARGIN; the times in times. A candidate over TUNE_DROP x the fastest at its first
 * timed run cannot contradict anything and leaves the rounds (the plain-C twin: 160 ms a run on
 * an int4 lm_head of 51200 rows). */
static int contradicted(const cpu_tune_key *k, cpu_tune_run_fn *run, void *ctx, int nc, int c, char *times,
                        size_t size) {
    double best[CPU_TUNE_MAX_CAND];
    int live[CPU_TUNE_MAX_CAND];
    time_rounds(k, run, ctx, nc, RECHECK_ROUNDS, RECHECK_ROUNDS, 0.0, best, live);
    times_str(times, size, k, nc, best, live);
    for (int i = 0; i < nc; i++)
        if (i != c && best[i] < best[c] * (1.0 - RECHECK_MARGIN)) return 1;
    return 0;
}

int cpu_tune_pick(const cpu_tune_key *k, cpu_tune_run_fn *run, void *ctx, char *how, size_t how_size) {
    if (k->n_cand <= 1) {
        snprintf(how, how_size, "the only kernel this CPU runs");
        return 0;
    }
    char path[1024], key[1024], was[1600] = "";
    cpu_tune_cache_path(path, sizeof path);
    make_key(k, key, sizeof key);
    const int nc = k->n_cand < CPU_TUNE_MAX_CAND ? k->n_cand : CPU_TUNE_MAX_CAND;
    if (path[0]) {
        char *keep = NULL;
        const int c = cache_read(path, key, k, &keep, 0);
        free(keep);
        const char *rc = getenv("TPGEN_KERNEL_RECHECK");
        const int recheck = k->recheck && c >= 0 && c < nc && !(rc && strcmp(rc, "off") == 0);
        char times[256];
        if (c >= 0 && recheck && contradicted(k, run, ctx, nc, c, times, sizeof times)) {
            snprintf(was, sizeof was, "; the cached choice %s in %s was contradicted when re-checked (ms: %s)",
                     k->names[c], path, times);
        } else if (c >= 0) {
            if (recheck) snprintf(how, how_size, "cached in %s, re-checked (ms: %s)", path, times);
            else snprintf(how, how_size, "cached in %s", path);
            return c;
        }
    }
    double best[CPU_TUNE_MAX_CAND];
    int live[CPU_TUNE_MAX_CAND];
    time_rounds(k, run, ctx, nc, TUNE_MIN_ROUNDS, TUNE_MAX_ROUNDS, TUNE_BUDGET_S, best, live);
    int pick = 0;
    for (int i = 1; i < nc; i++)
        if (best[i] < best[pick] * (1.0 - TUNE_MARGIN)) pick = i;
    char times[256], at[96];
    if (k->run) snprintf(at, sizeof at, "%s", k->run);
    else snprintf(at, sizeof at, "T = %d", k->T);
    times_str(times, sizeof times, k, nc, best, live);
    if (path[0]) {
        char line[1536];
        snprintf(line, sizeof line, "%s\t%s\t%s", key, k->names[pick], times);
        if (cache_store(path, key, k, line) == 0)
            snprintf(how, how_size, "measured at %s (ms: %s), saved to %s%s", at, times, path, was);
        else
            snprintf(how, how_size, "measured at %s (ms: %s), not saved: %s: %s%s", at, times, path, strerror(errno),
                     was);
    } else {
        snprintf(how, how_size, "measured at %s (ms: %s), not cached (TPGEN_KERNEL_CACHE=off)", at, times);
    }
    return pick;
}

void cpu_tune_pick_gemv(const cpu_tune_key *k, cpu_tune_run_fn *run, void *ctx, int *T, int pick[2], char *how[2],
                        size_t how_size, const char *label) {
    char family[64], at[2][64];
    snprintf(family, sizeof family, "%s-batch", k->family);
    const int ts[2] = {1, CPU_TUNE_T2};
    for (int i = 0; i < 2; i++) {
        cpu_tune_key key = *k;
        snprintf(at[i], sizeof at[i], "T = %d with the step's threads, from memory", ts[i]);
        key.family = i ? family : k->family;
        key.T = *T = ts[i];
        key.run = at[i];
        pick[i] = cpu_tune_pick(&key, run, ctx, how[i], how_size);
    }
    if (label) {
        tp_log0("%s: GEMV [%d x %d] at T <= %d -> %s: %s\n", label, k->N, k->K, CPU_TUNE_ONE_T, k->names[pick[0]], how[0]);
        tp_log0("%s: GEMV [%d x %d] at T > %d -> %s: %s\n", label, k->N, k->K, CPU_TUNE_ONE_T, k->names[pick[1]], how[1]);
    }
}
