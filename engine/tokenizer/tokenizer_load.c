/* Loading the tokenizer from a model directory: tokenizer.json, or vocab.json + merges.txt with
 * added_tokens.json, special_tokens_map.json and tokenizer_config.json, into the tables of
 * tokenizer_internal.h. Every error names the file (and line or token) concerned. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/json.h"
#include "util/log.h"
#include "tokenizer_builder.h"
#include "tokenizer_internal.h"

/* ---- hashing ---- */
uint64_t tpk_hash_bytes(const uint8_t *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xFF51AFD7ED558CCDull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
        s += 8;
        n -= 8;
    }
    if (n) { /* 1..7 bytes without a call to memcpy: two overlapping loads (n is hashed too) */
        uint64_t w;
        if (n >= 4) {
            uint32_t a, c;
            memcpy(&a, s, 4);
            memcpy(&c, s + n - 4, 4);
            w = (uint64_t)a << 32 | c;
        } else w = (uint64_t)s[0] << 16 | (uint64_t)s[n >> 1] << 8 | s[n - 1];
        h = (h ^ w) * 0x94D049BB133111EBull;
        h ^= h >> 29;
    }
    h *= 0xD6E8FEB86659FD93ull;
    h ^= h >> 32;
    return h | 1; /* never 0: 0 marks an empty cache slot */
}

int32_t tpk_vocab_lookup(const tp_tokenizer *t, const uint8_t *s, size_t n) {
    uint64_t h = tpk_hash_bytes(s, n);
    for (uint32_t i = tpk_slot(h) & t->vocab_mask;; i = (i + 1) & t->vocab_mask) {
        int32_t e = t->vocab_slots[i];
        if (e < 0) return -1;
        const tpk_vocab_ent *v = &t->vocab_ent[e];
        if (v->hash == h && v->len == n && memcmp(t->vocab_keys + v->off, s, n) == 0) return v->id;
    }
}

static uint32_t pow2_at_least(size_t n, uint32_t *bits) {
    uint32_t c = 16, b = 4;
    while (c < n) c <<= 1, b++;
    if (bits) *bits = b;
    return c;
}

int tp_tokenizer_present(const char *dir) {
    /* tokenizer_config.json alone: CodeGen2.5's tokenizer, or one tp_tokenizer_load names and refuses */
    return dir && (tpk_file_exists(dir, "tokenizer.json") ||
                   (tpk_file_exists(dir, "vocab.json") && tpk_file_exists(dir, "merges.txt")) ||
                   tpk_file_exists(dir, "tokenizer_config.json"));
}

static int vocab_set(builder *b, const char *file, const char *s, size_t n, const json_value *idv) {
    if (idv->type != JSON_NUMBER || !idv->is_integer || idv->integer < 0 || idv->integer >= TPK_MAX_ID) {
        tpk_errf(b, "%s/%s: token \"%.40s\" has id %s, expected an integer in [0, %d)", b->dir, file, s,
             idv->type == JSON_NUMBER ? "out of range" : json_type_name(idv->type), TPK_MAX_ID);
        return -1;
    }
    return tpk_vocab_put(b, file, s, n, idv->integer);
}

static void merge_push(builder *b, const char *l, size_t ln, const char *r, size_t rn, int line) {
    if (b->n_merges == b->cap_merges) {
        b->cap_merges = b->cap_merges ? 2 * b->cap_merges : 1024;
        size_t c = (size_t)b->cap_merges;
        b->mleft = tp_realloc(b->mleft, c * sizeof *b->mleft);
        b->mright = tp_realloc(b->mright, c * sizeof *b->mright);
        b->mleft_len = tp_realloc(b->mleft_len, c * sizeof *b->mleft_len);
        b->mright_len = tp_realloc(b->mright_len, c * sizeof *b->mright_len);
        b->mline = tp_realloc(b->mline, c * sizeof *b->mline);
    }
    int i = b->n_merges++;
    b->mleft[i] = l;
    b->mright[i] = r;
    b->mleft_len[i] = ln;
    b->mright_len[i] = rn;
    b->mline[i] = line;
}

static void builder_free(builder *b) {
    free(b->vstr);
    free(b->vlen);
    for (int i = 0; i < b->n_added; i++) free(b->added[i].content);
    free(b->added);
    free(b->mleft);
    free(b->mright);
    free(b->mleft_len);
    free(b->mright_len);
    free(b->mline);
    json_free(b->docs[0]);
    json_free(b->docs[1]);
    free(b->merges_text);
    free(b->owned);
}

