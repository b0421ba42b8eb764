#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kernels/common/tp_quant4.h" /* TP_Q4_GROUP_ALIGN */
#include "util/json.h"
#include "util/log.h"

int tp_config_load(const char *path_in, tp_config *c, char *err, size_t err_size) {
    char path[4096];
    struct stat st;
    if (stat(path_in, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(path, sizeof path, "%s/config.json", path_in);
    else snprintf(path, sizeof path, "%s", path_in);

    size_t len;
    char *text = tp_read_file(path, &len);
    if (!text) {
        snprintf(err, err_size, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    char jerr[256];
    json_value *root = json_parse(text, len, jerr, sizeof jerr);
    free(text);
    if (!root || root->type != JSON_OBJECT) {
        snprintf(err, err_size, "%s is not a JSON object: %s", path, root ? "top level is not an object" : jerr);
        json_free(root);
        return -1;
    }
    memset(c, 0, sizeof *c);
    int rc = -1;
    c->arch = tp_arch_of_config(root, path, err, err_size);
    if (!c->arch || c->arch->read(root, path, c, err, err_size)) goto out;
    if (tp_quant_config_read(root, path, &c->quant, err, err_size)) goto out;
    c->q4_group = c->quant.method != TP_QUANT_NONE ? c->quant.group : 0;
    c->eos_token_id = c->bos_token_id = -1;
    const char *ids[2] = {"eos_token_id", "bos_token_id"};
    int *dst[2] = {&c->eos_token_id, &c->bos_token_id};
    for (int i = 0; i < 2; i++) { /* an int, or null / absent (-1); a list (several eos ids) is not read */
        const json_value *v = json_get(root, ids[i]);
        if (!v || v->type == JSON_NULL || v->type == JSON_ARRAY) continue;
        if (v->type != JSON_NUMBER || !v->is_integer || v->integer < 0 || v->integer > 1000000000) {
            snprintf(err, err_size, "%s: field \"%s\" must be a non-negative integer", path, ids[i]);
            goto out;
        }
        *dst[i] = (int)v->integer;
    }

    if (c->n_embd <= 0 || c->n_head <= 0 || c->n_layer <= 0 || c->vocab_size <= 0 || c->n_positions <= 0 ||
        c->n_inner <= 0) {
        snprintf(err, err_size, "%s: the hidden size, heads, layers, vocab_size, positions and MLP width must be "
                                "positive (n_embd %d, n_head %d, n_layer %d, vocab_size %d, positions %d, MLP %d)",
                 path, c->n_embd, c->n_head, c->n_layer, c->vocab_size, c->n_positions, c->n_inner);
        goto out;
    }
    /* Limits far above any CodeGen (16B: E=6144, L=34, V=51200) or LLaMA-70B, checked before any
     * size is computed from them, so size arithmetic (64-bit) cannot overflow and an absurd config
     * is refused before anything is allocated or listed. n_positions is only a limit on sequence
     * length: nothing is sized by it. */
    const struct { const char *name; long value, limit; } lim[] = {
        {"n_embd", c->n_embd, TP_MAX_EMBD},     {"n_layer", c->n_layer, TP_MAX_LAYERS},
        {"n_head", c->n_head, TP_MAX_HEADS},    {"vocab_size", c->vocab_size, TP_MAX_VOCAB},
        {"the MLP width (n_inner, 4 * n_embd or intermediate_size)", c->n_inner, TP_MAX_INNER},
        {"n_head * head_dim", (long)c->n_head * c->head_dim, TP_MAX_EMBD},
    };
    for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++)
        if (lim[i].value > lim[i].limit) {
            snprintf(err, err_size, "%s: %s %ld is above tpgen's limit %ld", path, lim[i].name, lim[i].value,
                     lim[i].limit);
            goto out;
        }
    /* n_head % qkv_groups: checked by tp_checkpoint_qkv_groups (engine/checkpoint/remote_code.h), once the checkpoint's modeling code is known */
    if (c->rotary_dim > c->head_dim || c->rotary_dim % 2) {
        snprintf(err, err_size, "%s: rotary_dim %d must be even and at most head_dim %d", path, c->rotary_dim,
                 c->head_dim);
        goto out;
    }
    rc = 0;
out:
    json_free(root);
    return rc;
}

/* The k a 4-bit matrix's rows have on one rank (slice of k0 + n of its K columns) fits group G: G
 * divides both (so a rank's groups are the whole row's), or with G = -1 (each rank's slice is one
 * group) the slice is a multiple of the kernels' step. */
static int q4_slice_ok(int G, long K, long k0, long n) {
    if (G > 0) return K % G == 0 && k0 % G == 0 && n % G == 0;
    return n > 0 && n % TP_Q4_GROUP_ALIGN == 0;
}

int tp_config_q4_ok(const tp_config *c, int tp, int G, char *why, size_t size) {
    if (!G) return 1;
    const long E = c->n_embd, HD = (long)c->n_head * c->head_dim, I = c->n_inner;
    const char *src = c->q4_from_flag ? "--group-size" : "group_size (config.json quantization_config)";
    if (!q4_slice_ok(G, E, 0, E)) { /* qkv and the MLP input read all of x: no slice */
        if (why)
            snprintf(why, size, "%s %d does not fit n_embd %ld, the columns of %s and %s%s", src, G, E,
                     c->arch->names.qkv ? "qkv_proj" : "q/k/v_proj", c->arch->mlp == TP_MLP_SILU_GATED ? "gate/up_proj" : "fc_in",
                     G > 0 ? " (it must divide them)" : " (a multiple of 32)");
        return 0;
    }
    if (tp < 1 || c->n_head % tp || !q4_slice_ok(G, HD, 0, HD / tp)) {
        if (why)
            snprintf(why, size, "TP=%d cuts the 4-bit groups of %s: each rank's %ld of its %ld columns (n_head * "
                     "head_dim / TP) %s %s %d", tp, c->arch->names.qkv ? "out_proj" : "o_proj", tp >= 1 ? HD / tp : 0,
                     HD, G > 0 ? "are not a multiple of" : "are not one group of a multiple of 32 for", src, G);
        return 0;
    }
    for (int r = 0; r < tp; r++) { /* the MLP output's column slices: tp_shard_plan's integer bounds */
        const long k0 = r * I / tp, n = (r + 1) * I / tp - k0;
        if (!q4_slice_ok(G, I, k0, n)) {
            if (why)
                snprintf(why, size, "TP=%d cuts the 4-bit groups of %s: rank %d's columns [%ld, %ld) of the MLP width "
                         "%ld do not fit %s %d", tp, c->arch->mlp == TP_MLP_SILU_GATED ? "down_proj" : "fc_out", r, k0,
                         k0 + n, I, src, G);
            return 0;
        }
    }
    return 1;
}

int tp_config_tp_ok(const tp_config *c, int tp) {
    return tp >= 1 && c->n_head % tp == 0 && (c->n_kv_head % tp == 0 || tp % c->n_kv_head == 0) &&
           tp_config_q4_ok(c, tp, c->q4_group, NULL, 0);
}

void tp_config_valid_tp(const tp_config *c, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = 0;
    for (int tp = 1; tp <= c->n_head && used + 16 < size; tp++)
        if (tp_config_tp_ok(c, tp)) used += snprintf(buf + used, size - used, used ? ", %d" : "%d", tp);
}
