/* Splitting text before BPE: the added tokens (leftmost-longest; CodeGen2.5: tiktoken's pick of
 * a space or tab run, tokenizer_bpe.c), then the GPT-2 pre-tokenizer
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * written by hand as a scanner over character classes. The classes come from a table generated
 * from HF's own regex engine (Oniguruma, a newer Unicode than most systems' PCRE2 or Python), so
 * that every code point is classified exactly as HF classifies it; CodeGen2.5's tokenizer uses
 * tiktoken 0.4.0's classes instead (the same pattern, an older Unicode): HF's table where the two
 * agree, the runs of tpk_tt_class_diff where they do not. */
#include "tokenizer_internal.h"

/* The class of code point cp >= U+0080: the run of t->cls_diff that holds it, else the table's. */
static inline int class_of(const tp_tokenizer *t, uint32_t cp) {
    size_t lo = 0, hi = t->n_cls_diff;
    while (lo < hi) { /* the first run that ends at or after cp */
        size_t mid = lo + (hi - lo) / 2;
        if (t->cls_diff[mid].last < cp) lo = mid + 1;
        else hi = mid;
    }
    if (lo < t->n_cls_diff && t->cls_diff[lo].first <= cp) return t->cls_diff[lo].cls;
    return t->cls_data[t->cls_block[cp >> 8]][cp & 255];
}

/* The class of the character at p[i] (valid UTF-8) and its length in bytes. */
static inline int class_at(const tp_tokenizer *t, const uint8_t *p, size_t i, size_t *len) {
    uint32_t b = p[i];
    if (b < 0x80) {
        *len = 1;
        return t->cls_data[0][b]; /* the generator puts block 0 (U+0000..U+00FF) first; no run is ASCII */
    }
    uint32_t cp;
    if (b < 0xE0) {
        cp = (b & 0x1F) << 6 | (p[i + 1] & 0x3Fu);
        *len = 2;
    } else if (b < 0xF0) {
        cp = (b & 0x0F) << 12 | (p[i + 1] & 0x3Fu) << 6 | (p[i + 2] & 0x3Fu);
        *len = 3;
    } else {
        cp = (b & 0x07) << 18 | (p[i + 1] & 0x3Fu) << 12 | (p[i + 2] & 0x3Fu) << 6 | (p[i + 3] & 0x3Fu);
        *len = 4;
    }
    return class_of(t, cp);
}

size_t tpk_pretok_next(const tp_tokenizer *t, const uint8_t *p, size_t i, size_t e) {
    uint8_t c = p[i];
    /* 's 't 're 've 'm 'll 'd (case-sensitive, as in HF) */
    if (c == '\'' && i + 1 < e) {
        uint8_t d = p[i + 1];
        if (d == 's' || d == 't' || d == 'm' || d == 'd') return i + 2;
        if (i + 2 < e) {
            uint8_t f = p[i + 2];
            if ((d == 'r' && f == 'e') || (d == 'v' && f == 'e') || (d == 'l' && f == 'l')) return i + 3;
        }
    }
    size_t l;
    int k = class_at(t, p, i, &l);
    size_t j = i + l;
    /* ` ?X+`: a space joins a following run of letters, numbers or others */
    if (c == ' ' && j < e) {
        size_t l2;
        int k2 = class_at(t, p, j, &l2);
        if (k2 != TPK_SPACE) {
            k = k2;
            j += l2;
        }
    }
    if (k != TPK_SPACE) {
        if (k == TPK_LETTER) /* ASCII letters, the common case */
            while (j < e && (uint32_t)((p[j] | 0x20) - 'a') < 26u) j++;
        while (j < e) {
            size_t l3;
            if (class_at(t, p, j, &l3) != k) break;
            j += l3;
        }
        return j;
    }
    /* `\s+(?!\S)|\s+`: a whitespace run; when a non-space follows, its last character is left to
     * start the next piece (so "\n  x" gives "\n " and " x"), unless the run is one character. */
    size_t last = i;
    while (j < e) {
        size_t l3;
        if (class_at(t, p, j, &l3) != TPK_SPACE) break;
        last = j;
        j += l3;
    }
    if (j == e) return e;
    return last > i ? last : j;
}

size_t tpk_trie_match(const tpk_trie *tr, const uint8_t *p, size_t i, size_t e, int32_t *id) {
    int32_t node = tr->root[p[i]];
    size_t best = 0, k = i + 1;
    while (node >= 0) {
        if (tr->id[node] >= 0) {
            best = k - i;
            *id = tr->id[node];
        }
        if (k >= e) break;
        int32_t ch = tr->child[node];
        while (ch >= 0 && tr->byte[ch] != p[k]) ch = tr->sibling[ch];
        node = ch;
        k++;
    }
    return best;
}
