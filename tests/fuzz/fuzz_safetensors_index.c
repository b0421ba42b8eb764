/* Fuzz target: the sharded-index reader (engine/checkpoint/tensor_index.c, through safetensors.c's
 * tp_st_open_index_text: model.safetensors.index.json) on any text,
 * over a fixed shard directory made at start: a.safetensors (tensors x, y), b.safetensors (z) and
 * bad.safetensors (a header length beyond the file). Either the model opens, with every tensor
 * the weight_map names found in the file it names, or it fails with a message. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint/safetensors.h"
#include "util/json.h"

static char g_dir[64];
static const char *g_files[] = {"a.safetensors", "b.safetensors", "bad.safetensors"};

static void write_file(const char *name, const char *header, size_t data_bytes, uint64_t claimed_hlen) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) { perror(path); abort(); }
    uint64_t hlen = claimed_hlen ? claimed_hlen : strlen(header);
    for (int i = 0; i < 8; i++) fputc((int)(hlen >> (8 * i) & 0xFF), f);
    fputs(header, f);
    for (size_t i = 0; i < data_bytes; i++) fputc((int)i, f);
    if (fclose(f) != 0) { perror(path); abort(); }
}

static void cleanup(void) {
    char path[128];
    for (size_t i = 0; i < sizeof g_files / sizeof *g_files; i++) {
        snprintf(path, sizeof path, "%s/%s", g_dir, g_files[i]);
        unlink(path);
    }
    rmdir(g_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    snprintf(g_dir, sizeof g_dir, "%s", "/tmp/tpgen-fuzz-index-XXXXXX");
    if (!mkdtemp(g_dir)) { perror("mkdtemp"); abort(); }
    atexit(cleanup);
    write_file(g_files[0],
               "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"y\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[8,16]}}", 16, 0);
    write_file(g_files[1], "{\"z\":{\"dtype\":\"F16\",\"shape\":[],\"data_offsets\":[0,2]},\"__metadata__\":{}}", 2, 0);
    write_file(g_files[2], "{}", 0, 1000);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[1024];
    err[0] = 0;
    tp_st_model *m = tp_st_open_index_text((const char *)data, size, "fuzz.index.json", g_dir, err, sizeof err);
    if (!m) {
        if (!err[0]) abort();
        return 0;
    }
    /* opened: the index was a JSON object whose weight_map names only tensors that exist */
    json_value *root = json_parse((const char *)data, size, NULL, 0);
    const json_value *wm = root ? json_get(root, "weight_map") : NULL;
    if (!wm || wm->type != JSON_OBJECT || wm->n == 0) abort();
    for (size_t i = 0; i < wm->n; i++) {
        const tp_st_tensor *t = tp_st_find(m, wm->keys[i]);
        if (!t || !strstr(t->file, wm->items[i].str)) abort();
    }
    for (size_t i = 0; i < tp_st_count(m); i++) {
        const tp_st_tensor *t = tp_st_at(m, i);
        if (tp_st_find(m, t->name) != t) abort();
    }
    json_free(root);
    tp_st_close(m);
    return 0;
}