/* ---- vocab.json + merges.txt (+ added_tokens.json, special_tokens_map.json, tokenizer_config.json) ---- */

static int read_vocab_json(builder *b) {
    json_value *v = tpk_read_json(b, "vocab.json");
    if (!v) return -1;
    int rc = 0;
    if (v->type != JSON_OBJECT) {
        tpk_errf(b, "%s/vocab.json: expected an object of token -> id, found %s", b->dir, json_type_name(v->type));
        rc = -1;
    }
    for (size_t i = 0; rc == 0 && v->type == JSON_OBJECT && i < v->n; i++)
        rc = vocab_set(b, "vocab.json", v->keys[i], v->key_lens[i], &v->items[i]);
    b->docs[0] = v;
    return rc;
}

static int read_merges_txt(builder *b) {
    char p[4096];
    tpk_path_join(p, sizeof p, b->dir, "merges.txt");
    size_t len;
    char *text = tp_read_file(p, &len);
    if (!text) {
        tpk_errf(b, "%s: %s", p, strerror(errno));
        return -1;
    }
    b->merges_file = "merges.txt";
    int line = 0, rc = 0;
    for (char *s = text, *end = text + len; s < end && rc == 0;) {
        char *nl = memchr(s, '\n', (size_t)(end - s));
        char *e = nl ? nl : end;
        line++;
        size_t n = (size_t)(e - s);
        if (n && s[n - 1] == '\r') n--;
        if (n == 0 || (n >= 8 && memcmp(s, "#version", 8) == 0)) {
            /* HF skips the "#version" header; empty lines carry no merge */
        } else {
            char *sp = memchr(s, ' ', n);
            if (!sp || sp == s || sp + 1 == s + n || memchr(sp + 1, ' ', (size_t)(s + n - sp - 1))) {
                tpk_errf(b, "%s:%d: expected two tokens separated by one space, found \"%.*s\"", p, line,
                     (int)(n > 60 ? 60 : n), s);
                rc = -1;
            } else merge_push(b, s, (size_t)(sp - s), sp + 1, (size_t)(s + n - sp - 1), line);
        }
        s = nl ? nl + 1 : end;
    }
    b->merges_text = text;
    return rc;
}

static int token_string(const json_value *v, const char **s, size_t *n) {
    if (v->type == JSON_STRING) {
        *s = v->str;
        *n = v->str_len;
        return 1;
    }
    if (v->type == JSON_OBJECT) { /* {"content": "...", ...} as AddedToken serializes */
        const json_value *c = json_get(v, "content");
        if (c && c->type == JSON_STRING) {
            *s = c->str;
            *n = c->str_len;
            return 1;
        }
    }
    return 0;
}

static int json_flag(const json_value *obj, const char *key, int dflt) {
    const json_value *v = json_get(obj, key);
    return v && v->type == JSON_BOOL ? v->boolean : dflt;
}

static const char *const g_special_keys[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                             "pad_token", "cls_token", "mask_token"};

/* special tokens named in special_tokens_map.json or tokenizer_config.json */
static void add_special_names(builder *b, const json_value *root, char **eos, size_t *eos_len) {
    if (!root || root->type != JSON_OBJECT) return;
    for (size_t k = 0; k < sizeof g_special_keys / sizeof *g_special_keys; k++) {
        const json_value *v = json_get(root, g_special_keys[k]);
        const char *s;
        size_t n;
        if (v && token_string(v, &s, &n) && n) {
            tpk_added_put(b, s, n, -1, 1, 0);
            if (k == 1 && eos) {
                free(*eos);
                *eos = tp_malloc(n + 1);
                memcpy(*eos, s, n + 1);
                *eos_len = n;
            }
        }
    }
    const json_value *extra = json_get(root, "additional_special_tokens");
    for (size_t i = 0; extra && extra->type == JSON_ARRAY && i < extra->n; i++) {
        const char *s;
        size_t n;
        if (token_string(&extra->items[i], &s, &n) && n) tpk_added_put(b, s, n, -1, 1, 0);
    }
}

static int check_strip_flags(builder *b, const char *file, const json_value *tok, const char *content) {
    static const char *const flags[] = {"lstrip", "rstrip", "single_word"};
    for (int f = 0; f < 3; f++)
        if (json_flag(tok, flags[f], 0)) {
            tpk_errf(b, "%s/%s: added token \"%.40s\" has %s=true, which tpgen does not support", b->dir, file,
                 content, flags[f]);
            return -1;
        }
    return 0;
}

