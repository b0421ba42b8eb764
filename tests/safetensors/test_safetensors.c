/* Tests of the safetensors reader (engine/checkpoint/safetensors.c).
 *
 * Files are written here by hand, byte by byte, in a temp dir under the build tree (argv[1]):
 * valid ones must round-trip every data byte, each malformed one must fail with a message that
 * names the file (and the tensor) and says what is wrong. A file written by the reference Python
 * writer (tests/safetensors/reference.safetensors, made by make_reference.py) is read as well
 * (argv[2]), so the reader is checked against an implementation no one here wrote.
 *
 * usage: test_safetensors TMPDIR [REFERENCE_DIR]
 */
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/safetensors.h"
#include "tests/common/check.h"

static const char *g_tmp;

/* ---- writing files ---- */

#define tmp_path(...) check_path(g_tmp, __VA_ARGS__)

static void mkdir_p(const char *path) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) { perror(buf); exit(1); }
            *p = '/';
        }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) { perror(buf); exit(1); }
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    if (remove(path) != 0) { perror(path); exit(1); }
    return 0;
}

/* Removes what an earlier run left in TMPDIR (only the folders this test makes). */
static void clean_tmp(void) {
    const char *dirs[] = {"bad", "badidx", "good"};
    for (int i = 0; i < 3; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", g_tmp, dirs[i]);
        if (access(p, F_OK) == 0 && nftw(p, remove_one, 16, FTW_DEPTH | FTW_PHYS) != 0) { perror(p); exit(1); }
    }
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) { perror(path); exit(1); }
    if (n && fwrite(p, 1, n, f) != n) { perror(path); exit(1); }
    if (fclose(f) != 0) { perror(path); exit(1); }
}

/* Writes [u64 LE header length][header][data]; pad8: pad the header with spaces to a multiple of 8,
 * as the Rust writer does. hlen_override: write this length instead (0: the real one). */
static void write_st_raw(const char *path, const char *header, int pad8, const void *data, size_t data_len,
                         uint64_t hlen_override) {
    size_t h = strlen(header), hp = pad8 ? (h + 7) / 8 * 8 : h;
    size_t n = 8 + hp + data_len;
    uint8_t *buf = malloc(n);
    uint64_t len = hlen_override ? hlen_override : hp;
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(len >> (8 * i));
    memcpy(buf + 8, header, h);
    memset(buf + 8 + h, ' ', hp - h);
    if (data_len) memcpy(buf + 8 + hp, data, data_len);
    write_bytes(path, buf, n);
    free(buf);
}

static void write_st(const char *path, const char *header, size_t data_len) {
    uint8_t *data = calloc(data_len + 1, 1);
    for (size_t i = 0; i < data_len; i++) data[i] = (uint8_t)(i * 7 + 3);
    write_st_raw(path, header, 0, data, data_len, 0);
    free(data);
}

/* ---- checking failures ---- */

/* Opens path, which must fail with a message containing every word (NULL-terminated list). */
static void expect_fail_at(int line, const char *path, ...) {
    char err[1024] = "";
    tp_st_model *m = tp_st_open(path, err, sizeof err);
    g_checks++;
    if (m) {
        g_fail++;
        fprintf(stderr, "FAIL line %d: %s opened, but should have failed\n", line, path);
        tp_st_close(m);
        return;
    }
    va_list ap;
    va_start(ap, path);
    for (const char *w; (w = va_arg(ap, const char *));) {
        g_checks++;
        if (!strstr(err, w)) {
            g_fail++;
            fprintf(stderr, "FAIL line %d: message lacks \"%s\": %s\n", line, w, err);
        }
    }
    va_end(ap);
    printf("ok (line %d): %s\n", line, err);
}
#define expect_fail(path, ...) expect_fail_at(__LINE__, path, __VA_ARGS__, (const char *)NULL)

