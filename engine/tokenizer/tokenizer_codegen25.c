/* CodeGen2.5's tokenizer, as its checkpoint publishes it: tokenizer_config.json names
 * tokenizer_class CodeGen25Tokenizer (auto_map: its tokenization_codegen25.py) and there is no
 * vocabulary file. That code builds a tiktoken Encoding from tiktoken's "gpt2" (GPT-2's mergeable
 * ranks and pattern, <|endoftext|> = 50256), numbering on from 50257:
 *   - as MERGEABLE RANKS (`bpe_ranks[bytes(run)] = idx`, ordinary BPE tokens): space runs of
 *     31..2 (50257..50286), tab runs of 9..2 (50287..50294);
 *   - as special tokens: StarCoder's 18 FIM and metadata tokens, <dummy_0..3>, <sep>, <eom>,
 *     <mask_881>..<mask_1> (50295..51199): 51,200 ids.
 * The runs are mergeable, not special, as tiktoken's maintainer advised its author (tiktoken issue
 * #102) and as XGen-7B's identical tokenization_xgen.py still shows by its `bpe_ranks` name; so
 * "\n    return" is "\n", the 3-space token, " return", and no tiktoken release's order of
 * overlapping special tokens matters (the remaining special tokens never overlap).
 * tpgen never runs that file; it builds the same encoding here, with GPT-2's ranks from the data
 * file tpgen ships (engine/tokenizer/data/gpt2.tiktoken, tools/fixtures/make.py tokenizer-codegen25 says where it
 * came from). docs/TOKENIZER.md has the details. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/log.h"
#include "tokenizer_builder.h"

#define GPT2_RANKS "gpt2.tiktoken"
#define GPT2_N_RANKS 50256 /* ids 0..50255; <|endoftext|> (50256) is a special token */
#define MAX_SPACE_RUN 31    /* runs of 31..2 spaces are ranks 50257..50286 */
#define MAX_TAB_RUN 9       /* runs of 9..2 tabs are ranks 50287..50294 */
/* the runs in the GPT-2 alphabet (each space or tab 2 bytes): 2 * (2 + .. + 31 + 2 + .. + 9) */
#define RUN_ALPHA_BYTES \
    (2 * ((MAX_SPACE_RUN * (MAX_SPACE_RUN + 1) / 2 - 1) + (MAX_TAB_RUN * (MAX_TAB_RUN + 1) / 2 - 1)))

static const char *const g_fim[] = {"<fim_prefix>",    "<fim_middle>",    "<fim_suffix>",   "<fim_pad>",
                                    "<filename>",      "<gh_stars>",      "<issue_start>",  "<issue_comment>",
                                    "<issue_closed>",  "<jupyter_start>", "<jupyter_text>", "<jupyter_code>",
                                    "<jupyter_output>", "<empty_output>", "<commit_before>", "<commit_msg>",
                                    "<commit_after>",  "<reponame>"};

int tpk_codegen25_identify(builder *b, char *cls, size_t cls_size) {
    json_value *cfg = tpk_read_json(b, "tokenizer_config.json");
    if (!cfg) return -1;
    const json_value *c = cfg->type == JSON_OBJECT ? json_get(cfg, "tokenizer_class") : NULL;
    snprintf(cls, cls_size, "%s", c && c->type == JSON_STRING ? c->str : "(none)");
    json_free(cfg);
    return strcmp(cls, "CodeGen25Tokenizer") == 0;
}

/* Where the ranks are: $TPGEN_DATA_DIR when set (only there: a folder the user names is not
 * passed over), else beside the executable as installed (BIN/../share/tpgen/) or as built (the
 * build tree's share/tpgen/), then the source tree. The first that exists is used; *tried lists
 * the others for the message. */
static int find_ranks(char *out, size_t size, char *tried, size_t tried_size) {
    char cands[4][PATH_MAX];
    int n = 0;
    const char *env = getenv("TPGEN_DATA_DIR");
    if (env && *env) snprintf(cands[n++], PATH_MAX, "%.*s/" GPT2_RANKS, PATH_MAX - 20, env);
    char exe[PATH_MAX];
    ssize_t len = n ? 0 : readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            snprintf(cands[n++], PATH_MAX, "%.*s/../share/tpgen/" GPT2_RANKS, PATH_MAX - 40, exe);
        }
    }
