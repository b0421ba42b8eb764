/* CodeGen2.5's tokenizer (engine/tokenizer/tokenizer_codegen25.c) beyond the tiktoken reference ids:
 * the published id layout, which ids decode(skip_special) drops, plain-text encoding of token
 * names, the whitespace runs as mergeable ranks (ids measured by hand with tiktoken 0.4.0), and
 * the errors: an unknown tokenizer class, a broken tokenizer_config.json, broken or missing GPT-2
 * ranks (found through TPGEN_DATA_DIR), GPT-2 ranks that hold one of CodeGen2.5's own runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/log.h"
#include "tok_test.h"
#include "tests/common/check.h"


static void expect_error(const char *dir, const char *want1, const char *want2) {
    char err[2048] = "";
    tp_tokenizer *t = tp_tokenizer_load(dir, err, sizeof err);
    CHECK(!t, "loading %s should fail", dir);
    tp_tokenizer_free(t);
    CHECK(strstr(err, want1) && (!want2 || strstr(err, want2)), "message \"%s\" lacks \"%s\" / \"%s\"", err, want1,
          want2 ? want2 : "");
}

static void encode_is(tp_tokenizer *t, int plain, const char *text, const int32_t *want, size_t n_want) {
    int32_t *ids = NULL;
    size_t n = 0;
    char err[256];
    int rc = plain ? tp_tokenizer_encode_text(t, text, strlen(text), &ids, &n, err, sizeof err)
                   : tp_tokenizer_encode(t, text, strlen(text), &ids, &n, err, sizeof err);
    CHECK(rc == 0 && n == n_want && !memcmp(ids, want, n * sizeof *ids), "%s encode of \"%s\": %zu ids", 
          plain ? "plain" : "default", text, n);
    free(ids);
}

static void test_layout(const char *dir) {
    tp_tokenizer *t = tt_load(dir);
    CHECK(tp_tokenizer_vocab_size(t) == 51200, "%d ids", tp_tokenizer_vocab_size(t));
    int defined = 0;
    for (int32_t id = 0; id < 51200; id++) {
        size_t len;
        defined += tp_tokenizer_token_bytes(t, id, &len) != NULL;
        CHECK(tp_tokenizer_is_special(t, id) == (id == 50256), "id %d special", id);
    }
    CHECK(defined == 51200, "%d of 51200 ids have a token", defined);
    CHECK(tp_tokenizer_eos_id(t) == 50256, "eos %d", tp_tokenizer_eos_id(t));
    static const struct { const char *name; int32_t id; } names[] = {
        {"<|endoftext|>", 50256}, {"                               ", 50257}, {"  ", 50286},
        {"\t\t\t\t\t\t\t\t\t", 50287},
        {"\t\t", 50294}, {"<fim_prefix>", 50295}, {"<fim_middle>", 50296}, {"<fim_suffix>", 50297},
        {"<reponame>", 50312}, {"<dummy_0>", 50313}, {"<sep>", 50317}, {"<eom>", 50318}, {"<mask_881>", 50319},
        {"<mask_1>", 51199}};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        size_t len;
        const char *b = tp_tokenizer_token_bytes(t, names[i].id, &len);
        CHECK(b && len == strlen(names[i].name) && !memcmp(b, names[i].name, len), "id %d is \"%s\"", names[i].id,
              names[i].name);
    }
    /* the publisher's own ids (its model card's infill prompt) */
    encode_is(t, 0, "prefix<mask_1>suffix<|endoftext|><sep><mask_1>",
              (const int32_t[]){40290, 51199, 37333, 844, 50256, 50317, 51199}, 7);
    /* plain text: names are text, space runs stay tokens */
    encode_is(t, 1, "<sep>", (const int32_t[]){27, 325, 79, 29}, 4);
    encode_is(t, 1, "    x", (const int32_t[]){50285, 2124}, 2);
    encode_is(t, 0, "    x", (const int32_t[]){50285, 2124}, 2);
    tp_tokenizer_free(t);
}

/* The whitespace runs are mergeable ranks (tokenization_codegen25.py's bpe_ranks), not special
 * tokens: ids tiktoken 0.4.0 gives on the published construction, measured by hand (also asserted
 * by tools/fixtures/make.py tokenizer-codegen25). As special tokens, tiktoken's regex order would give 4
 * spaces as 2 + 2 and 40 as 22 + 9 x 2. Plain-text encoding gives the same ids: the runs are BPE. */
static void test_runs(const char *dir) {
    tp_tokenizer *t = tt_load(dir);
    static const struct { const char *text; int32_t ids[8]; size_t n; } ex[] = {
        {"def f():\n    return 1\n", {4299, 277, 33529, 198, 50285, 1441, 352, 198}, 8}, /* 3 spaces, " return" */
        {"                               ", {50257}, 1},                               /* 31 spaces */
        {"        x", {50281, 2124}, 2},                                               /* 7 spaces, " x" */
        {"a                                        b", {64, 50257, 50280, 275}, 4}, /* 39 = 31 + 8, " b" */
    };
    CHECK(strlen(ex[1].text) == 31 && strlen(ex[3].text) == 42, "the example texts");
    for (size_t i = 0; i < sizeof ex / sizeof *ex; i++)
        for (int plain = 0; plain < 2; plain++) encode_is(t, plain, ex[i].text, ex[i].ids, ex[i].n);
    for (int32_t id = 50257; id <= 50294; id++)
        CHECK(!tp_tokenizer_is_special(t, id), "run id %d is not special", id);
    tp_tokenizer_free(t);
}

