/* Tests of the torch.save reader (engine/checkpoint/zipfile.c, unpickle.c, torch_bin.c, checkpoint.c).
 *
 * Reads the files tests/bin/make_cases.py wrote with torch and Python's zipfile (argv[2]) and
 * compares every value with reference.txt (torch's own reading of them); checks that each bad
 * file fails with a message naming the file and the tensor; makes the cases that need no torch
 * here (truncated copies, indexes, a directory with both formats) in TMPDIR (argv[1], also the
 * working directory, where a marker file must never appear); and compares the .bin copies of
 * the HF fixtures (argv[3] = tests/data) tensor by tensor with their safetensors originals.
 *
 * usage: test_bin TMPDIR CASES_DIR DATA_DIR
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/checkpoint.h"
#include "checkpoint/torch_bin.h"
#include "checkpoint/unpickle.h"
#include "checkpoint/zipfile.h"
#include "kernels/dtype.h"
#include "tests/common/check.h"

static const char *g_tmp, *g_cases, *g_data;

static uint8_t *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)len + 1);
    if (fread(b, 1, (size_t)len, f) != (size_t)len) {
        perror(path);
        exit(1);
    }
    fclose(f);
    *n = (size_t)len;
    return b;
}

static void write_all(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

static void mkdir_fresh(const char *path) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", path, path);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot make %s\n", path);
        exit(1);
    }
}

static void symlink_to(const char *target, const char *link) {
    if (symlink(target, link) != 0) {
        perror(link);
        exit(1);
    }
}

/* Opening path must fail with an error containing every string of the NULL-terminated list. */
static void expect_fail(const char *path, ...) {
    char err[2048] = "";
    tp_bin_model *m = tp_bin_open(path, err, sizeof err);
    CHECK(!m, "%s opened, expected an error", path);
    tp_bin_close(m);
    va_list ap;
    va_start(ap, path);
    for (const char *s; (s = va_arg(ap, const char *));)
        CHECK(strstr(err, s), "error for %s lacks \"%s\": %s", path, s, err);
    va_end(ap);
    printf("ok: %s -> %s\n", path, err);
}

static void wr_le(uint8_t *p, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) p[i] = (uint8_t)(v >> 8 * i);
}
static uint64_t rd_le(const uint8_t *p, int bytes) {
    uint64_t v = 0;
    for (int i = bytes; i-- > 0;) v = v << 8 | p[i];
    return v;
}

/* The central directory entry (its 46-byte fixed part; the name follows) of the record whose
 * name ends with suffix, in the zip image buf[0..n); NULL if none. */
static uint8_t *central_entry(uint8_t *buf, size_t n, const char *suffix) {
    size_t ls = strlen(suffix);
    for (size_t i = 0; i + 46 <= n; i++) {
        if (memcmp(buf + i, "PK\1\2", 4) != 0) continue;
        size_t nlen = rd_le(buf + i + 28, 2);
        if (i + 46 + nlen <= n && nlen >= ls && !memcmp(buf + i + 46 + nlen - ls, suffix, ls)) return buf + i;
    }
    return NULL;
}

/* Opening the image buf[0..n), written to TMPDIR/name, must fail with an error containing every
 * string of the NULL-terminated list (expect_fail's checks, on a patched copy of a case file). */
#define expect_fail_image(name, buf, n, ...)                                                                           \
    do {                                                                                                               \
        write_all(check_path(g_tmp, "%s", name), buf, n);                                                                 \
        expect_fail(check_path(g_tmp, "%s", name), __VA_ARGS__);                                                          \
    } while (0)

