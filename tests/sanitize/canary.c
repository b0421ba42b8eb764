/* Deliberate bugs of the kinds the sanitizer build must catch (tests/sanitize.cmake): if a
 * build configured with TPGEN_SANITIZE lets one of these pass silently, the flags did not reach
 * the code and the sanitized suite proves nothing.
 *   overflow   heap read one past the end (ASan)
 *   leak       a block lost at exit (LSan)
 *   misaligned a double stored at an odd float offset, the sampler-scratch bug (UBSan)
 *   overflow_int  signed integer overflow, the 4 * n_embd config bug (UBSan)
 *   race       two threads write one int with no lock, as an HTTP thread and the engine thread
 *              would if they touched a job outside tp_server.mu (TSan) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* RACE_ROUNDS races, each on its own int with a new thread: TSan missed a single one in about
 * 1 run of 150 (CI, 2026-12-02: no report, exit 0, whatever the order of the two writes); the
 * canary needs only one report. */
#define RACE_ROUNDS 8
static volatile int g_shared[RACE_ROUNDS];

static void *race_writer(void *arg) {
    g_shared[*(int *)arg] += 1; /* unsynchronised read-modify-write */
    return NULL;
}

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "";
    volatile int n = argc > 2 ? atoi(argv[2]) : 3;
    if (!strcmp(what, "overflow")) {
        int *p = malloc(n * sizeof *p);
        for (int i = 0; i < n; i++) p[i] = i;
        int x = p[n]; /* one past the end */
        free(p);
        return x == 12345;
    }
    if (!strcmp(what, "leak")) {
        char *p = malloc(64);
        memset(p, 1, 64);
        p = NULL;
        return 0;
    }
    if (!strcmp(what, "misaligned")) {
        float *f = malloc(64 * sizeof *f);
        double *d = (double *)(f + n); /* odd n: 4-byte aligned only */
        *d = 1.0;
        int r = f[0] == 7.0f;
        free(f);
        return r;
    }
    if (!strcmp(what, "overflow_int")) {
        int e = n * 333333333; /* n = 7: past INT_MAX */
        return e == 5;
    }
    if (!strcmp(what, "race")) {
        int sum = 0;
        for (int r = 0; r < RACE_ROUNDS; r++) {
            pthread_t t;
            if (pthread_create(&t, NULL, race_writer, &r)) return 2;
            g_shared[r] += n; /* races with the thread's write */
            pthread_join(t, NULL);
            sum += g_shared[r];
        }
        return sum == 12345;
    }
    fprintf(stderr, "usage: canary overflow|leak|misaligned|overflow_int|race\n");
    return 2;
}