static void test_errors(const char *tmp) {
    char d[1024];
    mkdir(tmp, 0755);
    snprintf(d, sizeof d, "%s/cg25_other", tmp);
    mkdir(d, 0755);
    tt_write_file(d, "tokenizer_config.json", "{\"tokenizer_class\": \"LlamaTokenizer\"}");
    CHECK(tp_tokenizer_present(d) == 1, "a tokenizer_config.json is a tokenizer to identify (or refuse)");
    expect_error(d, "cg25_other/tokenizer_config.json: tokenizer_class LlamaTokenizer is not a tokenizer tpgen knows",
                 NULL);
    tt_write_file(d, "tokenizer_config.json", "{\"tokenizer_class\": \"CodeGenTokenizer\"}");
    expect_error(d, "tokenizer_class CodeGenTokenizer reads tokenizer.json or vocab.json + merges.txt, and ",
                 "cg25_other has neither");
    tt_write_file(d, "tokenizer_config.json", "{\"model_max_length\": 2048}");
    expect_error(d, "tokenizer_class (none) is not a tokenizer tpgen knows", NULL);
    tt_write_file(d, "tokenizer_config.json", "{\"tokenizer_class\": \"CodeGen25Tokenizer\",");
    expect_error(d, "cg25_other/tokenizer_config.json: ", NULL);

    /* the ranks, through TPGEN_DATA_DIR (looked at first) */
    tt_write_file(d, "tokenizer_config.json", "{\"tokenizer_class\": \"CodeGen25Tokenizer\"}");
    char data[1100];
    snprintf(data, sizeof data, "%s/cg25_data", tmp);
    mkdir(data, 0755);
    setenv("TPGEN_DATA_DIR", data, 1);
    tt_write_file(data, "gpt2.tiktoken", "IQ== 0\nIg== 1\nIw 2\n");
    expect_error(d, "cg25_data/gpt2.tiktoken:3: expected \"BASE64 2\"", NULL);
    tt_write_file(data, "gpt2.tiktoken", "IQ== 0\nIg== 5\n");
    expect_error(d, "cg25_data/gpt2.tiktoken:2: expected \"BASE64 1\"", NULL);
    /* a rank is 1 to 9 digits and nothing else: no sign, space, suffix or empty rank */
    const char *bad_ranks[] = {"IQ== 0\nIg== 1x\n", "IQ== 0\nIg== +1\n", "IQ== 0\nIg==  1\n", "IQ== 0\nIg== \n",
                               "IQ== 0\nIg== 1 \n", "IQ== 0\nIg== 0000000001\n"};
    for (size_t i = 0; i < sizeof bad_ranks / sizeof *bad_ranks; i++) {
        tt_write_file(data, "gpt2.tiktoken", bad_ranks[i]);
        expect_error(d, "cg25_data/gpt2.tiktoken:2: expected \"BASE64 1\"", NULL);
    }
    tt_write_file(data, "gpt2.tiktoken", "IQ== 0\nIg== 1\n");
    expect_error(d, "cg25_data/gpt2.tiktoken: 2 ranks, GPT-2 has 50256", NULL);
    tt_write_file(data, "gpt2.tiktoken", "IQ== 0\nICA= 1\n"); /* "  " */
    expect_error(d, "cg25_data/gpt2.tiktoken:2: a run of 2 spaces, which is not a GPT-2 token: CodeGen2.5 ranks",
                 NULL);
    tt_write_file(data, "gpt2.tiktoken", "CQkJCQkJCQkJ 0\n"); /* 9 tabs */
    expect_error(d, "cg25_data/gpt2.tiktoken:1: a run of 9 tabs", NULL);
    /* a TPGEN_DATA_DIR without the file: an error naming it, not the copy beside the executable */
    remove(strcat(data, "/gpt2.tiktoken"));
    expect_error(d, "CodeGen25Tokenizer is built from GPT-2's BPE ranks, gpt2.tiktoken, which tpgen ships and did "
                 "not find (tried ", "cg25_data/gpt2.tiktoken); set TPGEN_DATA_DIR");
    unsetenv("TPGEN_DATA_DIR");
}

int tt_cmd_codegen25(int argc, char **argv) {
    if (argc != 2) return tt_usage("codegen25 DIR TMPDIR");
    test_layout(argv[0]);
    test_runs(argv[0]);
    test_errors(argv[1]);
    printf("codegen25: %s\n", g_fail ? "FAILED" : "layout, plain text, whitespace runs and errors ok");
    return g_fail ? 1 : 0;
}
