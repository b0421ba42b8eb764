/* The loader's unpacking of AWQ / GPTQ checkpoints (engine/model/weights_q4.c), exactly: for every
 * 4-bit module of each fixture given (tests/data/int4, tools/fixtures/make.py int4),
 *  1. the whole matrix staged as at TP 1 has the canonical form the fixture maker quantized (q,
 *     zero, scale: the FNV-1a 64 of expected.json's canonical_fnv1a64): AWQ's nibble order, GPTQ's
 *     k-packed qweight, v1 zeros read back with the borrow of 0x11111111, f16 scales;
 *  2. the second half of its columns (a row-parallel rank's slice at TP 2) is those columns of the
 *     whole: q as they are, and each slice group the whole row's group (group_size -1: the slice is
 *     one group with the row's scale and zero).
 * usage: test_q4_unpack FIXTURE_DIR... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/config.h"
#include "model/weights_items.h"
#include "util/json.h"
#include "util/log.h"

static int g_fail, g_checks;

#define CHECK(cond, ...)                              \
    do {                                              \
        g_checks++;                                   \
        if (!(cond)) {                                \
            g_fail++;                                 \
            fprintf(stderr, "FAIL: " __VA_ARGS__);    \
            fputc('\n', stderr);                      \
        }                                             \
    } while (0)

static uint64_t fnv1a(const void *p, size_t n, uint64_t h) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

typedef struct {
    uint8_t *q, *zero;
    float *scale;
} canon;

/* The module staged as a q4_src item: all `out` rows, columns [k0, k0 + kn) of `in`. */
static canon stage(const tp_ckpt *st, const char *dir, const tp_config *c, const char *module, int64_t out,
                   int64_t in, int64_t k0, int64_t kn) {
    load_item it;
    memset(&it, 0, sizeof it);
    it.n_parts = 1;
    load_part *p = &it.part[0];
    snprintf(p->module, sizeof p->module, "%s", module);
    snprintf(p->name, sizeof p->name, "%s.weight", module);
    p->rows = out;
    p->cols = in;
    it.is_matrix = it.q4 = it.q4_src = 1;
    it.out_rows = out;
    it.slice = k0 == 0 && kn == in ? SLICE_ROWS : SLICE_COLS;
    p->first = it.slice == SLICE_ROWS ? 0 : k0;
    p->count = it.slice == SLICE_ROWS ? out : kn;
    it.group = c->quant.group > 0 ? c->quant.group : (int)kn;
    tp_q4_check_item(st, dir, c, &it);
    const int64_t ng = kn / it.group;
    canon r = {tp_malloc((size_t)(out * kn)), tp_malloc((size_t)(out * ng)), tp_malloc((size_t)(out * ng) * 4)};
    tp_q4_stage(&it, c, NULL, NULL, r.q, r.scale, r.zero);
    return r;
}

static void check_fixture(const char *dir) {
    char err[2048], path[4096];
    tp_config c;
    if (tp_config_load(dir, &c, err, sizeof err)) tp_die("%s", err);
    c.q4_group = c.quant.group;
    tp_ckpt *st = tp_ckpt_open(dir, err, sizeof err);
    if (!st) tp_die("%s", err);
    snprintf(path, sizeof path, "%s/expected.json", dir);
    size_t len;
    char *text = tp_read_file(path, &len);
    if (!text) tp_die("cannot read %s", path);
    json_value *root = json_parse(text, len, err, sizeof err);
    const json_value *mods = root ? json_get(root, "canonical_fnv1a64") : NULL;
    if (!mods || mods->type != JSON_OBJECT || !mods->n) tp_die("%s: no canonical_fnv1a64 object", path);
    for (size_t i = 0; i < mods->n; i++) {
        const char *m = mods->keys[i];
        const json_value *v = &mods->items[i];
        const int64_t out = v->items[0].integer, in = v->items[1].integer;
        const int64_t G = c.quant.group > 0 ? c.quant.group : in, ng = in / G;
        canon whole = stage(st, dir, &c, m, out, in, 0, in);
        uint64_t h = fnv1a(whole.q, (size_t)(out * in), 0xcbf29ce484222325ull);
        h = fnv1a(whole.zero, (size_t)(out * ng), h);
        h = fnv1a(whole.scale, (size_t)(out * ng) * 4, h); /* little-endian host, as the file */
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
        CHECK(!strcmp(hex, v->items[2].str), "%s: %s: canonical form hashes to %s, the fixture maker's %s", dir, m,
              hex, v->items[2].str);
        const int64_t k0 = in / 2, kn = in - k0; /* a TP 2 row-parallel rank's slice */
        if ((c.quant.group > 0 && k0 % G) || (c.quant.group < 0 && kn % 32)) continue;
        canon half = stage(st, dir, &c, m, out, in, k0, kn);
        const int64_t hg = c.quant.group > 0 ? kn / G : 1;
        int bad_q = 0, bad_g = 0;
        for (int64_t n = 0; n < out; n++) {
            for (int64_t k = 0; k < kn; k++) bad_q += half.q[n * kn + k] != whole.q[n * in + k0 + k];
            for (int64_t j = 0; j < hg; j++) { /* slice group j is the row's group (k0 + j G) / G, or its one group */
                const int64_t g = c.quant.group > 0 ? (k0 + j * G) / G : 0;
                bad_g += half.zero[n * hg + j] != whole.zero[n * ng + g] ||
                         memcmp(&half.scale[n * hg + j], &whole.scale[n * ng + g], 4) != 0;
            }
        }
        CHECK(!bad_q && !bad_g, "%s: %s: columns [%lld, %lld) staged alone differ from the whole's: %d q, %d groups",
              dir, m, (long long)k0, (long long)in, bad_q, bad_g);
        free(half.q), free(half.zero), free(half.scale);
        free(whole.q), free(whole.zero), free(whole.scale);
    }
    printf("%s: %zu modules (%s)\n", dir, mods->n, tp_quant_describe(&c.quant));
    json_free(root);
    free(text);
    tp_ckpt_close(st);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_q4_unpack FIXTURE_DIR...\n");
        return 2;
    }
    for (int i = 1; i < argc; i++) check_fixture(argv[i]);
    printf("test_q4_unpack: %d checks, %d failed\n", g_checks, g_fail);
    return g_fail ? 1 : 0;
}
