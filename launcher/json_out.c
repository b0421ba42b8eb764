#include "json_out.h"

#include <math.h>

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid. */
static int utf8_len(const unsigned char *s, size_t left) {
    unsigned c = s[0];
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || (size_t)n > left) return 0;
    for (int i = 1; i < n; i++) if ((s[i] & 0xC0) != 0x80) return 0;
    if (n == 2 && c < 0xC2) return 0;
    if (n == 3) {
        unsigned cp = (c & 15) << 12 | (s[1] & 63) << 6 | (s[2] & 63);
        if (cp < 0x800 || (cp >= 0xD800 && cp < 0xE000)) return 0;
    }
    if (n == 4) {
        unsigned cp = (c & 7) << 18 | (s[1] & 63) << 12 | (s[2] & 63) << 6 | (s[3] & 63);
        if (cp < 0x10000 || cp > 0x10FFFF) return 0;
    }
    return n;
}

void tp_json_string(FILE *f, const char *str, size_t len) {
    const unsigned char *s = (const unsigned char *)str;
    fputc('"', f);
    for (size_t i = 0; i < len;) {
        unsigned c = s[i];
        if (c == '"' || c == '\\') { fputc('\\', f); fputc((int)c, f); i++; }
        else if (c == '\n') { fputs("\\n", f); i++; }
        else if (c == '\r') { fputs("\\r", f); i++; }
        else if (c == '\t') { fputs("\\t", f); i++; }
        else if (c < 0x20 || c == 0x7f) { fprintf(f, "\\u%04x", c); i++; }
        else {
            int n = utf8_len(s + i, len - i);
            if (n == 0) { fputs("\\ufffd", f); i++; }
            else { fwrite(s + i, 1, n, f); i += n; }
        }
    }
    fputc('"', f);
}

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