/* One bad single-file case: writes header + data_len bytes to bad/NAME.safetensors and expects
 * failure with the file name and the words. */
#define bad_case(name, header, data_len, ...)                        \
    do {                                                             \
        const char *p_ = tmp_path("bad/%s.safetensors", name);       \
        write_st(p_, header, data_len);                              \
        expect_fail(p_, p_, __VA_ARGS__);                            \
    } while (0)

static void test_malformed(void) {
    mkdir_p(tmp_path("bad"));
    const char *p;

    p = tmp_path("bad/short.safetensors");
    write_bytes(p, "\x05\0\0\0\0", 5);
    expect_fail(p, p, "shorter than the 8-byte");

    p = tmp_path("bad/empty.safetensors");
    write_bytes(p, "", 0);
    expect_fail(p, p, "0 bytes");

    p = tmp_path("bad/absurd.safetensors");
    write_st_raw(p, "{}", 0, NULL, 0, (uint64_t)1 << 40);
    expect_fail(p, p, "absurd", "1099511627776");

    p = tmp_path("bad/absurd2.safetensors");
    write_st_raw(p, "{}", 0, NULL, 0, 100000001);
    expect_fail(p, p, "absurd");

    p = tmp_path("bad/header_beyond.safetensors");
    write_st_raw(p, "{}", 0, NULL, 0, 1000);
    expect_fail(p, p, "truncated", "header length 1000", "beyond the end", "10 bytes");

    bad_case("not_json", "{\"w\": {\"dtype\": \"F32\",, }}", 0, "not valid JSON", "line 1 column 23");
    bad_case("not_json2", "\n\n  nonsense", 0, "not valid JSON", "line 3 column 3");
    bad_case("not_object", "[1, 2]", 0, "an array, not a JSON object");

    bad_case("no_dtype", "{\"blk.w\": {\"shape\": [2], \"data_offsets\": [0, 8]}}", 8, "blk.w", "\"dtype\"");
    bad_case("no_shape", "{\"blk.w\": {\"dtype\": \"F32\", \"data_offsets\": [0, 8]}}", 8, "blk.w", "\"shape\"");
    bad_case("no_offsets", "{\"blk.w\": {\"dtype\": \"F32\", \"shape\": [2]}}", 8, "blk.w", "\"data_offsets\"");
    bad_case("entry_type", "{\"blk.w\": [1, 2]}", 0, "blk.w", "not an object");
    bad_case("dtype_type", "{\"blk.w\": {\"dtype\": 4, \"shape\": [2], \"data_offsets\": [0, 8]}}", 8, "blk.w",
             "\"dtype\" is a number, not a string");
    bad_case("shape_type", "{\"blk.w\": {\"dtype\": \"F32\", \"shape\": 2, \"data_offsets\": [0, 8]}}", 8, "blk.w",
             "\"shape\" is a number, not an array");
    bad_case("shape_float", "{\"blk.w\": {\"dtype\": \"F32\", \"shape\": [2.0], \"data_offsets\": [0, 8]}}", 8,
             "blk.w", "shape[0] is not an integer");
    bad_case("shape_str", "{\"blk.w\": {\"dtype\": \"F32\", \"shape\": [1, \"2\"], \"data_offsets\": [0, 8]}}", 8,
             "blk.w", "shape[1] is not an integer");
    bad_case("offsets_type", "{\"blk.w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": {}}}", 8, "blk.w",
             "[begin, end]");
    bad_case("offsets_one", "{\"blk.w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8]}}", 8, "blk.w",
             "[begin, end]");
    bad_case("offsets_three", "{\"blk.w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8, 9]}}", 8,
             "blk.w", "[begin, end]");
    bad_case("offsets_float", "{\"blk.w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8.5]}}", 8,
             "blk.w", "[begin, end]");
    bad_case("offsets_neg", "{\"blk.w\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [-4, 0]}}", 8,
             "blk.w", "negative");

    bad_case("dtype_i64", "{\"blk.w\": {\"dtype\": \"I64\", \"shape\": [2], \"data_offsets\": [0, 16]}}", 16,
             "blk.w", "I64 is not supported; tpgen reads F32, F16, BF16");
    bad_case("dtype_f64", "{\"blk.w\": {\"dtype\": \"F64\", \"shape\": [2], \"data_offsets\": [0, 16]}}", 16,
             "blk.w", "F64 is not supported");
    bad_case("dtype_unknown", "{\"blk.w\": {\"dtype\": \"Q4_K\", \"shape\": [2], \"data_offsets\": [0, 1]}}", 1,
             "blk.w", "unknown dtype \"Q4_K\"", "F32, F16, BF16");
    bad_case("dtype_lower", "{\"blk.w\": {\"dtype\": \"f32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8,
             "blk.w", "unknown dtype \"f32\"");

    bad_case("shape_neg", "{\"blk.w\": {\"dtype\": \"F32\", \"shape\": [2, -3], \"data_offsets\": [0, 8]}}", 8,
             "blk.w", "shape[1] = -3 is negative");
    bad_case("shape_9d",
             "{\"blk.w\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1,1,1,1,2], \"data_offsets\": [0, 8]}}", 8,
             "blk.w", "9 dims", "at most 8");
    bad_case("shape_huge",
             "{\"blk.w\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], \"data_offsets\": [0, 8]}}",
             8, "blk.w", "too large");

    bad_case("begin_gt_end", "{\"blk.w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 0]}}", 8,
             "blk.w", "[8, 0]", "begin > end");
    bad_case("size_mismatch", "{\"blk.w\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 20]}}",
             24, "blk.w", "[2, 3]", "needs 24 bytes", "hold 20 bytes");
    bad_case("size_mismatch_f16", "{\"blk.w\": {\"dtype\": \"F16\", \"shape\": [2, 3], \"data_offsets\": [0, 24]}}",
             24, "blk.w", "F16 needs 12 bytes", "hold 24 bytes");
    bad_case("truncated",
             "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
             " \"blk.w\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [4, 28]}}",
             10, "truncated: tensor blk.w needs bytes up to 28 of the data area, file has 10");
    bad_case("overlap",
             "{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]},"
             " \"b\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [8, 24]}}",
             24, "tensors a and b overlap");
    bad_case("overlap_nested",
             "{\"big\": {\"dtype\": \"F32\", \"shape\": [8], \"data_offsets\": [0, 32]},"
             " \"c\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [24, 28]},"
             " \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]}}",
             32, "tensors big and b overlap");
    bad_case("dup_same_offsets",
             "{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
             " \"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}",
             8, "tensor w appears twice");
    bad_case("dup_other_offsets",
             "{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
             " \"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 16]}}",
             16, "tensor w appears twice");
    bad_case("metadata_not_object", "{\"__metadata__\": [\"pt\"]}", 0, "__metadata__", "not an object");
    bad_case("metadata_number", "{\"__metadata__\": {\"format\": \"pt\", \"n\": 3}}", 0, "__metadata__",
             "\"n\" is a number, not a string");

    p = tmp_path("bad/not_there.safetensors");
    expect_fail(p, p, "No such file");

    mkdir_p(tmp_path("bad/emptydir"));
    p = tmp_path("bad/emptydir");
    expect_fail(p, "no model.safetensors or model.safetensors.index.json in", p);

    /* A directory where the file should be: open succeeds, it is not a regular file. */
    mkdir_p(tmp_path("bad/dir_as_file/model.safetensors"));
    expect_fail(tmp_path("bad/dir_as_file"), "model.safetensors", "not a regular file");
}

