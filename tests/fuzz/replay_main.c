/* The libFuzzer standalone driver: runs LLVMFuzzerTestOneInput once on each file named on the
 * command line (a directory: on each file in it, in name order), so any compiler can replay a
 * seed corpus and the kept crash inputs as a regression test. A crash, a sanitizer report or an
 * abort() in the harness ends the process non-zero; no input at all is an error too (a corpus
 * that went missing must not pass). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); return -1; }
    size_t cap = 4096, n = 0, got;
    uint8_t *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0)
        if ((n += got) == cap) buf = realloc(buf, cap *= 2);
    int bad = !buf || ferror(f);
    fclose(f);
    if (bad) { fprintf(stderr, "%s: read failed\n", path); free(buf); return -1; }
    /* an exact-size copy, so that ASan sees a read past the input's end */
    uint8_t *in = malloc(n ? n : 1);
    if (!in) { free(buf); return -1; }
    memcpy(in, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(in, n);
    free(in);
    return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Runs every regular file in dir; returns how many, or -1. */
static int run_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) { perror(dir); return -1; }
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) names = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names);
        if (!names) { closedir(d); return -1; }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        names[n] = malloc(len);
        snprintf(names[n++], len, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    int ran = 0;
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (ran >= 0 && stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) ran = run_file(names[i]) ? -1 : ran + 1;
        free(names[i]);
    }
    free(names);
    return ran;
}

int main(int argc, char **argv) {
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    int total = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) { perror(argv[i]); return 1; }
        int ran = S_ISDIR(st.st_mode) ? run_dir(argv[i]) : run_file(argv[i]) ? -1 : 1;
        if (ran < 0) return 1;
        printf("%s: %d input%s\n", argv[i], ran, ran == 1 ? "" : "s");
        total += ran;
    }
    if (!total) { fprintf(stderr, "%s: no inputs to run\n", argv[0]); return 1; }
    printf("%d inputs ran without a crash\n", total);
    return 0;
}
