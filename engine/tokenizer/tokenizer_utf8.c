/* UTF-8 validation and the lossy conversion HF's decoder applies (Rust's String::from_utf8_lossy:
 * one U+FFFD per maximal subpart of an ill-formed sequence, Unicode 3.9 "best practice"). */
#include <string.h>

#include "util/log.h"
#include "tokenizer_internal.h"

int tpk_utf8_step(const uint8_t *s, size_t len, int *need, int *bad) {
    *need = 0;
    *bad = 0;
    uint8_t b = s[0];
    if (b < 0x80) return 1;
    int n;
    uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte (Unicode table 3-7) */
    if (b < 0xC2) n = 0;
    else if (b <= 0xDF) n = 2;
    else if (b == 0xE0) { n = 3; lo = 0xA0; }
    else if (b <= 0xEC) n = 3;
    else if (b == 0xED) { n = 3; hi = 0x9F; }
    else if (b <= 0xEF) n = 3;
    else if (b == 0xF0) { n = 4; lo = 0x90; }
    else if (b <= 0xF3) n = 4;
    else if (b == 0xF4) { n = 4; hi = 0x8F; }
    else n = 0;
    if (n == 0) { /* 0x80..0xC1, 0xF5..0xFF never start a character */
        *bad = 1;
        return 0;
    }
    for (int k = 1; k < n; k++) {
        if ((size_t)k >= len) {
            *need = n - k;
            *bad = k;
            return 0;
        }
        if (s[k] < lo || s[k] > hi) {
            *bad = k;
            return 0;
        }
        lo = 0x80;
        hi = 0xBF;
    }
    return n;
}

size_t tpk_utf8_validate(const uint8_t *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        /* 8 ASCII bytes at a time */
        while (i + 8 <= len) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= len) break;
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        int need, bad;
        int k = tpk_utf8_step(s + i, len - i, &need, &bad);
        if (k == 0) return i;
        i += (size_t)k;
    }
    return len;
}

void tpk_buf_append(char **buf, size_t *len, size_t *cap, const void *s, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 64;
        while (c < *len + n + 1) c *= 2;
        *buf = tp_realloc(*buf, c);
        *cap = c;
    }
    if (n) memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = 0;
}

size_t tpk_utf8_append_lossy(char **buf, size_t *len, size_t *cap, const uint8_t *s, size_t n, int hold_tail) {
    static const char fffd[3] = {(char)0xEF, (char)0xBF, (char)0xBD};
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        int need = 0, bad = 0;
        while (j < n) { /* the longest valid run from i */
            if (s[j] < 0x80) {
                j++;
                continue;
            }
            int k = tpk_utf8_step(s + j, n - j, &need, &bad);
            if (k == 0) break;
            j += (size_t)k;
        }
        tpk_buf_append(buf, len, cap, s + i, j - i);
        if (j == n) return n;
        if (need && hold_tail) return j; /* an unfinished character: wait for more bytes */
        tpk_buf_append(buf, len, cap, fffd, 3);
        i = j + (size_t)bad;
    }
    return n;
}
