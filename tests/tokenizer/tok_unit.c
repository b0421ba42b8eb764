/* Unit tests: finding and loading tokenizer files (and the errors when they are broken), token
 * facts against the files themselves, invalid input, stop strings against a plain search. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/log.h"
#include "tok_test.h"
#include "tests/common/check.h"


static char g_tmp[480];

/* a fresh directory with the given files (name, content pairs, NULL-terminated) */
static const char *make_dir(const char *name, const char *const *files) {
    static char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", g_tmp, name);
    mkdir(dir, 0755);
    for (int i = 0; files[i]; i += 2) tt_write_file(dir, files[i], files[i + 1]);
    return dir;
}

/* loading must fail with a message containing each of want[] */
static void expect_load_error(const char *dir, const char *const *want) {
    char err[1024] = "";
    tp_tokenizer *t = tp_tokenizer_load(dir, err, sizeof err);
    CHECK(t == NULL, "loading %s should fail", dir);
    tp_tokenizer_free(t);
    for (int i = 0; want[i]; i++) CHECK(strstr(err, want[i]) != NULL, "message \"%s\" lacks \"%s\"", err, want[i]);
}

static const char *TINY_VOCAB = "{\"a\": 0, \"b\": 1, \"ab\": 2, \"\\u0120\": 3}";

static void test_loading(const char *codegen_dir, const char *small_dir) {
    CHECK(tp_tokenizer_present(codegen_dir) == 1, "%s", codegen_dir);
    CHECK(tp_tokenizer_present(small_dir) == 1, "%s", small_dir);
    CHECK(tp_tokenizer_present("/nonexistent-tpgen-dir") == 0, "nonexistent");
    const char *only_vocab = make_dir("only_vocab", (const char *[]){"vocab.json", TINY_VOCAB, NULL});
    CHECK(tp_tokenizer_present(only_vocab) == 0, "vocab.json alone is not a tokenizer");
    expect_load_error("/nonexistent-tpgen-dir", (const char *[]){"/nonexistent-tpgen-dir", "vocab.json", NULL});
    expect_load_error(only_vocab, (const char *[]){"only_vocab", "merges.txt", NULL});
    expect_load_error(make_dir("bad_json", (const char *[]){"vocab.json", "{\"a\": 0,\n \"b\" 1}", "merges.txt", "", NULL}),
                      (const char *[]){"vocab.json", "line 2", NULL});
    expect_load_error(make_dir("bad_id", (const char *[]){"vocab.json", "{\"a\": -3}", "merges.txt", "", NULL}),
                      (const char *[]){"vocab.json", "\"a\"", NULL});
    expect_load_error(make_dir("dup_id", (const char *[]){"vocab.json", "{\"a\": 0, \"b\": 0}", "merges.txt", "", NULL}),
                      (const char *[]){"vocab.json", "id 0", NULL});
    expect_load_error(make_dir("bad_merge", (const char *[]){"vocab.json", TINY_VOCAB, "merges.txt",
                                                              "#version: 0.2\na b\na c\n", NULL}),
                      (const char *[]){"merges.txt:3", "\"a c\": its right token", NULL});
    expect_load_error(make_dir("bad_merge_line", (const char *[]){"vocab.json", TINY_VOCAB, "merges.txt",
                                                                   "#version: 0.2\na b c\n", NULL}),
                      (const char *[]){"merges.txt:2", "two tokens", NULL});
    expect_load_error(make_dir("bad_added", (const char *[]){"vocab.json", TINY_VOCAB, "merges.txt", "a b\n",
                                                              "added_tokens.json", "{\"xx\": \"7\"}", NULL}),
                      (const char *[]){"added_tokens.json", "xx", NULL});
    const char *tj_norm = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"normalizer\": "
                          "{\"type\": \"NFC\"}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"decoder\": {\"type\": \"ByteLevel\"}}";
    expect_load_error(make_dir("tj_norm", (const char *[]){"tokenizer.json", tj_norm, NULL}),
                      (const char *[]){"tokenizer.json", "normalizer", NULL});
    const char *tj_model = "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}, \"pre_tokenizer\": "
                           "{\"type\": \"ByteLevel\"}, \"decoder\": {\"type\": \"ByteLevel\"}}";
    expect_load_error(make_dir("tj_model", (const char *[]){"tokenizer.json", tj_model, NULL}),
                      (const char *[]){"tokenizer.json", "WordPiece", NULL});
    const char *tj_strip = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": "
                           "{\"type\": \"ByteLevel\"}, \"decoder\": {\"type\": \"ByteLevel\"}, \"added_tokens\": "
                           "[{\"id\": 1, \"content\": \"<x>\", \"lstrip\": true}]}";
    expect_load_error(make_dir("tj_strip", (const char *[]){"tokenizer.json", tj_strip, NULL}),
                      (const char *[]){"tokenizer.json", "lstrip", NULL});
    /* a well-formed tiny tokenizer loads, and the merges line of both formats is accepted */
    const char *tj_ok = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": "
                        "[\"a b\"]}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"decoder\": {\"type\": \"ByteLevel\"}}";
    char err[512];
    tp_tokenizer *t = tp_tokenizer_load(make_dir("tj_ok", (const char *[]){"tokenizer.json", tj_ok, NULL}), err, sizeof err);
    CHECK(t != NULL, "%s", err);
    if (t) CHECK(tp_tokenizer_vocab_size(t) == 3, "%d", tp_tokenizer_vocab_size(t));
    tp_tokenizer_free(t);
}