#ifdef TPGEN_TOKENIZER_DATA_DIR
    if (!env || !*env) snprintf(cands[n++], PATH_MAX, "%s/" GPT2_RANKS, TPGEN_TOKENIZER_DATA_DIR);
#endif
    tried[0] = 0;
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (stat(cands[i], &st) == 0 && S_ISREG(st.st_mode)) {
            if ((size_t)snprintf(out, size, "%.*s", PATH_MAX - 1, cands[i]) >= size) return -1;
            return 0;
        }
        size_t used = strlen(tried);
        snprintf(tried + used, tried_size - used, "%s%s", used ? ", " : "", cands[i]);
    }
    return -1;
}

static int b64_value(int c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Standard base64 (with '=' padding) of [s, s + n) into out (room for 3n/4 bytes); the length,
 * or -1 when it is not base64. */
static long b64_decode(const char *s, size_t n, uint8_t *out) {
    if (n == 0 || n % 4) return -1;
    long o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            if (s[i + k] == '=' && i + 4 == n && k >= 2) {
                v[k] = 0;
                pad++;
            } else if (pad || (v[k] = b64_value((unsigned char)s[i + k])) < 0) return -1;
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        out[o++] = (uint8_t)(w >> 16);
        if (pad < 2) out[o++] = (uint8_t)(w >> 8);
        if (pad < 1) out[o++] = (uint8_t)w;
    }
    return o;
}

/* 1 when tok[0, k) is a run of 2.. spaces or tabs that CodeGen2.5 ranks itself */
static int is_own_run(const uint8_t *tok, long k) {
    if (k < 2 || (tok[0] != ' ' && tok[0] != '\t') || k > (tok[0] == ' ' ? MAX_SPACE_RUN : MAX_TAB_RUN)) return 0;
    for (long i = 1; i < k; i++)
        if (tok[i] != tok[0]) return 0;
    return 1;
}

/* The decimal number [p, e) (1 to 9 digits, nothing else), or -1. Not strtol: it reads the
 * string to its NUL, the rest of the file, and under ASan's strict_string_checks (CI) checks all
 * of it on each of the 50,257 lines: 6.7 s a tokenizer load (0.2 s without). */
