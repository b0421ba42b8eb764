/* What the C unit tests share: CHECK(cond, fmt, ...) counts a check, and on failure counts it and
 * prints file:line, the condition and the message (the first 20; the count is the verdict: main
 * returns non-zero when g_fail > 0, as check_verdict(name) does); urand() is a seeded xorshift64
 * in [0, 1), independent of the engine's generators, so every run draws the same cases. Include
 * once, in the test's .c file. */
#ifndef TPGEN_TESTS_CHECK_H
#define TPGEN_TESTS_CHECK_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

static int g_fail, g_checks;
#define CHECK(cond, ...)                                                             \
    do {                                                                             \
        g_checks++;                                                                  \
        if (!(cond) && g_fail++ < 20) {                                              \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);          \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
        }                                                                            \
    } while (0)

/* the verdict for main to return: 1 with "name: F of N checks FAILED" when a check failed, else 0 */
static inline int check_verdict(const char *name) {
    if (g_fail) {
        fprintf(stderr, "%s: %d of %d checks FAILED\n", name, g_fail, g_checks);
        return 1;
    }
    printf("%s: all %d checks passed\n", name, g_checks);
    return 0;
}

/* "dir/" + the printf of fmt, in one of 8 static buffers used in turn (good for 7 more calls) */
static inline char *check_path(const char *dir, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline char *check_path(const char *dir, const char *fmt, ...) {
    static char bufs[8][2048];
    static int k;
    char *b = bufs[k++ & 7], rel[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof rel, fmt, ap);
    va_end(ap);
    snprintf(b, sizeof bufs[0], "%s/%s", dir, rel);
    return b;
}

static uint64_t g_rng = 88172645463325252ull;
static inline double urand(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (g_rng >> 11) * (1.0 / 9007199254740992.0);
}

#endif