/* token facts checked against the tokenizer files themselves */
static void test_facts(const char *codegen_dir) {
    tp_tokenizer *t = tt_load(codegen_dir);
    char p[1024];
    snprintf(p, sizeof p, "%s/added_tokens.json", codegen_dir);
    size_t len;
    char *text = tp_read_file(p, &len), err[256];
    json_value *added = json_parse(text, len, err, sizeof err);
    CHECK(added && added->type == JSON_OBJECT, "%s", p);
    snprintf(p, sizeof p, "%s/vocab.json", codegen_dir);
    char *vtext = tp_read_file(p, &len);
    json_value *vocab = json_parse(vtext, len, err, sizeof err);
    CHECK(vocab && vocab->type == JSON_OBJECT, "%s", p);
    CHECK(tp_tokenizer_vocab_size(t) == (int)(vocab->n + added->n), "vocab size %d, files have %zu + %zu",
          tp_tokenizer_vocab_size(t), vocab->n, added->n);
    for (size_t i = 0; i < added->n; i++) {
        int32_t id = (int32_t)added->items[i].integer;
        size_t n;
        const char *b = tp_tokenizer_token_bytes(t, id, &n);
        CHECK(b && n == added->key_lens[i] && memcmp(b, added->keys[i], n) == 0, "added token %d", id);
        CHECK(!tp_tokenizer_is_special(t, id), "whitespace token %d is not special", id);
    }
    const json_value *eot = json_get(vocab, "<|endoftext|>");
    CHECK(eot && tp_tokenizer_eos_id(t) == eot->integer, "eos id %d", tp_tokenizer_eos_id(t));
    CHECK(tp_tokenizer_is_special(t, tp_tokenizer_eos_id(t)), "<|endoftext|> is special");
    size_t n;
    CHECK(tp_tokenizer_token_bytes(t, tp_tokenizer_vocab_size(t), &n) == NULL, "id past the end");
    CHECK(tp_tokenizer_token_bytes(t, -1, &n) == NULL, "negative id");
    json_free(added);
    json_free(vocab);
    free(text);
    free(vtext);

    /* invalid UTF-8: refused with the offset of the first bad byte */
    static const struct {
        const char *s;
        size_t len, at;
    } bad[] = {{"ab\xff" "cd", 5, 2},        {"\xc0\x80", 2, 0},         {"x\xed\xa0\x80", 4, 1},
               {"abc\xe2\x82", 5, 3},       {"\xf4\x90\x80\x80", 4, 0}, {"ok \x80", 4, 3},
               {"\xe2\x82\xac\xe2(", 5, 3}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int32_t *ids = NULL;
        size_t k = 99;
        char want[64];
        int rc = tp_tokenizer_encode(t, bad[i].s, bad[i].len, &ids, &k, err, sizeof err);
        snprintf(want, sizeof want, "invalid UTF-8 at byte offset %zu ", bad[i].at);
        CHECK(rc == -1 && ids == NULL && k == 0 && strstr(err, want), "case %zu: rc %d, \"%s\"", i, rc, err);
        free(ids);
    }
    /* empty text, empty ids */
    int32_t *ids;
    size_t k;
    CHECK(tp_tokenizer_encode(t, "", 0, &ids, &k, err, sizeof err) == 0 && k == 0, "empty text");
    free(ids);
    char *dec;
    size_t dn;
    CHECK(tp_tokenizer_decode(t, NULL, 0, 0, &dec, &dn, err, sizeof err) == 0 && dn == 0 && dec && dec[0] == 0, "empty");
    free(dec);
    /* ids out of range */
    int32_t out_of_range[] = {15496, tp_tokenizer_vocab_size(t)};
    CHECK(tp_tokenizer_decode(t, out_of_range, 2, 0, &dec, &dn, err, sizeof err) == -1 && strstr(err, "out of range") &&
              strstr(err, "position 1"), "\"%s\"", err);
    int32_t negative = -5;
    CHECK(tp_tokenizer_decode(t, &negative, 1, 0, &dec, &dn, err, sizeof err) == -1 && strstr(err, "-5"), "\"%s\"", err);
    tp_detok_stream *s = tp_detok_stream_new(t, 0);
    char *out = NULL;
    size_t out_len = 0;
    CHECK(tp_detok_stream_push(s, 1 << 20, &out, &out_len) == -1 && out && out_len == 0, "stream out of range");
    tp_detok_stream_free(s);
    free(out);
    /* truncate patterns that are not regexes */
    const char *pats[] = {"^#", "(unclosed"};
    CHECK(tp_tokenizer_truncate_check(pats, 2, err, sizeof err) == -1 && strstr(err, "(unclosed"), "\"%s\"", err);
    CHECK(tp_tokenizer_truncate_check(pats, 1, err, sizeof err) == 0, "\"%s\"", err);
    tp_tokenizer_free(t);
}

