#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int g_rank = 0, g_size = 1;
static tp_exit_hooks g_hooks;

void tp_log_set_rank(int rank, int size) { g_rank = rank; g_size = size; }
void tp_log_set_exit_hooks(const tp_exit_hooks *hooks) { g_hooks = *hooks; }
int tp_log_rank(void) { return g_rank; }

void tp_log0(const char *fmt, ...) {
    if (g_rank != 0) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fflush(stderr);
}

static void print_error(const char *fmt, va_list ap) {
    if (g_size > 1) fprintf(stderr, "tpgen: [rank %d] error: ", g_rank);
    else fprintf(stderr, "tpgen: error: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    fflush(stderr);
}

void tp_die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    print_error(fmt, ap);
    va_end(ap);
    if (g_hooks.die) g_hooks.die(g_hooks.ctx);
    exit(1);
}

static char g_die_all_msg[4096];

const char *tp_log_die_all_message(void) { return g_die_all_msg; }

void tp_die_all(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_die_all_msg, sizeof g_die_all_msg, fmt, ap);
    va_end(ap);
    if (g_rank == 0) {
        fprintf(stderr, "tpgen: error: %s\n", g_die_all_msg);
        fflush(stderr);
    }
    if (g_hooks.die_all) g_hooks.die_all(g_hooks.ctx);
    exit(1);
}

void *tp_malloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) tp_die("out of host memory allocating %zu bytes", bytes);
    return p;
}

void *tp_calloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) tp_die("out of host memory allocating %zu x %zu bytes", n, size);
    return p;
}

void *tp_realloc(void *p, size_t bytes) {
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q) tp_die("out of host memory reallocating to %zu bytes", bytes);
    return q;
}

char *tp_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = tp_malloc(n);
    memcpy(d, s, n);
    return d;
}

int tp_set_err(char *err, size_t size, const char *fmt, ...) {
    if (err && size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, size, fmt, ap);
        va_end(ap);
    }
    return -1;
}

char *tp_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = tp_malloc(cap);
    for (;;) {
        if (n + 1 >= cap) buf = tp_realloc(buf, cap *= 2);
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) { free(buf); errno = EIO; return NULL; }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

double tp_now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