/* Every loadable tensor of reference.txt, with its values. */
static void check_reference(const tp_bin_model *m, const char *what) {
    FILE *f = fopen(check_path(g_cases, "reference.txt"), "r");
    if (!f) {
        perror("reference.txt");
        exit(1);
    }
    char line[8192];
    int n_lines = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        char name[64], dt[8];
        int ndim, off, k;
        long long numel;
        if (sscanf(line, "%63s %7s %d%n", name, dt, &ndim, &off) != 3) {
            fprintf(stderr, "bad reference line\n");
            exit(1);
        }
        n_lines++;
        const tp_st_tensor *t = tp_bin_find(m, name);
        CHECK(t, "%s: tensor %s missing", what, name);
        if (!t) continue;
        CHECK(!strcmp(tp_dtype_name(t->dtype), dt), "%s: %s dtype %s, expected %s", what, name, tp_dtype_name(t->dtype),
              dt);
        CHECK(t->ndim == ndim, "%s: %s ndim %d, expected %d", what, name, t->ndim, ndim);
        char *p = line + off;
        for (int i = 0; i < ndim; i++) {
            long long d = strtoll(p, &p, 10);
            CHECK(i < t->ndim && t->shape[i] == d, "%s: %s shape[%d] differs (expected %lld)", what, name, i, d);
        }
        numel = strtoll(p, &p, 10);
        CHECK(t->nbytes == (size_t)numel * tp_dtype_size(t->dtype), "%s: %s nbytes %zu", what, name, t->nbytes);
        float *vals = malloc((size_t)numel * sizeof *vals);
        tp_convert_to_f32(vals, t->data, t->dtype, (size_t)numel);
        for (k = 0; k < numel; k++) {
            double want = strtod(p, &p);
            CHECK(vals[k] == (float)want, "%s: %s[%d] = %g, torch reads %g", what, name, k, vals[k], want);
        }
        free(vals);
    }
    fclose(f);
    CHECK(n_lines == 7, "reference.txt has %d tensors", n_lines);
}

