#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

int tp_config_tp_ok(const tp_config *c, int tp) {
    return tp >= 1 && c->n_head % tp == 0 && (c->n_kv_head % tp == 0 || tp % c->n_kv_head == 0);
}

void tp_config_valid_tp(const tp_config *c, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = 0;
    for (int tp = 1; tp <= c->n_head && used + 16 < size; tp++)
        if (tp_config_tp_ok(c, tp)) used += snprintf(buf + used, size - used, used ? ", %d" : "%d", tp);
}
