#include "speculate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_int(const char *p, char **end, long lo, long hi, long *out) {
    errno = 0;
    if (*p < '0' || *p > '9') return -1;
    long x = strtol(p, end, 10);
    if (errno || *end == p || x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

int tp_speculate_parse(const char *spec, int *k, int *n, char *err, size_t err_size) {
    const char *form = "expects ngram:K or ngram:K:N (K drafts per step in [1, %d], N the longest n-gram matched in "
                       "[1, %d], default 3)";
    char why[256];
    snprintf(why, sizeof why, form, TP_SPEC_MAX_K, TP_SPEC_MAX_N);
    if (!spec || strncmp(spec, "ngram:", 6) != 0) {
        snprintf(err, err_size, "--speculate %s, got \"%s\"", why, spec ? spec : "");
        return -1;
    }
    char *end;
    long K, N = 3;
    if (parse_int(spec + 6, &end, 1, TP_SPEC_MAX_K, &K) || (*end && *end != ':') ||
        (*end == ':' && (parse_int(end + 1, &end, 1, TP_SPEC_MAX_N, &N) || *end))) {
        snprintf(err, err_size, "--speculate %s, got \"%s\"", why, spec);
        return -1;
    }
    *k = (int)K;
    *n = (int)N;
    return 0;
}

int tp_speculate_propose(const int32_t *hist, int len, int k, int n, int32_t *drafts) {
    if (k <= 0 || len < 2) return 0;
    if (n > len - 1) n = len - 1;
    for (; n >= 1; n--) {
        const int32_t *pat = hist + len - n;
        /* the most recent earlier occurrence: starts at i, ends before the pattern itself */
        for (int i = len - n - 1; i >= 0; i--) {
            if (memcmp(hist + i, pat, n * sizeof(int32_t)) != 0) continue;
            /* the copy goes on past the end of the sequence through the drafts themselves (a
             * period of len - from tokens): a run of one token drafts k more of it */
            int from = i + n;
            for (int j = 0; j < k; j++) drafts[j] = from + j < len ? hist[from + j] : drafts[from + j - len];
            return k;
        }
    }
    return 0;
}