static void test_cases(void) {
    char err[2048];
    /* values, views, set-aside types */
    tp_bin_model *m = tp_bin_open(check_path(g_cases, "dtypes.bin"), err, sizeof err);
    CHECK(m, "dtypes.bin: %s", err);
    if (m) {
        check_reference(m, "dtypes.bin");
        const tp_st_tensor *big = tp_bin_find(m, "big"), *row = tp_bin_find(m, "view_row"),
                           *tail = tp_bin_find(m, "view_tail");
        CHECK(big && row && tail && row->data == big->data + 10 * 4 && tail->data == big->data + 5 * 4,
              "views must point into the shared storage, not at copies");
        CHECK(!tp_bin_find(m, "mask") && tp_bin_unsupported(m, "mask") &&
                  !strcmp(tp_bin_unsupported(m, "mask"), "BoolStorage"),
              "a bool tensor is set aside as BoolStorage");
        CHECK(tp_bin_unsupported(m, "count") && !strcmp(tp_bin_unsupported(m, "count"), "LongStorage"),
              "int64 set aside");
        CHECK(tp_bin_count(m) == 7, "7 loadable tensors, got %zu", tp_bin_count(m));
        tp_bin_close(m);
    }
    /* ZIP64 records everywhere (Python's zipfile, forced) */
    m = tp_bin_open(check_path(g_cases, "zip64.bin"), err, sizeof err);
    CHECK(m, "zip64.bin: %s", err);
    if (m) {
        CHECK(tp_bin_zip64(m), "zip64.bin has a ZIP64 end record");
        check_reference(m, "zip64.bin");
        tp_bin_close(m);
    }
    /* pickle protocol 4; tensors saved as nn.Parameter */
    static const char *same[] = {"proto4.bin", "params.bin"};
    for (int i = 0; i < 2; i++) {
        m = tp_bin_open(check_path(g_cases, "%s", same[i]), err, sizeof err);
        CHECK(m, "%s: %s", same[i], err);
        if (m) check_reference(m, same[i]);
        tp_bin_close(m);
    }
    /* the same from a memory buffer (the fuzzer's entry point) */
    size_t n;
    uint8_t *buf = read_all(check_path(g_cases, "dtypes.bin"), &n);
    m = tp_bin_open_buffer(buf, n, "dtypes.bin (memory)", err, sizeof err);
    CHECK(m, "from memory: %s", err);
    if (m) check_reference(m, "memory");
    tp_bin_close(m);

    /* bad files from torch / Python */
    expect_fail(check_path(g_cases, "legacy.bin"), "legacy.bin", "legacy format", "torch < 1.6", NULL);
    expect_fail(check_path(g_cases, "evil.bin"), "refusing to load os.system from", "evil.bin", "not a tensor", NULL);
    CHECK(access("tpgen_pwned_marker", F_OK) != 0, "the marker file exists: something ran the pickle");
    expect_fail(check_path(g_cases, "badop.bin"), "badop.bin", "opcode 0x69 (INST) is not allowed", NULL);
    CHECK(access("tpgen_pwned_marker", F_OK) != 0, "the marker file exists: something ran the pickle");
    expect_fail(check_path(g_cases, "nostorage.bin"), "nostorage.bin", "tensor f16", "storage record", "data/1 is missing",
                NULL);
    expect_fail(check_path(g_cases, "noncontig.bin"), "noncontig.bin", "tensor transposed", "strides [1, 3]",
                "shape [3, 2]", "not contiguous", NULL);

    /* truncated copies: every cut must fail cleanly; a few are checked for the message */
    const char *cut = check_path(g_tmp, "truncated.bin");
    write_all(cut, buf, n * 2 / 3);
    expect_fail(cut, "truncated.bin", "truncated", NULL);
    write_all(cut, buf, n - 5);
    expect_fail(cut, "truncated.bin", "truncated", NULL);
    write_all(cut, buf, 0);
    expect_fail(cut, "truncated.bin", "empty file", NULL);
    int accepted = 0;
    for (size_t k = 0; k < n; k++) {
        tp_bin_model *t = tp_bin_open_buffer(buf, k, "cut", err, sizeof err);
        accepted += t != NULL;
        tp_bin_close(t);
    }
    CHECK(!accepted, "%d truncated buffers were accepted", accepted);
    /* every single-byte change must be accepted or refused, never crash */
    uint8_t *flip = malloc(n);
    for (size_t k = 0; k < n; k++) {
        memcpy(flip, buf, n);
        flip[k] ^= 0x5a;
        tp_bin_close(tp_bin_open_buffer(flip, n, "flip", err, sizeof err));
    }
    free(flip);
    write_all(cut, "not a zip at all", 16);
    expect_fail(cut, "not a torch.save zip archive", NULL);
    free(buf);

    /* the pickle VM alone, on hand-written programs */
#define P(s) s, sizeof(s) - 1
    static const struct {
        const char *pkl;
        size_t n;
        const char *err;
    } vm_cases[] = {
        /* string pieces split where a hex escape would swallow the next letter */
        {P("\x80\x02}."), NULL},                    /* an empty state dict */
        {P("\x80\x02]q\x00."), "not a state dict"}, /* a list */
        {P("\x80\x02}(X\x01\x00\x00\x00"
           "aK\x01u."),
         "entry a is an int, not a tensor"},
        {P("\x80\x02"
           "c__builtin__\neval\n."),
         "refusing to load __builtin__.eval"},
        {P("\x80\x02\x8c\x02os\x8c\x06system\x93."), "refusing to load os.system"}, /* STACK_GLOBAL */
        {P("\x80\x02"
           "ccollections\nOrderedDict\n)R"),
         "no STOP"},
        {P("\x80\x02h\x05."), "memo index 5 was never set"},
        {P("\x80\x02t."), "no mark"},
        {P("\x80\x02\x81."), "0x81 (NEWOBJ) is not allowed"},
        {P("\x80\x02"
           "ctorch\nFloatStorage\n)R."),
         "a storage type may appear only in a persistent id"},
        {P("\x80\x02}(X\x01\x00\x00\x00"
           "a"
           "ctorch._utils\n_rebuild_tensor_v2\n"
           "("
           "(X\x07\x00\x00\x00"
           "storage"
           "ctorch\nFloatStorage\nX\x01\x00\x00\x00"
           "0X\x03\x00\x00\x00"
           "cpuK\x04tQK\x00K\x02\x85K\x01\x85\x89Nt"
           "Ru."),
         NULL}, /* one tensor, hand-written */
    };
    for (size_t i = 0; i < sizeof vm_cases / sizeof *vm_cases; i++) {
        tp_pickle_dict d;
        int rc = tp_unpickle_state_dict((const uint8_t *)vm_cases[i].pkl, vm_cases[i].n, "case", &d, err, sizeof err);
        if (!vm_cases[i].err) CHECK(rc == 0 && d.n == (i ? 1u : 0u), "vm case %zu: %s", i, rc ? err : "wrong count");
        else
            CHECK(rc != 0 && strstr(err, vm_cases[i].err), "vm case %zu: expected \"%s\", got %s", i, vm_cases[i].err,
                  rc ? err : "success");
        if (!rc) tp_pickle_dict_free(&d);
    }
}

