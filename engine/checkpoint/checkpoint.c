/* Format choice between the safetensors and torch.save readers: see checkpoint.h. */
#include "checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt_path.h"
#include "torch_bin.h"
#include "util/log.h"

struct tp_ckpt {
    tp_st_model *st; /* exactly one of st, bin */
    tp_bin_model *bin;
    char describe[4096 + 256];
};

static int exists_in(const char *dir, const char *name) {
    char p[4096 + 64];
    struct stat s;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return stat(p, &s) == 0;
}

tp_ckpt *tp_ckpt_open(const char *path, char *err, size_t err_size) {
    tp_ckpt *c = tp_calloc(1, sizeof *c);
    struct stat s;
    int is_dir = stat(path, &s) == 0 && S_ISDIR(s.st_mode);
    int have_st = is_dir && (exists_in(path, "model.safetensors") || exists_in(path, "model.safetensors.index.json"));
    int have_bin = is_dir && (exists_in(path, "pytorch_model.bin") || exists_in(path, "pytorch_model.bin.index.json"));
    int use_bin = is_dir ? have_bin && !have_st
                         : tp_ckpt_ends_with(path, ".bin") || tp_ckpt_ends_with(path, ".bin.index.json") ||
                               tp_ckpt_ends_with(path, ".pt") || tp_ckpt_ends_with(path, ".pth");
    if (is_dir && !have_st && !have_bin) {
        snprintf(err, err_size,
                 "no model.safetensors or model.safetensors.index.json in %s, and no pytorch_model.bin "
                 "or pytorch_model.bin.index.json: no checkpoint",
                 path);
        free(c);
        return NULL;
    }
    if (use_bin) c->bin = tp_bin_open(path, err, err_size);
    else c->st = tp_st_open(path, err, err_size);
    if (!c->st && !c->bin) {
        free(c);
        return NULL;
    }
    const char *file = c->st                  ? tp_st_at(c->st, 0) ? tp_st_at(c->st, 0)->file : path
                       : tp_bin_at(c->bin, 0) ? tp_bin_at(c->bin, 0)->file
                                              : path;
    size_t files = tp_ckpt_file_count(c);
    int n = snprintf(c->describe, sizeof c->describe, "%s%s (%s%s)", files > 1 ? "shards like " : "", file,
                     c->st ? "safetensors" : "torch.save zip", c->bin && tp_bin_zip64(c->bin) ? ", ZIP64" : "");
    if (have_st && have_bin && n > 0 && (size_t)n < sizeof c->describe)
        snprintf(c->describe + n, sizeof c->describe - (size_t)n,
                 "; pytorch_model.bin%s is also there and was not read (safetensors wins)",
                 exists_in(path, "pytorch_model.bin") ? "" : ".index.json");
    return c;
}

const tp_st_tensor *tp_ckpt_find(const tp_ckpt *c, const char *name) {
    return c->st ? tp_st_find(c->st, name) : tp_bin_find(c->bin, name);
}
size_t tp_ckpt_count(const tp_ckpt *c) { return c->st ? tp_st_count(c->st) : tp_bin_count(c->bin); }
const tp_st_tensor *tp_ckpt_at(const tp_ckpt *c, size_t i) { return c->st ? tp_st_at(c->st, i) : tp_bin_at(c->bin, i); }
size_t tp_ckpt_total_bytes(const tp_ckpt *c) { return c->st ? tp_st_total_bytes(c->st) : tp_bin_total_bytes(c->bin); }
size_t tp_ckpt_file_count(const tp_ckpt *c) { return c->st ? tp_st_file_count(c->st) : tp_bin_file_count(c->bin); }
int tp_ckpt_is_bin(const tp_ckpt *c) { return c->bin != NULL; }
const char *tp_ckpt_describe(const tp_ckpt *c) { return c->describe; }

const char *tp_ckpt_unsupported(const tp_ckpt *c, const char *name) {
    static char buf[160];
    const char *t = c->bin ? tp_bin_unsupported(c->bin, name) : NULL;
    if (!t) return NULL;
    snprintf(buf, sizeof buf, "it is stored as %s, which tpgen does not load (F32, F16, BF16 only)", t);
    return buf;
}

void tp_ckpt_close(tp_ckpt *c) {
    if (!c) return;
    tp_st_close(c->st);
    tp_bin_close(c->bin);
    free(c);
}