static long rank_digits(const char *p, const char *e) {
    if (p >= e || e - p > 9) return -1;
    long v = 0;
    for (; p < e; p++) {
        if (*p < '0' || *p > '9') return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

/* GPT-2's ranks, "BASE64 RANK" a line, into b's vocab as GPT-2 alphabet strings (the form
 * vocab.json has), so the rest of the loader treats them as any GPT-2 vocabulary; b->owned keeps
 * RUN_ALPHA_BYTES free after the *used bytes the ranks take, for the whitespace runs. */
static int read_ranks(builder *b, const char *path, size_t *used_out) {
    size_t len;
    char *text = tp_read_file(path, &len);
    if (!text) {
        tpk_errf(b, "%s: %s (GPT-2's BPE ranks, which CodeGen2.5's tokenizer is built from)", path, strerror(errno));
        return -1;
    }
    /* each decoded byte is at most 2 alphabet bytes: 3/4 * 2 per input byte */
    b->owned = tp_malloc(len * 2 + 1 + RUN_ALPHA_BYTES);
    size_t used = 0;
    int line = 0, rc = 0, n = 0;
    uint8_t tok[1024];
    for (char *s = text, *end = text + len; s < end && rc == 0;) {
        char *nl = memchr(s, '\n', (size_t)(end - s));
        char *e = nl ? nl : end;
        line++;
        char *sp = memchr(s, ' ', (size_t)(e - s));
        const long rank = sp ? rank_digits(sp + 1, e) : -1;
        long k = sp && (size_t)(sp - s) <= sizeof tok * 4 / 3 ? b64_decode(s, (size_t)(sp - s), tok) : -1;
        if (!sp || k <= 0 || rank != n) {
            tpk_errf(b, "%s:%d: expected \"BASE64 %d\" (a token and its rank, ranks in order from 0), found \"%.*s\"",
                     path, line, n, (int)((e - s) > 60 ? 60 : (e - s)), s);
            rc = -1;
            break;
        }
        if (is_own_run(tok, k)) { /* tiktoken would give it CodeGen2.5's rank and leave rank n empty */
            tpk_errf(b, "%s:%d: a run of %ld %s, which is not a GPT-2 token: CodeGen2.5 ranks those runs itself "
                     "(from 50257)", path, line, k, tok[0] == ' ' ? "spaces" : "tabs");
            rc = -1;
            break;
        }
        char *str = b->owned + used;
        for (long i = 0; i < k; i++) used += (size_t)tpk_alpha_char(tok[i], b->owned + used);
        rc = tpk_vocab_put(b, path, str, (size_t)(b->owned + used - str), rank);
        n++;
        s = nl ? nl + 1 : end;
    }
    free(text);
    if (rc == 0 && n != GPT2_N_RANKS) {
        tpk_errf(b, "%s: %d ranks, GPT-2 has %d", path, n, GPT2_N_RANKS);
        rc = -1;
    }
    *used_out = used;
    return rc;
}

/* The runs of c (' ' or '\t') from max down to 2 as mergeable ranks from *id on: vocab strings
 * in the GPT-2 alphabet at b->owned + *used, as read_ranks puts GPT-2's. */
static int put_runs(builder *b, const char *path, uint8_t c, int max, int32_t *id, size_t *used) {
    for (int n = max; n >= 2; n--) {
        char *str = b->owned + *used;
        for (int i = 0; i < n; i++) *used += (size_t)tpk_alpha_char(c, b->owned + *used);
        if (tpk_vocab_put(b, path, str, (size_t)(b->owned + *used - str), (*id)++)) return -1;
    }
    return 0;
}

/* one special token of tiktoken's encoding at id: a control token (plain-text encoding leaves its
 * name as text), not one of HF's special ids (decode(skip_special_tokens=True) keeps it) */
static void special(builder *b, const char *s, size_t n, int32_t id) {
    tpk_added_put(b, s, n, id, 0, 0);
    tpk_added_find(b, s, n)->control = 1;
}

int tpk_codegen25_read(builder *b, char **eos, size_t *eos_len) {
    char path[PATH_MAX], tried[4 * PATH_MAX + 16];
    if (find_ranks(path, sizeof path, tried, sizeof tried)) {
        tpk_errf(b, "%s/tokenizer_config.json: CodeGen25Tokenizer is built from GPT-2's BPE ranks, " GPT2_RANKS
                 ", which tpgen ships and did not find (tried %s); set TPGEN_DATA_DIR to the folder holding it "
                 "(tpgen's engine/tokenizer/data/)",
                 b->dir, tried);
        return -1;
    }
    size_t used;
    if (read_ranks(b, path, &used)) return -1;
    b->tiktoken = 1;
    b->ignore_merges = 1; /* tiktoken: a piece that is a token is that token */
    /* <|endoftext|>: HF's eos and pad, the one id decode(skip_special_tokens=True) drops */
    tpk_added_put(b, "<|endoftext|>", 13, 50256, 1, 0);
    /* the whitespace runs: mergeable ranks after GPT-2's, as the published code adds them */
    int32_t id = 50257;
    if (put_runs(b, path, ' ', MAX_SPACE_RUN, &id, &used) || put_runs(b, path, '\t', MAX_TAB_RUN, &id, &used))
        return -1;
    char name[32];
    for (size_t i = 0; i < sizeof g_fim / sizeof *g_fim; i++) special(b, g_fim[i], strlen(g_fim[i]), id++);
    for (int i = 0; i < 4; i++) special(b, name, (size_t)snprintf(name, sizeof name, "<dummy_%d>", i), id++);
    special(b, "<sep>", 5, id++);
    special(b, "<eom>", 5, id++);
    for (int i = 881; i >= 1; i--) special(b, name, (size_t)snprintf(name, sizeof name, "<mask_%d>", i), id++);
    if (id != 51200) { /* the published layout: <sep> 50317, <eom> 50318, <mask_1> 51199 */
        tpk_errf(b, "internal error: CodeGen2.5's special tokens end at %d, not 51200", id);
        return -1;
    }
    *eos = tp_strdup("<|endoftext|>");
    *eos_len = 13;
    return 0;
}