static int read_vocab_dir(builder *b, char **eos, size_t *eos_len) {
    if (read_vocab_json(b) || read_merges_txt(b)) return -1;
    /* tokenizer_config.json: added_tokens_decoder {"id": {content, special, normalized, ...}} */
    json_value *cfg = NULL, *map = NULL;
    int rc = 0;
    if (tpk_file_exists(b->dir, "tokenizer_config.json")) {
        if (!(cfg = tpk_read_json(b, "tokenizer_config.json"))) return -1;
        const json_value *dec = json_get(cfg, "added_tokens_decoder");
        for (size_t i = 0; dec && dec->type == JSON_OBJECT && i < dec->n && rc == 0; i++) {
            const json_value *tok = &dec->items[i];
            const char *s;
            size_t n;
            char *endp;
            long id = strtol(dec->keys[i], &endp, 10);
            if (!token_string(tok, &s, &n) || *endp || id < 0 || id >= TPK_MAX_ID) {
                tpk_errf(b, "%s/tokenizer_config.json: added_tokens_decoder entry \"%s\" is not an id with a "
                     "content", b->dir, dec->keys[i]);
                rc = -1;
                break;
            }
            if ((rc = check_strip_flags(b, "tokenizer_config.json", tok, s))) break;
            int special = json_flag(tok, "special", 0);
            tpk_added_put(b, s, n, (int32_t)id, special, json_flag(tok, "normalized", !special));
        }
    }
    if (rc == 0 && tpk_file_exists(b->dir, "added_tokens.json")) {
        json_value *at = tpk_read_json(b, "added_tokens.json");
        if (!at) rc = -1;
        else if (at->type != JSON_OBJECT) {
            tpk_errf(b, "%s/added_tokens.json: expected an object of token -> id", b->dir);
            rc = -1;
        }
        for (size_t i = 0; rc == 0 && i < at->n; i++) {
            const json_value *idv = &at->items[i];
            if (idv->type != JSON_NUMBER || !idv->is_integer || idv->integer < 0 || idv->integer >= TPK_MAX_ID) {
                tpk_errf(b, "%s/added_tokens.json: token \"%.40s\" has no valid id", b->dir, at->keys[i]);
                rc = -1;
                break;
            }
            added_tok *old = tpk_added_find(b, at->keys[i], at->key_lens[i]);
            int special = old ? old->special : 0;
            tpk_added_put(b, at->keys[i], at->key_lens[i], (int32_t)idv->integer, special,
                      old ? old->normalized : !special);
        }
        json_free(at);
    }
    if (rc == 0 && tpk_file_exists(b->dir, "special_tokens_map.json")) {
        if (!(map = tpk_read_json(b, "special_tokens_map.json"))) rc = -1;
    }
    if (rc == 0) {
        add_special_names(b, map, eos, eos_len);
        add_special_names(b, cfg, eos, eos_len);
        /* CodeGen's tokenizer class defaults bos/eos/unk to <|endoftext|> */
        if (!map && !cfg && tpk_vocab_find(b, "<|endoftext|>", 13) >= 0) {
            tpk_added_put(b, "<|endoftext|>", 13, -1, 1, 0);
            *eos = tp_strdup("<|endoftext|>");
            *eos_len = 13;
        }
    }
    json_free(cfg);
    json_free(map);
    return rc;
}

/* ---- tokenizer.json ---- */

static int expect_type(builder *b, const json_value *root, const char *key, const char *type, int null_ok) {
    const json_value *v = json_get(root, key);
    if (!v || v->type == JSON_NULL) {
        if (null_ok) return 0;
        tpk_errf(b, "%s/tokenizer.json: \"%s\" is missing; tpgen needs a %s %s", b->dir, key, type, key);
        return -1;
    }
    const json_value *ty = json_get(v, "type");
    if (!ty || ty->type != JSON_STRING || strcmp(ty->str, type) != 0) {
        tpk_errf(b, "%s/tokenizer.json: %s type %s is not supported (tpgen supports %s%s)", b->dir, key,
             ty && ty->type == JSON_STRING ? ty->str : "(none)", type, null_ok ? " or null" : "");
        return -1;
    }
    return 0;
}

