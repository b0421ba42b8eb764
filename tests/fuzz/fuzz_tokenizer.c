/* Fuzz target: the tokenizer (engine/tokenizer/) on the committed CodeGen files (vocab.json + merges.txt)
 * and the small tokenizer.json. The first byte picks the tokenizer and the direction:
 *   encode: the other bytes as text. Valid UTF-8 encodes (and with the CodeGen files decodes back
 *     to itself and gives the same ids through the heap BPE with an empty word cache); invalid UTF-8
 *     is refused with a message naming the byte offset an independent check finds.
 *   decode: the other bytes as ids (int32, little-endian; bit 3 of the first byte maps each into
 *     [0, vocab + 2) so most are valid). All ids valid: the text is valid UTF-8, NUL-terminated,
 *     equal to what the streaming decoder gives; any id out of range: an error, no text.
 * TPGEN_FUZZ_TOKENIZER_DATA (compile definition) is tests/data/tokenizer. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_internal.h" /* bpe_small_max, tpk_cache_clear: the heap BPE path */
#include "tests/fuzz/fuzz_common.h"

static tp_tokenizer *g_tok[2], *g_heap; /* g_heap: the CodeGen files, every word through the heap BPE */

/* Offset of the first byte that does not start a valid UTF-8 character (RFC 3629), or n. */
static size_t first_invalid(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t k = c < 0x80 ? 0 : c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2 : c >= 0xF0 && c <= 0xF4 ? 3 : 9;
        if (k == 9 || (k && i + k >= n)) return i; /* not a lead byte, or cut short by the end */
        uint32_t cp = k == 0 ? c : c & (0x3F >> k);
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return i;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        if ((k == 2 && cp < 0x800) || (k == 3 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
            return i;
        i += k + 1;
    }
    return n;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    static const char *dirs[2] = {TPGEN_FUZZ_TOKENIZER_DATA "/codegen", TPGEN_FUZZ_TOKENIZER_DATA "/small"};
    for (int i = 0; i < 2; i++) g_tok[i] = fuzz_tokenizer("fuzz_tokenizer", dirs[i]);
    g_heap = fuzz_tokenizer("fuzz_tokenizer", dirs[0]);
    g_heap->bpe_small_max = 0;
    return 0;
}

/* round_trip: the codegen files hold all 256 byte tokens; the small tokenizer.json does not
 * (HF decodes its "café" to "caf\ufffd" too), so only the codegen one must give the text back. */
static void fuzz_encode(tp_tokenizer *t, const uint8_t *s, size_t n, int round_trip) {
    char err[256] = "";
    int32_t *ids = NULL;
    size_t n_ids = 0;
    size_t bad = first_invalid(s, n);
    int rc = tp_tokenizer_encode(t, (const char *)s, n, &ids, &n_ids, err, sizeof err);
    if (bad < n) {
        char want[64];
        snprintf(want, sizeof want, "byte offset %zu", bad);
        if (rc != -1 || !strstr(err, want)) {
            fprintf(stderr, "invalid UTF-8 at %zu: rc %d, \"%s\"\n", bad, rc, err);
            abort();
        }
    } else {
        if (rc != 0) { fprintf(stderr, "valid UTF-8 refused: %s\n", err); abort(); }
        char *text = NULL;
        size_t len = 0;
        if (tp_tokenizer_decode(t, ids, n_ids, 0, &text, &len, err, sizeof err) ||
            (round_trip && (len != n || memcmp(text, s, n)))) {
            fprintf(stderr, "no round trip (%zu bytes -> %zu ids -> %zu bytes)\n", n, n_ids, len);
            abort();
        }
        free(text);
        if (round_trip) {
            int32_t *ids2 = NULL;
            size_t n_ids2 = 0;
            tpk_cache_clear(g_heap);
            if (tp_tokenizer_encode(g_heap, (const char *)s, n, &ids2, &n_ids2, err, sizeof err) || n_ids2 != n_ids ||
                (n_ids && memcmp(ids, ids2, n_ids * sizeof *ids))) {
                fprintf(stderr, "the heap BPE without the word cache gives other ids\n");
                abort();
            }
            free(ids2);
        }
    }
    free(ids);
}

static void fuzz_decode(tp_tokenizer *t, const uint8_t *s, size_t n, int in_range, int skip) {
    int V = tp_tokenizer_vocab_size(t);
    size_t k = n / 4;
    int32_t *ids = malloc((k ? k : 1) * sizeof *ids);
    int valid = 1;
    for (size_t i = 0; i < k; i++) {
        uint32_t x = (uint32_t)s[4 * i] | (uint32_t)s[4 * i + 1] << 8 | (uint32_t)s[4 * i + 2] << 16 |
                     (uint32_t)s[4 * i + 3] << 24;
        ids[i] = in_range ? (int32_t)(x % (uint32_t)(V + 2)) : (int32_t)x;
        valid &= ids[i] >= 0 && ids[i] < V;
    }
    char err[256] = "", *text = NULL;
    size_t len = 0;
    int rc = tp_tokenizer_decode(t, ids, k, skip, &text, &len, err, sizeof err);
    if (!valid) {
        if (rc != -1 || !err[0]) { fprintf(stderr, "an id out of range decoded\n"); abort(); }
    } else {
        if (rc != 0 || !text || text[len] != 0 || first_invalid((const uint8_t *)text, len) != len) {
            fprintf(stderr, "decode of valid ids: rc %d, not valid UTF-8 or not NUL-terminated\n", rc);
            abort();
        }
        /* the streaming decoder gives the same text */
        tp_detok_stream *st = tp_detok_stream_new(t, skip);
        char *out = NULL;
        size_t out_len = 0;
        for (size_t i = 0; i < k; i++)
            if (tp_detok_stream_push(st, ids[i], &out, &out_len)) abort();
        tp_detok_stream_flush(st, &out, &out_len);
        tp_detok_stream_free(st);
        if (out_len != len || (len && memcmp(out, text, len))) { fprintf(stderr, "stream differs\n"); abort(); }
        free(out);
    }
    free(text);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t mode = data[0];
    tp_tokenizer *t = g_tok[mode & 1];
    if (mode & 2) fuzz_decode(t, data + 1, size - 1, (mode & 8) != 0, (mode & 4) != 0);
    else fuzz_encode(t, data + 1, size - 1, (mode & 1) == 0);
    return 0;
}