/* stop strings: fed in random chunks, the output must be the text up to the first stop found by
 * a plain search over the whole text */
static void test_stop_strings(void) {
    static const char *const stops[] = {"\n\n", "def ", "<|endoftext|>", "ab"};
    static const char *const parts[] = {"x", "y = 1", "\n", "de", "f", " ", "<|endof", "text|>", "a", "b", "é", "😀"};
    uint64_t rng = 12345;
    for (int it = 0; it < 2000; it++) {
        char text[512];
        size_t n = 0;
        int np = 1 + (int)((rng = rng * 6364136223846793005ull + 1442695040888963407ull) >> 33) % 20;
        for (int i = 0; i < np; i++) {
            const char *p = parts[((rng = rng * 6364136223846793005ull + 1442695040888963407ull) >> 33) % 12];
            memcpy(text + n, p, strlen(p));
            n += strlen(p);
        }
        text[n] = 0;
        int n_stops = 1 + it % 4;
        size_t first = n;
        for (int i = 0; i < n_stops; i++) {
            const char *hit = strstr(text, stops[i]);
            if (hit && (size_t)(hit - text) < first) first = (size_t)(hit - text);
        }
        tp_stop_matcher *m = tp_stop_matcher_new(stops, n_stops);
        char *out = NULL;
        size_t out_len = 0, pos = 0;
        int stopped = 0;
        while (pos < n && !stopped) {
            size_t c = 1 + ((rng = rng * 6364136223846793005ull + 1442695040888963407ull) >> 33) % 7;
            if (c > n - pos) c = n - pos;
            stopped = tp_stop_matcher_feed(m, text + pos, c, &out, &out_len);
            pos += c;
        }
        if (!stopped) tp_stop_matcher_finish(m, &out, &out_len);
        tp_stop_matcher_free(m);
        int ok = stopped == (first < n) && out_len == first && memcmp(out, text, first) == 0;
        CHECK(ok, "stop strings on \"%s\": stopped %d, %zu bytes out, want %zu", text, stopped, out_len, first);
        free(out);
        if (!ok) break;
    }
}