static int read_tokenizer_json(builder *b, char **eos, size_t *eos_len) {
    json_value *root = tpk_read_json(b, "tokenizer.json");
    if (!root) return -1;
    int rc = -1;
    const json_value *model = json_get(root, "model"), *v;
    b->merges_file = "tokenizer.json";
    if (expect_type(b, root, "model", "BPE", 0) || expect_type(b, root, "pre_tokenizer", "ByteLevel", 0) ||
        expect_type(b, root, "decoder", "ByteLevel", 0))
        goto done;
    if ((v = json_get(root, "normalizer")) && v->type != JSON_NULL) {
        tpk_errf(b, "%s/tokenizer.json: a normalizer is not supported (CodeGen has none)", b->dir);
        goto done;
    }
    const json_value *pre = json_get(root, "pre_tokenizer");
    if (json_flag(pre, "add_prefix_space", 0) || !json_flag(pre, "use_regex", 1)) {
        tpk_errf(b, "%s/tokenizer.json: ByteLevel pre_tokenizer with add_prefix_space=true or use_regex=false is "
             "not supported", b->dir);
        goto done;
    }
    if ((v = json_get(model, "dropout")) && v->type != JSON_NULL) {
        tpk_errf(b, "%s/tokenizer.json: BPE dropout is not supported", b->dir);
        goto done;
    }
    static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int k = 0; k < 2; k++)
        if ((v = json_get(model, affixes[k])) && v->type != JSON_NULL && !(v->type == JSON_STRING && v->str_len == 0)) {
            tpk_errf(b, "%s/tokenizer.json: BPE %s is not supported", b->dir, affixes[k]);
            goto done;
        }
    if (json_flag(model, "byte_fallback", 0)) {
        tpk_errf(b, "%s/tokenizer.json: BPE byte_fallback is not supported", b->dir);
        goto done;
    }
    b->ignore_merges = json_flag(model, "ignore_merges", 0);
    const json_value *vocab = json_get(model, "vocab"), *merges = json_get(model, "merges");
    if (!vocab || vocab->type != JSON_OBJECT || !merges || merges->type != JSON_ARRAY) {
        tpk_errf(b, "%s/tokenizer.json: model.vocab (object) or model.merges (array) is missing", b->dir);
        goto done;
    }
    for (size_t i = 0; i < vocab->n; i++)
        if (vocab_set(b, "tokenizer.json", vocab->keys[i], vocab->key_lens[i], &vocab->items[i])) goto done;
    for (size_t i = 0; i < merges->n; i++) {
        const json_value *m = &merges->items[i];
        if (m->type == JSON_STRING) { /* "left right" (tokenizers < 0.20) */
            const char *sp = memchr(m->str, ' ', m->str_len);
            if (!sp || sp == m->str || sp + 1 == m->str + m->str_len) goto bad_merge;
            merge_push(b, m->str, (size_t)(sp - m->str), sp + 1, m->str_len - (size_t)(sp - m->str) - 1, (int)i);
        } else if (m->type == JSON_ARRAY && m->n == 2 && m->items[0].type == JSON_STRING &&
                   m->items[1].type == JSON_STRING) { /* ["left", "right"] */
            merge_push(b, m->items[0].str, m->items[0].str_len, m->items[1].str, m->items[1].str_len, (int)i);
        } else {
        bad_merge:
            tpk_errf(b, "%s/tokenizer.json: model.merges[%zu] is neither \"left right\" nor [left, right]", b->dir, i);
            goto done;
        }
    }
    const json_value *added = json_get(root, "added_tokens");
    for (size_t i = 0; added && added->type == JSON_ARRAY && i < added->n; i++) {
        const json_value *tok = &added->items[i], *idv = json_get(tok, "id");
        const char *s;
        size_t n;
        if (!token_string(tok, &s, &n) || !idv || idv->type != JSON_NUMBER || !idv->is_integer || idv->integer < 0 ||
            idv->integer >= TPK_MAX_ID) {
            tpk_errf(b, "%s/tokenizer.json: added_tokens[%zu] needs a content and an id", b->dir, i);
            goto done;
        }
        if (check_strip_flags(b, "tokenizer.json", tok, s)) goto done;
        int special = json_flag(tok, "special", 0);
        tpk_added_put(b, s, n, (int32_t)idv->integer, special, json_flag(tok, "normalized", !special));
    }
    /* the eos token is not in tokenizer.json; CodeGen's is <|endoftext|> */
    if (tpk_added_find(b, "<|endoftext|>", 13)) {
        *eos = tp_strdup("<|endoftext|>");
        *eos_len = 13;
    }
    rc = 0;
done:
    b->docs[1] = root;
    return rc;
}

/* ---- the tables ---- */

static void trie_init(tpk_trie *tr) {
    memset(tr, 0, sizeof *tr);
    for (int i = 0; i < 256; i++) tr->root[i] = -1;
}