/* Sizes in the central directory that run past the end of the file: the record's data would be
 * read beyond the mapping. Stored entries: compressed size = size; both patched. The data starts
 * after the local header (30 bytes + name + extra); the file holds exactly n - start bytes from
 * there, which is accepted, one more is not. ZIP64: 64-bit sizes so large that start + size wraps
 * around to a small number. */
static void test_zip_sizes(void) {
    char err[2048];
    size_t n;
    uint8_t *buf = read_all(check_path(g_cases, "dtypes.bin"), &n), *c = central_entry(buf, n, "/data/0");
    CHECK(c && rd_le(c + 20, 4) == rd_le(c + 24, 4), "dtypes.bin: no stored central entry */data/0");
    if (c) {
        const uint8_t *loc = buf + rd_le(c + 42, 4);
        uint64_t start = (uint64_t)(loc - buf) + 30 + rd_le(loc + 26, 2) + rd_le(loc + 28, 2);
        char want[128];
        for (int over = 0; over <= 1; over++) {
            wr_le(c + 20, n - start + over, 4);
            wr_le(c + 24, n - start + over, 4);
            if (!over) {
                tp_bin_model *m = tp_bin_open_buffer(buf, n, "to the end", err, sizeof err);
                CHECK(m, "a record that ends at the end of the file: %s", err);
                tp_bin_close(m);
                continue;
            }
            snprintf(want, sizeof want, "%llu bytes from byte %llu run past the end of the file (%zu bytes)",
                     (unsigned long long)(n - start + 1), (unsigned long long)start, n);
            expect_fail_image("sizes_past_end.bin", buf, n, "sizes_past_end.bin", "corrupt zip", "entry dtypes/data/0",
                              want, NULL);
        }
    }
    free(buf);

    buf = read_all(check_path(g_cases, "zip64.bin"), &n);
    c = central_entry(buf, n, "/data/0");
    /* forced ZIP64: both 32-bit sizes are 0xffffffff, the extra field (id 1) holds them */
    uint8_t *x = c ? c + 46 + rd_le(c + 28, 2) : NULL;
    CHECK(x && rd_le(c + 20, 4) == 0xffffffffu && rd_le(c + 24, 4) == 0xffffffffu && rd_le(x, 2) == 1 &&
              rd_le(x + 2, 2) >= 16,
          "zip64.bin: */data/0 has no ZIP64 sizes");
    if (x && rd_le(x, 2) == 1) {
        wr_le(x + 4, UINT64_MAX - 15, 8);
        wr_le(x + 12, UINT64_MAX - 15, 8);
        char want[128];
        snprintf(want, sizeof want, "entry dtypes/data/0: %llu bytes from byte", (unsigned long long)(UINT64_MAX - 15));
        expect_fail_image("zip64_sizes_wrap.bin", buf, n, "zip64_sizes_wrap.bin", "corrupt zip", want,
                          "run past the end of the file", NULL);
    }
    free(buf);
}

/* Strides larger than row-major (a view of every other row or column, a slice of wider rows):
 * not contiguous, refused like a transposed view. noncontig.bin holds shape (3, 2) with strides
 * (1, 3) over a 6-element storage; its stride tuple (BININT1 1, BININT1 3, TUPLE2) is patched
 * in place: (3, 1) and (4, 2) fit the storage's element count but not row-major order. */