/* The text stream both front ends run (tp_text_stream): ids in, final text out. A stop string
 * ends it with the text before it, a possible stop start is held back until tp_text_stream_finish
 * releases it, and the decoded byte counts add up to the plain decode of the ids pushed. */
static void test_text_stream(const char *codegen_dir) {
    tp_tokenizer *t = tt_load(codegen_dir);
    static const char *const stops[] = {"\n\n", "never-there"};
    const char *cases[] = {"def f(x):\n    return x  # \xc3\xa9\xf0\x9f\x98\x80\n\ndef g():", "x = 1\n"};
    for (int c = 0; c < 2; c++) {
        const char *text = cases[c];
        char err[256];
        int32_t *ids;
        size_t n;
        CHECK(tp_tokenizer_encode(t, text, strlen(text), &ids, &n, err, sizeof err) == 0, "encode: %s", err);
        tp_text_stream *ts = tp_text_stream_new(t, stops, 2, 0);
        char *out = NULL;
        size_t out_len = 0, decoded = 0, d, pushed = 0;
        int stopped = 0;
        while (pushed < n && !stopped) {
            stopped = tp_text_stream_push(ts, ids[pushed++], &out, &out_len, &d);
            decoded += d;
        }
        const char *hit = strstr(text, "\n\n");
        size_t want = hit ? (size_t)(hit - text) : strlen(text);
        CHECK(stopped == (hit != NULL) && tp_text_stream_stopped(ts) == stopped, "case %d: stopped %d", c, stopped);
        if (!hit) /* "\n" may begin "\n\n": held back until the end */
            CHECK(out_len == want - 1, "case %d: %zu bytes before finish, want %zu", c, out_len, want - 1);
        tp_text_stream_finish(ts, &out, &out_len, &d); /* a no-op after a stop */
        decoded += d;
        CHECK(out && out_len == want && memcmp(out, text, want) == 0, "case %d: text \"%s\", want %zu bytes of \"%s\"",
              c, out ? out : "(null)", want, text);
        char *dec;
        size_t dn;
        CHECK(tp_tokenizer_decode(t, ids, pushed, 1, &dec, &dn, err, sizeof err) == 0 && decoded == dn,
              "case %d: %zu bytes decoded, plain decode of the %zu ids pushed has %zu", c, decoded, pushed, dn);
        free(dec);
        free(out);
        free(ids);
        tp_text_stream_free(ts);
    }
    tp_tokenizer_free(t);
}

int tt_cmd_unit(int argc, char **argv) {
    if (argc != 3) return tt_usage("unit CODEGEN_DIR SMALL_DIR TMPDIR");
    snprintf(g_tmp, sizeof g_tmp, "%s/tok_unit_XXXXXX", argv[2]);
    mkdir(argv[2], 0755);
    if (!mkdtemp(g_tmp)) {
        perror(g_tmp);
        return 1;
    }
    test_loading(argv[0], argv[1]);
    test_facts(argv[0]);
    test_stop_strings();
    test_text_stream(argv[0]);
    printf("unit: %s\n", g_fail ? "FAILURES" : "ok");
    return g_fail ? 1 : 0;
}