static int32_t trie_node(tpk_trie *tr, uint8_t byte) {
    if (tr->n == tr->cap) {
        tr->cap = tr->cap ? 2 * tr->cap : 64;
        tr->child = tp_realloc(tr->child, (size_t)tr->cap * sizeof *tr->child);
        tr->sibling = tp_realloc(tr->sibling, (size_t)tr->cap * sizeof *tr->sibling);
        tr->byte = tp_realloc(tr->byte, (size_t)tr->cap * sizeof *tr->byte);
        tr->id = tp_realloc(tr->id, (size_t)tr->cap * sizeof *tr->id);
    }
    int32_t k = tr->n++;
    tr->child[k] = tr->sibling[k] = tr->id[k] = -1;
    tr->byte[k] = byte;
    return k;
}

static void trie_insert(tpk_trie *tr, const uint8_t *s, size_t n, int32_t id) {
    if (n == 0) return;
    int32_t node = tr->root[s[0]];
    if (node < 0) node = tr->root[s[0]] = trie_node(tr, s[0]);
    for (size_t i = 1; i < n; i++) {
        int32_t c = tr->child[node];
        while (c >= 0 && tr->byte[c] != s[i]) c = tr->sibling[c];
        if (c < 0) {
            c = trie_node(tr, s[i]);
            tr->sibling[c] = tr->child[node];
            tr->child[node] = c;
        }
        node = c;
    }
    tr->id[node] = id;
}

static void trie_free(tpk_trie *tr) {
    free(tr->child);
    free(tr->sibling);
    free(tr->byte);
    free(tr->id);
}

static void merge_insert(tp_tokenizer *t, int32_t left, int32_t right, uint32_t rank, int32_t merged) {
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    uint32_t i = (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> t->merge_shift);
    while (t->merge_keys[i] != UINT64_MAX && t->merge_keys[i] != key) i = (i + 1) & t->merge_mask;
    t->merge_keys[i] = key; /* a repeated merge keeps its last rank, as HF's map does */
    t->merge_vals[i] = (uint64_t)rank << 32 | (uint32_t)merged;
}

/* The merges of merges.txt or tokenizer.json in rank order: (left id, right id) -> (rank, merged id). */
static int file_merges(tp_tokenizer *t, builder *b) {
    uint32_t bits;
    uint32_t cap = pow2_at_least((size_t)b->n_merges * 2 + 1, &bits);
    t->merge_mask = cap - 1;
    t->merge_shift = 64 - bits;
    t->merge_keys = tp_malloc((size_t)cap * sizeof *t->merge_keys);
    t->merge_vals = tp_malloc((size_t)cap * sizeof *t->merge_vals);
    memset(t->merge_keys, 0xFF, (size_t)cap * sizeof *t->merge_keys);
    t->n_merges = b->n_merges;
    uint8_t *tmp = tp_malloc(4096);
    size_t tmp_cap = 4096;
    for (int m = 0; m < b->n_merges; m++) {
        size_t need = b->mleft_len[m] + b->mright_len[m];
        if (need > tmp_cap) tmp = tp_realloc(tmp, tmp_cap = need);
        size_t ln, rn;
        int bad = 0; /* 1 left, 2 right, 3 the merged token is missing */
        int32_t l = -1, r = -1, mid = -1;
        if (!tpk_alpha_decode(b->mleft[m], b->mleft_len[m], tmp, &ln) || (l = tpk_vocab_lookup(t, tmp, ln)) < 0) bad = 1;
        else if (!tpk_alpha_decode(b->mright[m], b->mright_len[m], tmp + ln, &rn) ||
                 (r = tpk_vocab_lookup(t, tmp + ln, rn)) < 0)
            bad = 2;
        else if ((mid = tpk_vocab_lookup(t, tmp, ln + rn)) < 0) bad = 3;
        if (bad) {
            int lw = (int)(b->mleft_len[m] > 40 ? 40 : b->mleft_len[m]);
            int rw = (int)(b->mright_len[m] > 40 ? 40 : b->mright_len[m]);
            const char *which = bad == 1 ? "its left token" : bad == 2 ? "its right token" : "the merged token";
            if (strcmp(b->merges_file, "merges.txt") == 0)
                tpk_errf(b, "%s/merges.txt:%d: merge \"%.*s %.*s\": %s is not in vocab.json", b->dir, b->mline[m], lw,
                     b->mleft[m], rw, b->mright[m], which);
            else
                tpk_errf(b, "%s/tokenizer.json: model.merges[%d] \"%.*s %.*s\": %s is not in model.vocab", b->dir,
                     b->mline[m], lw, b->mleft[m], rw, b->mright[m], which);
            free(tmp);
            return -1;
        }
        merge_insert(t, l, r, (uint32_t)m, mid);
    }
    free(tmp);
    return 0;
}