static void test_strides(void) {
    size_t n;
    uint8_t *buf = read_all(check_path(g_cases, "noncontig.bin"), &n);
    static const uint8_t tuple[] = {'K', 1, 'K', 3, 0x86};
    uint8_t *t = memmem(buf, n, tuple, sizeof tuple);
    CHECK(t && !memmem(t + 1, n - (size_t)(t + 1 - buf), tuple, sizeof tuple),
          "noncontig.bin: the stride tuple (1, 3) is not there once");
    if (t) {
        t[1] = 3, t[3] = 1;
        expect_fail_image("strided_rows.bin", buf, n, "strided_rows.bin", "tensor transposed",
                          "strides [3, 1] for shape [3, 2]", "not contiguous", NULL);
        t[1] = 4, t[3] = 2;
        expect_fail_image("strided_both.bin", buf, n, "strided_both.bin", "tensor transposed",
                          "strides [4, 2] for shape [3, 2]", "not contiguous", NULL);
        t[1] = 2, t[3] = 1; /* row-major: the same bytes read as a [3, 2] matrix */
        char err[2048];
        tp_bin_model *m = tp_bin_open_buffer(buf, n, "row-major", err, sizeof err);
        CHECK(m && tp_bin_find(m, "transposed"), "strides [2, 1] for shape [3, 2] refused: %s", m ? "no tensor" : err);
        tp_bin_close(m);
    }
    free(buf);
}

/* A memo index is bounded by the pickle's size (each memo entry takes an opcode), not by the
 * 2^32 a LONG_BINPUT can say: refused with its message at size + 1, accepted at size. */
static void test_memo_bound(void) {
    uint8_t pkl[] = {0x80, 2, '}', 'r', 0, 0, 0, 0, '.'}; /* PROTO 2, EMPTY_DICT, LONG_BINPUT i, STOP */
    char err[2048], want[64];
    for (uint64_t idx = sizeof pkl; idx <= sizeof pkl + 1; idx++) {
        wr_le(pkl + 4, idx, 4);
        tp_pickle_dict d;
        err[0] = 0;
        int rc = tp_unpickle_state_dict(pkl, sizeof pkl, "memo", &d, err, sizeof err);
        if (idx == sizeof pkl) CHECK(rc == 0 && d.n == 0, "memo index %llu (= the size) refused: %s", (unsigned long long)idx, err);
        else {
            snprintf(want, sizeof want, "memo index %llu is out of range", (unsigned long long)idx);
            CHECK(rc != 0 && strstr(err, want), "memo index %llu: expected \"%s\", got %s", (unsigned long long)idx, want,
                  rc ? err : "success");
            printf("ok: memo index %llu in a %zu-byte pickle -> %s\n", (unsigned long long)idx, sizeof pkl, err);
        }
        if (!rc) tp_pickle_dict_free(&d);
    }
}

