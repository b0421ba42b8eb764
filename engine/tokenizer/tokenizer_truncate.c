/* CodeGen's truncate_before_pattern (CodeGenTokenizer.truncate in transformers): cut a completion
 * before a second top-level `print`, before a second top-level `def`, then before the earliest
 * match of any pattern. Patterns are Python `re` patterns compiled with re.MULTILINE; here they are
 * PCRE2 patterns with the options that make PCRE2 behave like Python on them: multiline, '^'
 * also after a final newline (PCRE2_ALT_CIRCUMFLEX), only '\n' ends a line, Unicode classes. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <string.h>

#include "tokenizer_internal.h"

static pcre2_code *compile(const char *pattern, char *err, size_t err_size) {
    pcre2_compile_context *cc = pcre2_compile_context_create(NULL);
    if (!cc) {
        if (err && err_size) snprintf(err, err_size, "pcre2_compile_context_create failed (%s:%d)", __FILE__, __LINE__);
        return NULL;
    }
    pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
    int code;
    PCRE2_SIZE off;
    uint32_t opts = PCRE2_MULTILINE | PCRE2_ALT_CIRCUMFLEX | PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, opts, &code, &off, cc);
    pcre2_compile_context_free(cc);
    if (!re && err && err_size) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        snprintf(err, err_size, "truncate pattern \"%s\" at offset %zu: %s", pattern, (size_t)off, (char *)msg);
    }
    return re;
}

int tp_tokenizer_truncate_check(const char *const *patterns, int n_patterns, char *err, size_t err_size) {
    for (int i = 0; i < n_patterns; i++) {
        pcre2_code *re = compile(patterns[i], err, err_size);
        if (!re) return -1;
        pcre2_code_free(re);
    }
    return 0;
}

/* start of the second line of s[0, len) that begins with word, or len */
static size_t second_line_start(const char *s, size_t len, const char *word) {
    size_t wl = strlen(word);
    int seen = 0;
    for (size_t p = 0; p + wl <= len; p++) {
        if ((p == 0 || s[p - 1] == '\n') && memcmp(s + p, word, wl) == 0 && ++seen == 2) return p;
        const char *nl = memchr(s + p, '\n', len - p); /* jump to the next line */
        if (!nl) break;
        p = (size_t)(nl - s);
    }
    return len;
}

size_t tp_tokenizer_truncate(const char *completion, size_t len, const char *const *patterns, int n_patterns) {
    if (n_patterns <= 0) return len; /* as CodeGen's decode: no patterns, no truncation at all */
    size_t keep = second_line_start(completion, len, "print");
    keep = second_line_start(completion, keep, "def");
    size_t best = keep;
    for (int i = 0; i < n_patterns; i++) {
        pcre2_code *re = compile(patterns[i], NULL, 0);
        if (!re) continue; /* tp_tokenizer_truncate_check reports these */
        pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
        if (md && pcre2_match(re, (PCRE2_SPTR)completion, keep, 0, 0, md, NULL) >= 0) {
            size_t start = pcre2_get_ovector_pointer(md)[0];
            if (start < best) best = start;
        }
        pcre2_match_data_free(md);
        pcre2_code_free(re);
    }
    return best;
}
