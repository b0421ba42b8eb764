/* Fuzz target: the torch.save (.bin) reader, engine/checkpoint/zipfile.c + engine/checkpoint/unpickle.c +
 * engine/checkpoint/torch_bin.c, on bytes in memory (tp_bin_open_buffer, tp_unpickle_state_dict).
 *
 * The first byte picks what the rest is:
 *   even: a whole archive (zip container, data.pkl, storage records), as a file would hold it;
 *   odd:  a bare pickle, run by the unpickler alone and also wrapped by this harness into a valid
 *         archive ("archive/data.pkl" + "archive/byteorder" + storage records "archive/data/0".."7"
 *         of 64 bytes each), so that mutations of the pickle reach the tensor checks of
 *         torch_bin.c without first having to keep a zip directory consistent.
 * Any input either opens or fails with a message. When it opens: every tensor lies inside the
 * input (or the wrapping archive), nbytes = shape x dtype size, each name is found by
 * tp_bin_find, the totals agree. When the unpickler accepts a pickle: every tensor has a name, a
 * storage key, 0..8 dims, and a known storage type. (That a global off the allow-list is refused
 * by name is tested by tests/bin.cmake's evil.bin and badop.bin cases.) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/torch_bin.h"
#include "checkpoint/unpickle.h"

#define N_RECORDS 8
#define RECORD_BYTES 64

typedef struct {
    uint8_t *b;
    size_t n, cap;
} buf;

static void put(buf *o, const void *p, size_t n) {
    if (o->n + n > o->cap) {
        o->cap = (o->n + n) * 2;
        o->b = realloc(o->b, o->cap);
        if (!o->b) abort();
    }
    memcpy(o->b + o->n, p, n);
    o->n += n;
}
static void put16(buf *o, uint16_t v) { put(o, (uint8_t[]){v & 0xff, v >> 8}, 2); }
static void put32(buf *o, uint32_t v) { put(o, (uint8_t[]){v & 0xff, v >> 8 & 0xff, v >> 16 & 0xff, v >> 24}, 4); }

/* A stored (method 0) zip archive of the given entries, as Python's zipfile writes it (CRCs 0:
 * the reader does not check them). */
static buf zip_of(const char *const *names, const uint8_t *const *data, const size_t *sizes, int n) {
    buf o = {0};
    uint32_t off[16];
    for (int i = 0; i < n; i++) {
        off[i] = (uint32_t)o.n;
        put32(&o, 0x04034b50u);
        put16(&o, 20); put16(&o, 0); put16(&o, 0); put16(&o, 0); put16(&o, 0); /* version, flags, method, time, date */
        put32(&o, 0); put32(&o, (uint32_t)sizes[i]); put32(&o, (uint32_t)sizes[i]);
        put16(&o, (uint16_t)strlen(names[i])); put16(&o, 0);
        put(&o, names[i], strlen(names[i]));
        put(&o, data[i], sizes[i]);
    }
    uint32_t cd = (uint32_t)o.n;
    for (int i = 0; i < n; i++) {
        put32(&o, 0x02014b50u);
        put16(&o, 20); put16(&o, 20); put16(&o, 0); put16(&o, 0); put16(&o, 0); put16(&o, 0);
        put32(&o, 0); put32(&o, (uint32_t)sizes[i]); put32(&o, (uint32_t)sizes[i]);
        put16(&o, (uint16_t)strlen(names[i])); put16(&o, 0); put16(&o, 0); put16(&o, 0); put16(&o, 0);
        put32(&o, 0); put32(&o, off[i]);
        put(&o, names[i], strlen(names[i]));
    }
    uint32_t cd_size = (uint32_t)o.n - cd;
    put32(&o, 0x06054b50u);
    put16(&o, 0); put16(&o, 0); put16(&o, (uint16_t)n); put16(&o, (uint16_t)n);
    put32(&o, cd_size); put32(&o, cd); put16(&o, 0);
    return o;
}

