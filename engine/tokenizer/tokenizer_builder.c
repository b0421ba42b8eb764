/* The builder's helpers (tokenizer_builder.h): what every tokenizer format's reader
 * (tokenizer_load.c for HF's files, tokenizer_codegen25.c for CodeGen2.5's) fills the builder
 * with, before tokenizer_load.c makes the tables; and GPT-2's byte <-> unicode alphabet. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/json.h"
#include "util/log.h"
#include "tokenizer_builder.h"

/* ---- GPT-2's byte <-> unicode alphabet ----
 * vocab.json and merges.txt spell bytes as visible characters: the printable Latin-1 bytes
 * ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) stand for themselves, the other 68 bytes are U+0100.. in
 * byte order (so ' ' is 'Ġ' U+0120 and '\n' is 'Ċ' U+010A). */
#define TPK_ALPHA_CPS 324
static int16_t g_cp_byte[TPK_ALPHA_CPS]; /* code point -> byte, -1 when not in the alphabet */

void tpk_alphabet_init(void) {
    static int done;
    if (done) return;
    int n = 0;
    for (int i = 0; i < TPK_ALPHA_CPS; i++) g_cp_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        g_cp_byte[printable ? b : 256 + n++] = (int16_t)b;
    }
    done = 1;
}

int tpk_alpha_char(uint8_t c, char out[2]) {
    static uint16_t cp_of[256]; /* byte -> its alphabet code point */
    static int done;
    if (!done) {
        tpk_alphabet_init();
        for (int cp = 0; cp < TPK_ALPHA_CPS; cp++)
            if (g_cp_byte[cp] >= 0) cp_of[g_cp_byte[cp]] = (uint16_t)cp;
        done = 1;
    }
    unsigned cp = cp_of[c];
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/* Maps a string of alphabet characters to its bytes (out has room for n bytes); 0 when some
 * character is not in the alphabet (then HF's ByteLevel decoder keeps the string's own bytes). */
int tpk_alpha_decode(const char *s, size_t n, uint8_t *out, size_t *out_n) {
    const uint8_t *u = (const uint8_t *)s;
    size_t i = 0, o = 0;
    while (i < n) {
        uint32_t cp;
        if (u[i] < 0x80) cp = u[i++];
        else if ((u[i] & 0xE0) == 0xC0 && i + 1 < n) {
            cp = (uint32_t)(u[i] & 0x1F) << 6 | (u[i + 1] & 0x3F);
            i += 2;
        } else return 0; /* 3- and 4-byte characters are all beyond U+0143 */
        if (cp >= TPK_ALPHA_CPS || g_cp_byte[cp] < 0) return 0;
        out[o++] = (uint8_t)g_cp_byte[cp];
    }
    *out_n = o;
    return 1;
}

void tpk_errf(builder *b, const char *fmt, ...) {
    if (!b->err || !b->err_size) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->err, b->err_size, fmt, ap);
    va_end(ap);
}

void tpk_path_join(char *out, size_t size, const char *dir, const char *name) {
    snprintf(out, size, "%s/%s", dir, name);
}

int tpk_file_exists(const char *dir, const char *name) {
    char p[4096];
    tpk_path_join(p, sizeof p, dir, name);
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Reads and parses DIR/name; NULL with the reason in err. */
json_value *tpk_read_json(builder *b, const char *name) {
    char p[4096], jerr[256];
    tpk_path_join(p, sizeof p, b->dir, name);
    size_t len;
    char *text = tp_read_file(p, &len);
    if (!text) {
        tpk_errf(b, "%s: %s", p, strerror(errno));
        return NULL;
    }
    json_value *v = json_parse(text, len, jerr, sizeof jerr);
    free(text);
    if (!v) tpk_errf(b, "%s: %s", p, jerr);
    return v;
}

int tpk_vocab_put(builder *b, const char *file, const char *s, size_t n, long long id64) {
    if (id64 < 0 || id64 >= TPK_MAX_ID) {
        tpk_errf(b, "%s: token \"%.40s\" has id %lld, expected an integer in [0, %d)", file, s, id64, TPK_MAX_ID);
        return -1;
    }
    int32_t id = (int32_t)id64;
    if (id >= b->vcap) {
        int32_t c = b->vcap ? b->vcap : 1024;
        while (c <= id) c *= 2;
        b->vstr = tp_realloc(b->vstr, (size_t)c * sizeof *b->vstr);
        b->vlen = tp_realloc(b->vlen, (size_t)c * sizeof *b->vlen);
        for (int32_t i = b->vcap; i < c; i++) b->vstr[i] = NULL, b->vlen[i] = 0;
        b->vcap = c;
    }
    if (b->vstr[id]) {
        tpk_errf(b, "%s/%s: id %d is given to both \"%.40s\" and \"%.40s\"", b->dir, file, id, b->vstr[id], s);
        return -1;
    }
    b->vstr[id] = s;
    b->vlen[id] = n;
    if (id > b->max_id) b->max_id = id;
    return 0;
}

int32_t tpk_vocab_find(const builder *b, const char *s, size_t n) {
    for (int32_t i = 0; i < b->vcap; i++)
        if (b->vstr[i] && b->vlen[i] == n && memcmp(b->vstr[i], s, n) == 0) return i;
    return -1;
}

added_tok *tpk_added_find(builder *b, const char *s, size_t n) {
    for (int i = 0; i < b->n_added; i++)
        if (b->added[i].len == n && memcmp(b->added[i].content, s, n) == 0) return &b->added[i];
    return NULL;
}

void tpk_added_put(builder *b, const char *s, size_t n, int32_t id, int special, int normalized) {
    added_tok *a = tpk_added_find(b, s, n);
    if (!a) {
        if (b->n_added == b->cap_added) {
            b->cap_added = b->cap_added ? 2 * b->cap_added : 64;
            b->added = tp_realloc(b->added, (size_t)b->cap_added * sizeof *b->added);
        }
        a = &b->added[b->n_added++];
        a->content = tp_malloc(n + 1);
        memcpy(a->content, s, n);
        a->content[n] = 0;
        a->len = n;
        a->id = -1;
    }
    if (id < 0 && a->id < 0) id = tpk_vocab_find(b, s, n);
    if (id < 0 && a->id < 0) id = b->max_id + 1; /* HF appends a token the vocab lacks */
    if (id >= 0) a->id = id;
    if (a->id > b->max_id) b->max_id = a->id;
    a->special = a->control = special;
    a->normalized = normalized;
}
