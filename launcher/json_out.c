#include "json_out.h"

#include <math.h>

#include "util/json.h"

static void put_file(void *f, const char *p, size_t n) { fwrite(p, 1, n, f); }

void tp_json_string(FILE *f, const char *str, size_t len) { json_write_string(str, len, put_file, f); }

void tp_json_float(FILE *f, float x) {
    if (!isfinite(x)) fputs("null", f);
    else fprintf(f, "%.7g", x);
}

void tp_json_ids(FILE *f, const int32_t *ids, int n) {
    fputc('[', f);
    for (int i = 0; i < n; i++) fprintf(f, i ? ", %d" : "%d", ids[i]);
    fputc(']', f);
}

void tp_json_top(FILE *f, const int32_t *ids, const float *lps, int k) {
    fputc('[', f);
    int first = 1;
    for (int j = 0; j < k; j++) {
        if (ids[j] < 0) continue;
        fprintf(f, first ? "[%d, " : ", [%d, ", ids[j]);
        tp_json_float(f, lps[j]);
        fputc(']', f);
        first = 0;
    }
    fputc(']', f);
}
