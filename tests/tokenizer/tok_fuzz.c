/* Fuzz-style test, seeded and bounded: random byte strings and random Unicode text never crash
 * the tokenizer; invalid UTF-8 is refused at exactly the offset an independent check finds;
 * valid text round-trips and gives the same ids with and without the word cache and through both
 * BPE paths; random id sequences decode to valid UTF-8 and the streaming decoder agrees. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "tokenizer/tokenizer_internal.h"
#include "tok_test.h"

static uint64_t g_rng;
static uint32_t rnd(void) { /* xorshift64* */
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return (uint32_t)((g_rng * 0x2545F4914F6CDD1Dull) >> 32);
}
static uint32_t rnd_below(uint32_t n) { return rnd() % n; }

static size_t put_utf8(unsigned char *o, uint32_t cp) {
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) { o[0] = (unsigned char)(0xC0 | cp >> 6); o[1] = (unsigned char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* random code points biased to what the tokenizer treats specially */
static uint32_t random_cp(void) {
    static const uint32_t ws[] = {' ', '\t', '\n', '\r', 0x0B, 0x0C, 0x85, 0xA0, 0x1680, 0x2000, 0x2028, 0x202F,
                                  0x3000, 0x200B, 0x180E, 0xFEFF};
    uint32_t r = rnd_below(100);
    if (r < 30) return 0x20 + rnd_below(0x5F);
    if (r < 45) return ' ';
    if (r < 55) return ws[rnd_below(sizeof ws / sizeof *ws)];
    if (r < 60) return '\'';
    if (r < 65) return 0x300 + rnd_below(0x70);
    if (r < 70) return 0x1F300 + rnd_below(0x800);
    if (r < 75) return 0x4E00 + rnd_below(0x5000);
    if (r < 90) {
        uint32_t cp = 0x80 + rnd_below(0xFFFF - 0x80);
        return cp >= 0xD800 && cp <= 0xDFFF ? 'x' : cp;
    }
    return 0x10000 + rnd_below(0x100000);
}

static int check_text(tp_tokenizer *t, tp_tokenizer *t_heap, const unsigned char *s, size_t n, const char *kind,
                      int iter) {
    char err[256];
    int32_t *ids = NULL, *ids2 = NULL;
    size_t n_ids = 0, n_ids2 = 0;
    size_t bad_at = tt_utf8_first_invalid(s, n);
    int rc = tp_tokenizer_encode(t, (const char *)s, n, &ids, &n_ids, err, sizeof err);
    int fail = 0;
    if (bad_at < n) {
        char want[64];
        snprintf(want, sizeof want, "byte offset %zu ", bad_at);
        if (rc != -1 || !strstr(err, want)) {
            fprintf(stderr, "%s %d: invalid UTF-8 at %zu: encode gave rc %d, \"%s\"\n", kind, iter, bad_at, rc,
                    rc ? err : "");
            fail = 1;
        }
    } else if (rc != 0) {
        fprintf(stderr, "%s %d: valid text refused: %s\n", kind, iter, err);
        fail = 1;
    } else {
        char *dec = NULL;
        size_t n_dec = 0;
        tpk_pool_clear(t_heap);
        if (tp_tokenizer_encode(t_heap, (const char *)s, n, &ids2, &n_ids2, err, sizeof err) || n_ids2 != n_ids ||
            memcmp(ids, ids2, n_ids * sizeof *ids) != 0) {
            fprintf(stderr, "%s %d: the heap BPE / uncached encode gives other ids\n", kind, iter);
            fail = 1;
        } else if (tp_tokenizer_decode(t, ids, n_ids, 0, &dec, &n_dec, err, sizeof err) || n_dec != n ||
                   memcmp(dec, s, n) != 0) {
            fprintf(stderr, "%s %d: no round trip\n", kind, iter);
            fail = 1;
        }
        if (fail) tt_print_text("  text", (const char *)s, n);
        free(dec);
    }
    free(ids);
    free(ids2);
    return fail;
}

int tt_cmd_fuzz(int argc, char **argv) {
    if (argc != 3) return tt_usage("fuzz DIR SEED N");
    tp_tokenizer *t = tt_load(argv[0]), *t_heap = tt_load(argv[0]);
    t_heap->bpe_small_max = 0;
    g_rng = strtoull(argv[1], NULL, 10) * 0x9E3779B97F4A7C15ull + 1;
    int iters = atoi(argv[2]), fails = 0, n_invalid = 0;
    unsigned char buf[4096];
    for (int it = 0; it < iters && fails < 10; it++) {
        /* random bytes, mostly ASCII so that pieces form, with random high bytes */
        size_t n = rnd_below(200);
        uint32_t high = rnd_below(2) ? 0 : 1 + rnd_below(30); /* % of bytes >= 0x80; 0: plain ASCII */
        for (size_t i = 0; i < n; i++) {
            uint32_t r = rnd_below(100);
            buf[i] = (unsigned char)(r < high ? 0x80 + rnd_below(128) : r < 80 ? 0x20 + rnd_below(0x5F)
                                     : r < 90 ? ' ' : rnd_below(128));
        }
        n_invalid += tt_utf8_first_invalid(buf, n) < n;
        fails += check_text(t, t_heap, buf, n, "random bytes", it);
        /* random Unicode, sometimes with one byte broken */
        size_t m = 0, cps = rnd_below(300);
        for (size_t i = 0; i < cps && m + 4 < sizeof buf; i++) {
            if (rnd_below(50) == 0) {
                size_t run = 1 + rnd_below(40);
                for (size_t k = 0; k < run && m + 4 < sizeof buf; k++) buf[m++] = rnd_below(3) ? ' ' : '\t';
            } else m += put_utf8(buf + m, random_cp());
        }
        if (m && rnd_below(8) == 0) buf[rnd_below((uint32_t)m)] = (unsigned char)rnd_below(256);
        fails += check_text(t, t_heap, buf, m, "random unicode", it);
        /* random ids: the decode is valid UTF-8, the stream equals it, NUL-terminated */
        int32_t ids[64];
        size_t k = rnd_below(64);
        for (size_t i = 0; i < k; i++)
            ids[i] = rnd_below(3) ? (int32_t)rnd_below((uint32_t)tp_tokenizer_vocab_size(t)) : (int32_t)(128 + rnd_below(128));
        int skip = (int)rnd_below(2);
        char err[256], *dec = NULL, *str = NULL;
        size_t n_dec = 0, n_str = 0;
        if (tp_tokenizer_decode(t, ids, k, skip, &dec, &n_dec, err, sizeof err)) {
            fprintf(stderr, "random ids %d: %s\n", it, err);
            fails++;
        } else {
            str = tt_stream_decode(t, ids, k, skip, &n_str);
            if (tt_utf8_first_invalid((unsigned char *)dec, n_dec) != n_dec || dec[n_dec] != 0 || n_str != n_dec ||
                memcmp(str, dec, n_dec) != 0) {
                fprintf(stderr, "random ids %d: decode not valid UTF-8 or stream differs\n", it);
                tt_print_ids("  ids", ids, k);
                fails++;
            }
        }
        free(dec);
        free(str);
    }
    /* one long random word: the heap BPE on thousands of bytes */
    size_t n = 0;
    while (n + 4 < sizeof buf) buf[n++] = (unsigned char)"abcdefghij"[rnd_below(10)];
    fails += check_text(t, t_heap, buf, n, "long word", 0);
    printf("fuzz: %d iterations (%d invalid byte strings): %s\n", iters, n_invalid, fails ? "FAILURES" : "ok");
    tp_tokenizer_free(t);
    tp_tokenizer_free(t_heap);
    return fails ? 1 : 0;
}