static void check_model(tp_bin_model *m, const uint8_t *lo, size_t size) {
    size_t total = 0;
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < tp_bin_count(m); i++) {
        const tp_st_tensor *t = tp_bin_at(m, i);
        if (!t->name || tp_bin_find(m, t->name) != t) { fprintf(stderr, "tensor %zu not found by name\n", i); abort(); }
        if (t->ndim < 0 || t->ndim > TP_ST_MAX_DIMS) abort();
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0) abort();
            numel *= (uint64_t)t->shape[d];
        }
        if (numel * tp_dtype_size(t->dtype) != t->nbytes) {
            fprintf(stderr, "%s: nbytes %zu != shape x %zu\n", t->name, t->nbytes, tp_dtype_size(t->dtype));
            abort();
        }
        if (t->nbytes > size || t->data < lo || t->data > lo + size - t->nbytes) {
            fprintf(stderr, "%s: data outside the input\n", t->name);
            abort();
        }
        if (t->nbytes) sink ^= t->data[0] ^ t->data[t->nbytes - 1]; /* ASan checks the bounds too */
        total += t->nbytes;
    }
    if (total != tp_bin_total_bytes(m) || tp_bin_file_count(m) != 1) abort();
    (void)sink;
}

static void run_pickle(const uint8_t *p, size_t n) {
    char err[512] = "";
    tp_pickle_dict d;
    if (tp_unpickle_state_dict(p, n, "fuzz.pkl", &d, err, sizeof err) == 0) {
        for (size_t i = 0; i < d.n; i++) {
            const tp_pickle_tensor *t = &d.tensors[i];
            if (!t->name || !t->storage_key || t->ndim < 0 || t->ndim > TP_PICKLE_MAX_DIMS ||
                t->type > TP_STORE_BOOL || !tp_store_type_name(t->type)) {
                fprintf(stderr, "unpickler accepted a malformed tensor %zu\n", i);
                abort();
            }
        }
        tp_pickle_dict_free(&d);
    } else if (!err[0]) {
        fprintf(stderr, "unpickler failed without a message\n");
        abort();
    }

    /* the same pickle inside a valid archive with storage records */
    static uint8_t records[N_RECORDS][RECORD_BYTES];
    static const char little[] = "little";
    const char *names[N_RECORDS + 2] = {"archive/data.pkl", "archive/byteorder"};
    const uint8_t *data[N_RECORDS + 2] = {p, (const uint8_t *)little};
    size_t sizes[N_RECORDS + 2] = {n, 6};
    static char rec_names[N_RECORDS][32];
    for (int i = 0; i < N_RECORDS; i++) {
        snprintf(rec_names[i], sizeof rec_names[i], "archive/data/%d", i);
        for (int k = 0; k < RECORD_BYTES; k++) records[i][k] = (uint8_t)(i * RECORD_BYTES + k);
        names[i + 2] = rec_names[i];
        data[i + 2] = records[i];
        sizes[i + 2] = RECORD_BYTES;
    }
    buf z = zip_of(names, data, sizes, N_RECORDS + 2);
    err[0] = 0;
    tp_bin_model *m = tp_bin_open_buffer(z.b, z.n, "fuzz.bin", err, sizeof err);
    if (m) {
        check_model(m, z.b, z.n);
        tp_bin_close(m);
    } else if (!err[0]) {
        fprintf(stderr, "archive refused without a message\n");
        abort();
    }
    free(z.b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    if (data[0] & 1) {
        run_pickle(p, n);
        return 0;
    }
    char err[512] = "";
    tp_bin_model *m = tp_bin_open_buffer(p, n, "fuzz.bin", err, sizeof err);
    if (m) {
        check_model(m, p, n);
        tp_bin_close(m);
    } else if (!err[0]) {
        fprintf(stderr, "archive refused without a message\n");
        abort();
    }
    return 0;
}