/* ---- sharded models ---- */

static const char *SHARD1 = "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}";
static const char *SHARD2 = "{\"b\": {\"dtype\": \"F16\", \"shape\": [3], \"data_offsets\": [0, 6]}}";

static void write_index(const char *dir, const char *text) {
    mkdir_p(dir);
    char p[1024];
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    write_bytes(p, text, strlen(text));
}

static void test_bad_index(void) {
    const char *d, *shard;

    d = tmp_path("badidx/not_json");
    write_index(d, "{\"weight_map\": {\"a\": }");
    expect_fail(d, "model.safetensors.index.json", "not valid JSON", "line 1 column 22");

    d = tmp_path("badidx/no_map");
    write_index(d, "{\"metadata\": {\"total_size\": 8}}");
    expect_fail(d, "model.safetensors.index.json", "no \"weight_map\"");

    d = tmp_path("badidx/map_array");
    write_index(d, "{\"weight_map\": [\"a\"]}");
    expect_fail(d, "model.safetensors.index.json", "\"weight_map\" must be");

    d = tmp_path("badidx/map_number");
    write_index(d, "{\"weight_map\": {\"a\": 1}}");
    expect_fail(d, "model.safetensors.index.json", "weight_map[\"a\"] is not a file name");

    d = tmp_path("badidx/missing_shard");
    write_index(d, "{\"weight_map\": {\"a\": \"s1.safetensors\", \"b\": \"s2.safetensors\"}}");
    write_st(tmp_path("badidx/missing_shard/s1.safetensors"), SHARD1, 8);
    shard = tmp_path("badidx/missing_shard/s2.safetensors");
    expect_fail(d, shard, "No such file", "weight_map", "model.safetensors.index.json");

    d = tmp_path("badidx/lacks");
    write_index(d, "{\"weight_map\": {\"a\": \"s1.safetensors\", \"b\": \"s2.safetensors\", \"zz\": "
                   "\"s2.safetensors\"}}");
    write_st(tmp_path("badidx/lacks/s1.safetensors"), SHARD1, 8);
    write_st(tmp_path("badidx/lacks/s2.safetensors"), SHARD2, 6);
    shard = tmp_path("badidx/lacks/s2.safetensors");
    expect_fail(d, "tensor zz", shard, "lacks it");

    d = tmp_path("badidx/wrong_shard"); /* a is in s1, the map says s2 */
    write_index(d, "{\"weight_map\": {\"a\": \"s2.safetensors\", \"b\": \"s2.safetensors\"}}");
    write_st(tmp_path("badidx/wrong_shard/s2.safetensors"), SHARD2, 6);
    expect_fail(d, "tensor a", "s2.safetensors", "lacks it");

    d = tmp_path("badidx/dup");
    write_index(d, "{\"weight_map\": {\"a\": \"s1.safetensors\", \"b\": \"s2.safetensors\"}}");
    write_st(tmp_path("badidx/dup/s1.safetensors"), SHARD1, 8);
    write_st(tmp_path("badidx/dup/s2.safetensors"),
             "{\"b\": {\"dtype\": \"F16\", \"shape\": [3], \"data_offsets\": [0, 6]},"
             " \"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 16]}}",
             16);
    expect_fail(d, "tensor a is in two files", "s1.safetensors", "s2.safetensors");

    d = tmp_path("badidx/bad_shard"); /* a malformed shard is reported as itself */
    write_index(d, "{\"weight_map\": {\"a\": \"s1.safetensors\"}}");
    write_st(tmp_path("badidx/bad_shard/s1.safetensors"),
             "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 4);
    shard = tmp_path("badidx/bad_shard/s1.safetensors");
    expect_fail(d, shard, "truncated: tensor a needs bytes up to 8 of the data area, file has 4");
}

/* ---- valid files ---- */

typedef struct {
    const char *name, *dtype;
    int ndim;
    int64_t shape[8];
    size_t esize;
} spec;

/* Writes tensors (data of tensor i: bytes (i * 31 + j * 13) mod 251) at contiguous offsets, in the
 * given order, but lists them in the header in reverse. Returns the data blob (caller frees). */
static uint8_t *write_model(const char *path, const spec *s, int n, const char *metadata, int pad8,
                            size_t *offsets, size_t *data_len) {
    char header[1 << 16];
    size_t off = 0, hl = 0;
    for (int i = 0; i < n; i++) {
        size_t numel = 1;
        for (int d = 0; d < s[i].ndim; d++) numel *= (size_t)s[i].shape[d];
        offsets[2 * i] = off;
        off += numel * s[i].esize;
        offsets[2 * i + 1] = off;
    }
    uint8_t *data = malloc(off + 1);
    for (int i = 0; i < n; i++)
        for (size_t j = offsets[2 * i]; j < offsets[2 * i + 1]; j++) data[j] = (uint8_t)((i * 31 + j * 13) % 251);
    hl += snprintf(header + hl, sizeof header - hl, "{");
    if (metadata) hl += snprintf(header + hl, sizeof header - hl, "\"__metadata__\": %s, ", metadata);
    for (int i = n - 1; i >= 0; i--) {
        hl += snprintf(header + hl, sizeof header - hl, "\"%s\": {\"dtype\": \"%s\", \"shape\": [", s[i].name,
                       s[i].dtype);
        for (int d = 0; d < s[i].ndim; d++)
            hl += snprintf(header + hl, sizeof header - hl, "%s%" PRId64, d ? ", " : "", s[i].shape[d]);
        hl += snprintf(header + hl, sizeof header - hl, "], \"data_offsets\": [%zu, %zu]}%s", offsets[2 * i],
                       offsets[2 * i + 1], i ? ", " : "");
    }
    snprintf(header + hl, sizeof header - hl, "}");
    write_st_raw(path, header, pad8, data, off, 0);
    *data_len = off;
    return data;
}

static void check_tensor(const tp_st_model *m, const spec *s, tp_dtype dt, const uint8_t *data, size_t begin,
                         size_t end, const char *file) {
    const tp_st_tensor *t = tp_st_find(m, s->name);
    CHECK(t != NULL, "%s not found", s->name);
    if (!t) return;
    CHECK(strcmp(t->name, s->name) == 0, "name %s", t->name);
    CHECK(t->dtype == dt, "%s dtype %d", s->name, (int)t->dtype);
    CHECK(t->ndim == s->ndim, "%s ndim %d", s->name, t->ndim);
    for (int d = 0; d < s->ndim && d < t->ndim; d++)
        CHECK(t->shape[d] == s->shape[d], "%s shape[%d] = %" PRId64, s->name, d, t->shape[d]);
    CHECK(t->nbytes == end - begin, "%s nbytes %zu", s->name, t->nbytes);
    CHECK(t->nbytes == (size_t)tp_st_numel(t) * tp_dtype_size(t->dtype), "%s numel", s->name);
    CHECK(memcmp(t->data, data + begin, end - begin) == 0, "%s data bytes differ", s->name);
    CHECK(strcmp(t->file, file) == 0, "%s file %s, expected %s", s->name, t->file, file);
}

static void test_valid_single(void) {
    static const spec s[] = {
        {"transformer.wte.weight", "F32", 2, {5, 3}, 4},
        {"transformer.h.0.attn.qkv_proj.weight", "F16", 2, {6, 4}, 2},
        {"transformer.h.0.ln_1.bias", "BF16", 1, {7}, 2},
        {"empty", "F32", 2, {0, 4}, 4},
        {"scalar", "F32", 0, {0}, 4},
        {"lm_head.bias", "BF16", 3, {1, 2, 3}, 2},
    };
    const tp_dtype dts[] = {TP_F32, TP_F16, TP_BF16, TP_F32, TP_F32, TP_BF16};
    int n = (int)(sizeof s / sizeof *s);
    size_t offsets[2 * 6], len;
    char err[1024];
    for (int pad = 0; pad < 2; pad++) {
        const char *dir = tmp_path("good/single%d", pad);
        mkdir_p(dir);
        char file[1024];
        snprintf(file, sizeof file, "%s/model.safetensors", dir);
        uint8_t *data = write_model(file, s, n, pad ? "{\"format\": \"pt\", \"note\": \"x\"}" : NULL, pad, offsets,
                                    &len);
        /* Open it both as a directory and as a file: the same tensors either way. */
        for (int as_dir = 0; as_dir < 2; as_dir++) {
            tp_st_model *m = tp_st_open(as_dir ? dir : file, err, sizeof err);
            CHECK(m != NULL, "open %s: %s", as_dir ? dir : file, err);
            if (!m) continue;
            CHECK(tp_st_count(m) == (size_t)n, "count %zu", tp_st_count(m));
            CHECK(tp_st_total_bytes(m) == len, "total %zu vs %zu", tp_st_total_bytes(m), len);
            CHECK(tp_st_file_count(m) == 1, "files %zu", tp_st_file_count(m));
            for (int i = 0; i < n; i++) check_tensor(m, &s[i], dts[i], data, offsets[2 * i], offsets[2 * i + 1], file);
            CHECK(tp_st_find(m, "missing") == NULL, "found a missing tensor");
            CHECK(tp_st_find(m, "__metadata__") == NULL, "__metadata__ listed as a tensor");
            CHECK(tp_st_find(m, "transformer.wte") == NULL, "prefix matched");
            /* Listed in data-offset order although the header lists them in reverse. */
            for (size_t i = 1; i < tp_st_count(m); i++)
                CHECK(tp_st_at(m, i - 1)->data <= tp_st_at(m, i)->data, "order at %zu", i);
            CHECK(tp_st_at(m, tp_st_count(m)) == NULL, "at past the end");
            const tp_st_tensor *first = tp_st_at(m, 0);
            if (pad) CHECK(((uintptr_t)first->data & 7) == 0, "padded header: data area not 8-aligned");
            tp_st_prefetch(first->data, tp_st_total_bytes(m));
            tp_st_prefetch(first->data + 1, 3);
            tp_st_close(m);
        }
        free(data);
    }
}

static void test_valid_empty(void) {
    char err[1024];
    const char *p = tmp_path("good/empty.safetensors");
    write_st_raw(p, "{}", 1, NULL, 0, 0);
    tp_st_model *m = tp_st_open(p, err, sizeof err);
    CHECK(m != NULL, "open %s: %s", p, err);
    if (m) {
        CHECK(tp_st_count(m) == 0 && tp_st_total_bytes(m) == 0, "empty file has tensors");
        tp_st_close(m);
    }
    /* Zero-size tensors sharing an offset with others do not overlap anything; trailing bytes
     * after the last tensor are tolerated. */
    p = tmp_path("good/zeros.safetensors");
    write_st(p,
             "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
             " \"z1\": {\"dtype\": \"F16\", \"shape\": [0], \"data_offsets\": [4, 4]},"
             " \"z2\": {\"dtype\": \"BF16\", \"shape\": [3, 0], \"data_offsets\": [8, 8]},"
             " \"b\": {\"dtype\": \"BF16\", \"shape\": [2], \"data_offsets\": [8, 12]}}",
             16);
    m = tp_st_open(p, err, sizeof err);
    CHECK(m != NULL, "open %s: %s", p, err);
    if (m) {
        CHECK(tp_st_count(m) == 4, "count %zu", tp_st_count(m));
        const tp_st_tensor *z = tp_st_find(m, "z2");
        CHECK(z && z->nbytes == 0 && z->ndim == 2 && z->shape[1] == 0, "z2");
        CHECK(tp_st_total_bytes(m) == 12, "total %zu", tp_st_total_bytes(m));
        tp_st_close(m);
    }
}

static void test_valid_sharded(void) {
    static const spec s1[] = {{"x.0", "F32", 2, {3, 2}, 4}, {"x.1", "BF16", 1, {5}, 2}};
    static const spec s2[] = {{"y.0", "F16", 2, {2, 2}, 2}, {"y.1", "F32", 1, {1}, 4}, {"y.2", "F16", 1, {0}, 2}};
    char err[1024], f1[1024], f2[1024];
    size_t o1[4], o2[6], l1, l2;
    const char *dir = tmp_path("good/sharded");
    mkdir_p(dir);
    snprintf(f1, sizeof f1, "%s/model-00001-of-00002.safetensors", dir);
    snprintf(f2, sizeof f2, "%s/model-00002-of-00002.safetensors", dir);
    uint8_t *d1 = write_model(f1, s1, 2, "{\"format\": \"pt\"}", 1, o1, &l1);
    uint8_t *d2 = write_model(f2, s2, 3, NULL, 1, o2, &l2);
    write_index(dir, "{\"metadata\": {\"total_size\": 36}, \"weight_map\": {"
                     "\"x.0\": \"model-00001-of-00002.safetensors\", \"x.1\": \"model-00001-of-00002.safetensors\","
                     "\"y.0\": \"model-00002-of-00002.safetensors\", \"y.1\": \"model-00002-of-00002.safetensors\","
                     "\"y.2\": \"model-00002-of-00002.safetensors\"}}");
    char index[1024];
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
    for (int as_index = 0; as_index < 2; as_index++) {
        tp_st_model *m = tp_st_open(as_index ? index : dir, err, sizeof err);
        CHECK(m != NULL, "open %s: %s", dir, err);
        if (!m) continue;
        CHECK(tp_st_count(m) == 5, "count %zu", tp_st_count(m));
        CHECK(tp_st_file_count(m) == 2, "files %zu", tp_st_file_count(m));
        CHECK(tp_st_total_bytes(m) == l1 + l2, "total %zu", tp_st_total_bytes(m));
        check_tensor(m, &s1[0], TP_F32, d1, o1[0], o1[1], f1);
        check_tensor(m, &s1[1], TP_BF16, d1, o1[2], o1[3], f1);
        check_tensor(m, &s2[0], TP_F16, d2, o2[0], o2[1], f2);
        check_tensor(m, &s2[1], TP_F32, d2, o2[2], o2[3], f2);
        check_tensor(m, &s2[2], TP_F16, d2, o2[4], o2[5], f2);
        /* Shards in name order: all of shard 1's tensors come first. */
        CHECK(strcmp(tp_st_at(m, 0)->file, f1) == 0 && strcmp(tp_st_at(m, 4)->file, f2) == 0, "shard order");
        tp_st_close(m);
    }
    /* model.safetensors wins over an index, as in transformers. */
    write_st(tmp_path("good/sharded/model.safetensors"), SHARD1, 8);
    tp_st_model *m = tp_st_open(dir, err, sizeof err);
    CHECK(m && tp_st_count(m) == 1 && tp_st_find(m, "a"), "model.safetensors should be preferred: %s", m ? "" : err);
    tp_st_close(m);
    free(d1);
    free(d2);
}

/* Thousands of tensors: every one found by name (exercises the hash table's growth). */
static void test_many(void) {
    enum { N = 5000 };
    size_t cap = (size_t)N * 96 + 16, hl = 0;
    char *header = malloc(cap), err[1024];
    hl += snprintf(header + hl, cap - hl, "{");
    for (int i = 0; i < N; i++)
        hl += snprintf(header + hl, cap - hl, "%s\"h.%d.w\": {\"dtype\": \"F16\", \"shape\": [%d], "
                       "\"data_offsets\": [%d, %d]}", i ? ", " : "", i, i % 3, 6 * (i / 3) + 2 * (i % 3 == 2),
                       6 * (i / 3) + 2 * (i % 3) + 2 * (i % 3 == 2));
    snprintf(header + hl, cap - hl, "}");
    const char *p = tmp_path("good/many.safetensors");
    write_st(p, header, 3 * (size_t)N);
    tp_st_model *m = tp_st_open(p, err, sizeof err);
    CHECK(m != NULL, "open many: %s", err);
    if (m) {
        int found = 0;
        char name[32];
        for (int i = 0; i < N; i++) {
            snprintf(name, sizeof name, "h.%d.w", i);
            const tp_st_tensor *t = tp_st_find(m, name);
            found += t && strcmp(t->name, name) == 0 && t->shape[0] == i % 3;
        }
        CHECK(found == N, "found %d of %d", found, N);
        CHECK(tp_st_find(m, "h.5000.w") == NULL, "found a missing tensor");
        tp_st_close(m);
    }
    free(header);
}

/* A file written by the Python safetensors library (make_reference.py), with the tensor values
 * recorded next to it in reference.txt: "name dtype shape... : f32 values...". */
static void test_reference(const char *ref_dir) {
    char path[1024], txt[1024], err[1024];
    snprintf(path, sizeof path, "%s/reference.safetensors", ref_dir);
    snprintf(txt, sizeof txt, "%s/reference.txt", ref_dir);
    tp_st_model *m = tp_st_open(path, err, sizeof err);
    CHECK(m != NULL, "open %s: %s", path, err);
    FILE *f = fopen(txt, "r");
    CHECK(f != NULL, "%s: %s", txt, strerror(errno));
    if (!m || !f) { tp_st_close(m); if (f) fclose(f); return; }
    char line[8192];
    size_t listed = 0;
    while (fgets(line, sizeof line, f)) {
        char name[256], dtype[16];
        int used = 0, nd = 0;
        if (sscanf(line, "%255s %15s%n", name, dtype, &used) != 2) continue;
        listed++;
        const tp_st_tensor *t = tp_st_find(m, name);
        CHECK(t != NULL, "reference tensor %s missing", name);
        if (!t) continue;
        CHECK(strcmp(tp_dtype_name(t->dtype), dtype) == 0, "%s dtype %s vs %s", name, tp_dtype_name(t->dtype), dtype);
        char *c = line + used;
        int64_t dim;
        int k;
        while (sscanf(c, " %" SCNd64 "%n", &dim, &k) == 1) {
            CHECK(nd < t->ndim && t->shape[nd] == dim, "%s shape[%d]", name, nd);
            nd++;
            c += k;
        }
        CHECK(nd == t->ndim, "%s ndim %d vs %d", name, t->ndim, nd);
        c = strchr(c, ':');
        CHECK(c != NULL, "reference.txt line for %s has no ':'", name);
        if (!c) continue;
        c++;
        size_t numel = (size_t)tp_st_numel(t), bad = 0, i = 0;
        float *vals = malloc((numel + 1) * sizeof *vals);
        tp_convert_to_f32(vals, t->data, t->dtype, numel);
        double want;
        for (; i < numel && sscanf(c, " %lf%n", &want, &k) == 1; i++, c += k) bad += (float)want != vals[i];
        CHECK(i == numel && bad == 0, "%s: %zu values read, %zu differ", name, i, bad);
        free(vals);
    }
    CHECK(listed == tp_st_count(m) && listed > 0, "reference.txt lists %zu tensors, file has %zu", listed,
          tp_st_count(m));
    fclose(f);
    tp_st_close(m);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s TMPDIR [REFERENCE_DIR]\n", argv[0]);
        return 2;
    }
    g_tmp = argv[1];
    mkdir_p(g_tmp);
    clean_tmp();
    test_malformed();
    test_bad_index();
    test_valid_single();
    test_valid_empty();
    test_valid_sharded();
    test_many();
    if (argc > 2) test_reference(argv[2]);
    printf("%d checks, %d failed\n", g_checks, g_fail);
    return g_fail ? 1 : 0;
}