/* Indexes and format choice, made here. */
static void test_dirs(void) {
    char err[2048], *d;
    d = check_path(g_tmp, "idx_missing");
    mkdir_fresh(d);
    write_all(check_path(d, "pytorch_model.bin.index.json"),
              "{\"weight_map\": {\"a\": \"pytorch_model-00001-of-00002.bin\"}}", 57);
    expect_fail(d, "pytorch_model-00001-of-00002.bin", "weight_map of", "No such file", NULL);
    d = check_path(g_tmp, "idx_escape");
    mkdir_fresh(d);
    write_all(check_path(d, "pytorch_model.bin.index.json"), "{\"weight_map\": {\"f32\": \"../dtypes.bin\"}}", 40);
    expect_fail(d, "\"../dtypes.bin\"", "leaves the model directory", NULL);
    write_all(check_path(d, "pytorch_model.bin.index.json"), "{\"weight_map\": {\"f32\": \"/etc/passwd\"}}", 38);
    expect_fail(d, "\"/etc/passwd\"", "absolute", NULL);
    d = check_path(g_tmp, "idx_lacks");
    mkdir_fresh(d);
    symlink_to(check_path(g_cases, "dtypes.bin"), check_path(d, "a.bin"));
    write_all(check_path(d, "pytorch_model.bin.index.json"), "{\"weight_map\": {\"nope\": \"a.bin\"}}", 33);
    expect_fail(d, "maps tensor nope to", "lacks it", NULL);

    /* both formats: safetensors wins and the description says so */
    d = check_path(g_tmp, "both");
    mkdir_fresh(d);
    symlink_to(check_path(g_data, "tiny-f32/model.safetensors"), check_path(d, "model.safetensors"));
    symlink_to(check_path(g_data, "bin/tiny-f32/pytorch_model.bin"), check_path(d, "pytorch_model.bin"));
    tp_ckpt *c = tp_ckpt_open(d, err, sizeof err);
    CHECK(c && !tp_ckpt_is_bin(c), "both formats: %s", c ? tp_ckpt_describe(c) : err);
    if (c) {
        CHECK(strstr(tp_ckpt_describe(c), "model.safetensors (safetensors)") &&
                  strstr(tp_ckpt_describe(c), "pytorch_model.bin is also there and was not read"),
              "%s", tp_ckpt_describe(c));
        printf("ok: both formats -> %s\n", tp_ckpt_describe(c));
    }
    tp_ckpt_close(c);
    d = check_path(g_tmp, "empty");
    mkdir_fresh(d);
    c = tp_ckpt_open(d, err, sizeof err);
    CHECK(!c && strstr(err, "no model.safetensors or") && strstr(err, "no pytorch_model.bin"), "empty dir: %s",
          c ? "opened" : err);
    tp_ckpt_close(c);
}

/* The .bin copies of the HF fixtures hold exactly the safetensors tensors. */
static void test_fixture(const char *name, int want_files) {
    char err[2048];
    tp_ckpt *st = tp_ckpt_open(check_path(g_data, "%s", name), err, sizeof err);
    CHECK(st, "%s: %s", name, err);
    tp_ckpt *bin = tp_ckpt_open(check_path(g_data, "bin/%s", name), err, sizeof err);
    CHECK(bin, "bin/%s: %s", name, err);
    if (!st || !bin) {
        tp_ckpt_close(st);
        tp_ckpt_close(bin);
        return;
    }
    CHECK(tp_ckpt_is_bin(bin) && tp_ckpt_file_count(bin) == (size_t)want_files, "bin/%s: %zu files", name,
          tp_ckpt_file_count(bin));
    size_t same = 0;
    for (size_t i = 0; i < tp_ckpt_count(st); i++) {
        const tp_st_tensor *a = tp_ckpt_at(st, i), *b = tp_ckpt_find(bin, a->name);
        CHECK(b, "bin/%s lacks %s", name, a->name);
        if (!b) continue;
        int ok = a->dtype == b->dtype && a->ndim == b->ndim && a->nbytes == b->nbytes &&
                 !memcmp(a->shape, b->shape, sizeof a->shape[0] * (size_t)a->ndim) &&
                 !memcmp(a->data, b->data, a->nbytes);
        CHECK(ok, "bin/%s: %s differs from the safetensors tensor", name, a->name);
        same += ok;
    }
    printf("ok: bin/%s: %zu tensors identical to the safetensors ones (%s)\n", name, same, tp_ckpt_describe(bin));
    tp_ckpt_close(st);
    tp_ckpt_close(bin);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: test_bin TMPDIR CASES_DIR DATA_DIR\n");
        return 2;
    }
    mkdir_fresh(argv[1]);
    g_tmp = realpath(argv[1], NULL), g_cases = realpath(argv[2], NULL), g_data = realpath(argv[3], NULL);
    if (!g_tmp || !g_cases || !g_data) {
        perror("realpath");
        return 1;
    }
    if (chdir(g_tmp) != 0) {
        perror(g_tmp);
        return 1;
    }
    test_cases();
    test_zip_sizes();
    test_strides();
    test_memo_bound();
    test_dirs();
    test_fixture("tiny-f32", 1);
    test_fixture("rot-full-bf16", 3);
    CHECK(access("tpgen_pwned_marker", F_OK) != 0, "the marker file exists");
    printf("%d checks, %d failed\n", g_checks, g_fail);
    return g_fail ? 1 : 0;
}