/* tiktoken's BPE merges the adjacent pair whose concatenated bytes have the lowest rank (a
 * GPT-2 token's rank is its id), whether or not a merge rule made that token from those two
 * parts. As a merge table: every split of every token into two tokens, ranked by the token's id
 * (CodeGen2.5's whitespace runs included: 31 spaces, rank 50257, merge before 2, rank 50286). */
static void tiktoken_merges(tp_tokenizer *t) {
    size_t splits = 0; /* the splits into two tokens (CodeGen2.5: 108,800 of 271,059 cuts): the table's size */
    for (int32_t e = 0; e < t->n_vocab; e++) {
        const tpk_vocab_ent *v = &t->vocab_ent[e];
        for (uint32_t cut = 1; cut < v->len; cut++)
            splits += tpk_vocab_lookup(t, t->vocab_keys + v->off, cut) >= 0 &&
                      tpk_vocab_lookup(t, t->vocab_keys + v->off + cut, v->len - cut) >= 0;
    }
    uint32_t bits;
    uint32_t cap = pow2_at_least(splits * 2 + 1, &bits);
    t->merge_mask = cap - 1;
    t->merge_shift = 64 - bits;
    t->merge_keys = tp_malloc((size_t)cap * sizeof *t->merge_keys);
    t->merge_vals = tp_malloc((size_t)cap * sizeof *t->merge_vals);
    memset(t->merge_keys, 0xFF, (size_t)cap * sizeof *t->merge_keys);
    t->n_merges = 0;
    for (int32_t e = 0; e < t->n_vocab; e++) {
        const tpk_vocab_ent *v = &t->vocab_ent[e];
        const uint8_t *k = t->vocab_keys + v->off;
        for (uint32_t cut = 1; cut < v->len; cut++) {
            int32_t l = tpk_vocab_lookup(t, k, cut), r = tpk_vocab_lookup(t, k + cut, v->len - cut);
            if (l < 0 || r < 0) continue;
            merge_insert(t, l, r, (uint32_t)v->id, v->id);
            t->n_merges++;
        }
    }
}

static int build_tables(tp_tokenizer *t, builder *b, const char *eos, size_t eos_len) {
    int32_t n_ids = b->max_id + 1;
    t->n_ids = n_ids;
    t->eos_id = -1;

    /* decode bytes of every id: an added token's content, else its vocab string; HF's ByteLevel
     * decoder maps a token whose characters are all in the alphabet to bytes, any other token
     * keeps its own UTF-8 bytes (CodeGen's space runs are such tokens). */
    const char **str = tp_calloc((size_t)n_ids, sizeof *str);
    size_t *slen = tp_calloc((size_t)n_ids, sizeof *slen);
    t->tok_flags = tp_calloc((size_t)n_ids, 1);
    size_t total = 0;
    for (int32_t i = 0; i < n_ids && i < b->vcap; i++)
        if (b->vstr[i]) str[i] = b->vstr[i], slen[i] = b->vlen[i], t->tok_flags[i] = TPK_TOK_PRESENT;
    for (int i = 0; i < b->n_added; i++) {
        added_tok *a = &b->added[i];
        str[a->id] = a->content;
        slen[a->id] = a->len;
        t->tok_flags[a->id] = TPK_TOK_PRESENT | TPK_TOK_ADDED | (a->special ? TPK_TOK_SPECIAL : 0) |
                              (a->control ? TPK_TOK_CONTROL : 0);
        if (eos && a->len == eos_len && memcmp(a->content, eos, eos_len) == 0) t->eos_id = a->id;
    }
    for (int32_t i = 0; i < n_ids; i++) total += slen[i];
    t->tok_off = tp_malloc(((size_t)n_ids + 1) * sizeof *t->tok_off);
    t->tok_bytes = tp_malloc(total + 1);
    size_t off = 0;
    for (int32_t i = 0; i < n_ids; i++) {
        t->tok_off[i] = (uint32_t)off;
        size_t o;
        if (str[i] && tpk_alpha_decode(str[i], slen[i], (uint8_t *)t->tok_bytes + off, &o)) off += o;
        else if (str[i]) {
            memcpy(t->tok_bytes + off, str[i], slen[i]);
            off += slen[i];
        }
    }
    t->tok_off[n_ids] = (uint32_t)off;
    free(str);
    free(slen);

    /* the BPE vocabulary: vocab strings of alphabet characters, as bytes */
    int32_t nv = 0;
    size_t key_total = 0;
    for (int32_t i = 0; i < b->vcap; i++)
        if (b->vstr[i]) nv++, key_total += b->vlen[i];
    t->vocab_ent = tp_malloc((size_t)(nv ? nv : 1) * sizeof *t->vocab_ent);
    t->vocab_keys = tp_malloc(key_total + 1);
    t->vocab_mask = pow2_at_least((size_t)nv * 2, NULL) - 1;
    t->vocab_slots = tp_malloc(((size_t)t->vocab_mask + 1) * sizeof *t->vocab_slots);
    memset(t->vocab_slots, 0xFF, ((size_t)t->vocab_mask + 1) * sizeof *t->vocab_slots);
    size_t koff = 0;
    t->n_vocab = 0;
    for (int32_t i = 0; i < b->vcap; i++) {
        size_t kn;
        if (!b->vstr[i] || !tpk_alpha_decode(b->vstr[i], b->vlen[i], t->vocab_keys + koff, &kn)) continue;
        /* distinct strings of the alphabet are distinct byte strings: no duplicates here */
        uint64_t h = tpk_hash_bytes(t->vocab_keys + koff, kn);
        tpk_vocab_ent *e = &t->vocab_ent[t->n_vocab];
        *e = (tpk_vocab_ent){h, (uint32_t)koff, (uint32_t)kn, i};
        uint32_t s = tpk_slot(h) & t->vocab_mask;
        while (t->vocab_slots[s] >= 0) s = (s + 1) & t->vocab_mask;
        t->vocab_slots[s] = t->n_vocab++;
        koff += kn;
    }
    for (int c = 0; c < 256; c++) {
        uint8_t byte = (uint8_t)c;
        t->byte_id[c] = tpk_vocab_lookup(t, &byte, 1); /* -1: HF drops such a byte silently */
    }

    /* merges: (left id, right id) -> (rank, merged id) */
    if (b->tiktoken) tiktoken_merges(t);
    else if (file_merges(t, b)) return -1;
    t->all_bytes = 1;
    for (int c = 0; c < 256; c++) t->all_bytes &= t->byte_id[c] >= 0;
    t->byte_pairs = tp_malloc(256 * 256 * sizeof *t->byte_pairs);
    for (int l = 0; l < 256; l++)
        for (int r = 0; r < 256; r++) {
            int32_t merged;
            uint32_t rank = t->byte_id[l] < 0 || t->byte_id[r] < 0
                                ? UINT32_MAX
                                : tpk_merge_rank(t, t->byte_id[l], t->byte_id[r], &merged);
            t->byte_pairs[l << 8 | r] = rank == UINT32_MAX ? UINT64_MAX : (uint64_t)rank << 32 | (uint32_t)merged;
        }

    trie_init(&t->trie_raw);
    trie_init(&t->trie_norm);
    trie_init(&t->plain_raw);
    trie_init(&t->plain_norm);
    for (int i = 0; i < b->n_added; i++) {
        added_tok *a = &b->added[i];
        trie_insert(a->normalized ? &t->trie_norm : &t->trie_raw, (const uint8_t *)a->content, a->len, a->id);
        if (!a->control)
            trie_insert(a->normalized ? &t->plain_norm : &t->plain_raw, (const uint8_t *)a->content, a->len, a->id);
    }
    t->cls_block = tpk_class_block;
    t->cls_data = tpk_class_data;
    if (b->tiktoken) {
        t->cls_diff = tpk_tt_class_diff;
        t->n_cls_diff = tpk_tt_class_diff_n;
    }
    if (t->eos_id < 0) { /* fall back to the vocab's <|endoftext|> */
        int32_t id = tpk_vocab_lookup(t, (const uint8_t *)"<|endoftext|>", 13);
        t->eos_id = id;
    }
    return 0;
}

tp_tokenizer *tp_tokenizer_load(const char *dir, char *err, size_t err_size) {
    tpk_alphabet_init();
    builder b = {.dir = dir, .err = err, .err_size = err_size, .max_id = -1};
    if (err && err_size) err[0] = 0;
    /* which tokenizer: tokenizer.json (as HF), vocab.json + merges.txt, or the class that
     * tokenizer_config.json names when there is no vocabulary file (CodeGen2.5) */
    int have_json = dir && tpk_file_exists(dir, "tokenizer.json");
    int have_vocab = dir && tpk_file_exists(dir, "vocab.json") && tpk_file_exists(dir, "merges.txt");
    if (!dir || (!have_json && !have_vocab && !tpk_file_exists(dir, "tokenizer_config.json"))) {
        if (dir && tpk_file_exists(dir, "vocab.json"))
            tpk_errf(&b, "%s/merges.txt: missing (vocab.json needs it; or give a tokenizer.json)", dir);
        else
            tpk_errf(&b, "%s: no tokenizer files (expected tokenizer.json, vocab.json + merges.txt, or a "
                     "tokenizer_config.json naming CodeGen25Tokenizer)", dir ? dir : "(null)");
        return NULL;
    }
    char *eos = NULL;
    size_t eos_len = 0;
    int rc;
    if (have_json) rc = read_tokenizer_json(&b, &eos, &eos_len);
    else if (have_vocab) rc = read_vocab_dir(&b, &eos, &eos_len);
    else {
        char cls[128];
        rc = tpk_codegen25_identify(&b, cls, sizeof cls);
        if (rc == 1) rc = tpk_codegen25_read(&b, &eos, &eos_len);
        else if (rc == 0) {
            /* CodeGen's own classes read vocabulary files, which are not there */
            static const char *const vocab_classes[] = {"CodeGenTokenizer", "CodeGenTokenizerFast", "GPT2Tokenizer",
                                                        "GPT2TokenizerFast", "PreTrainedTokenizerFast"};
            int known = 0;
            for (size_t k = 0; k < sizeof vocab_classes / sizeof *vocab_classes; k++)
                known |= !strcmp(cls, vocab_classes[k]);
            if (known)
                tpk_errf(&b, "%s/tokenizer_config.json: tokenizer_class %s reads tokenizer.json or vocab.json + "
                         "merges.txt, and %s has neither", dir, cls, dir);
            else
                tpk_errf(&b, "%s/tokenizer_config.json: tokenizer_class %s is not a tokenizer tpgen knows, and there "
                         "is no vocabulary file (tpgen reads tokenizer.json, vocab.json + merges.txt, or CodeGen2.5's "
                         "CodeGen25Tokenizer)", dir, cls);
            rc = -1;
        }
    }
    if (rc == 0 && b.max_id < 0) {
        tpk_errf(&b, "%s: the vocabulary is empty", dir);
        rc = -1;
    }
    tp_tokenizer *t = NULL;
    if (rc == 0) {
        t = tp_calloc(1, sizeof *t);
        t->ignore_merges = b.ignore_merges;
        t->bpe_small_max = 128;
        if (build_tables(t, &b, eos, eos_len)) {
            tp_tokenizer_free(t);
            t = NULL;
        } else {
            t->cache = tp_calloc(TPK_CACHE_SLOTS, sizeof *t->cache);
            t->cache_keys = tp_malloc(TPK_CACHE_KEY_BYTES);
            t->cache_ids = tp_malloc(TPK_CACHE_IDS * sizeof *t->cache_ids);
        }
    }
    free(eos);
    builder_free(&b);
    return t;
}

void tp_tokenizer_free(tp_tokenizer *t) {
    if (!t) return;
    free(t->tok_off);
    free(t->tok_bytes);
    free(t->tok_flags);
    free(t->vocab_slots);
    free(t->vocab_ent);
    free(t->vocab_keys);
    free(t->merge_keys);
    free(t->merge_vals);
    free(t->byte_pairs);
    trie_free(&t->trie_raw);
    trie_free(&t->trie_norm);
    trie_free(&t->plain_raw);
    trie_free(&t->plain_norm);
    free(t->cache);
    free(t->cache_keys);
    free(t->cache_ids);
    free(t->scratch);
    free(t);
}

int tp_tokenizer_vocab_size(const tp_tokenizer *t) { return t->n_ids; }

size_t tp_tokenizer_max_token_bytes(const tp_tokenizer *t) {
    size_t most = 1;
    for (int32_t i = 0; i < t->n_ids; i++)
        if (t->tok_off[i + 1] - t->tok_off[i] > most) most = t->tok_off[i + 1] - t->tok_off[i];
    return most;
}

const char *tp_tokenizer_token_bytes(const tp_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_ids || !(t->tok_flags[id] & TPK_TOK_PRESENT)) return NULL;
    *len = t->tok_off[id + 1] - t->tok_off[id];
    return t->tok_bytes + t->tok_off[id];
}

int tp_tokenizer_is_special(const tp_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_ids && (t->tok_flags[id] & TPK_TOK_SPECIAL);
}

int32_t tp_tokenizer_eos_id(const tp_tokenizer *t) { return t->eos_id; }
