#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/json.h"
#include "util/log.h"

static int get_int(const json_value *root, const char *key, int *out, int required, const char *path, char *err,
                   size_t err_size) {
    const json_value *v = json_get(root, key);
    if (!v || v->type == JSON_NULL) {
        if (required) snprintf(err, err_size, "%s: missing field \"%s\"", path, key);
        return required ? -1 : 0;
    }
    if (v->type != JSON_NUMBER || !v->is_integer || v->integer < 0 || v->integer > 1000000000) {
        snprintf(err, err_size, "%s: field \"%s\" must be a non-negative integer", path, key);
        return -1;
    }
    *out = (int)v->integer;
    return 1;
}

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
    const json_value *mt = json_get(root, "model_type");
    if (mt && mt->type == JSON_STRING && strcmp(mt->str, "codegen") != 0) {
        snprintf(err, err_size, "%s: model_type is \"%s\"; tpgen runs CodeGen (\"codegen\") models", path, mt->str);
        goto out;
    }
    const json_value *act = json_get(root, "activation_function");
    if (act && act->type == JSON_STRING && strcmp(act->str, "gelu_new") != 0) {
        snprintf(err, err_size, "%s: activation_function \"%s\" is not supported (CodeGen uses gelu_new)", path,
                 act->str);
        goto out;
    }
    if (get_int(root, "vocab_size", &c->vocab_size, 1, path, err, err_size) < 0) goto out;
    if (get_int(root, "n_positions", &c->n_positions, 1, path, err, err_size) < 0) goto out;
    if (get_int(root, "n_embd", &c->n_embd, 1, path, err, err_size) < 0) goto out;
    if (get_int(root, "n_layer", &c->n_layer, 1, path, err, err_size) < 0) goto out;
    if (get_int(root, "n_head", &c->n_head, 1, path, err, err_size) < 0) goto out;
    if (get_int(root, "rotary_dim", &c->rotary_dim, 1, path, err, err_size) < 0) goto out;
    int inner = 0;
    if (get_int(root, "n_inner", &inner, 0, path, err, err_size) < 0) goto out;
    c->eos_token_id = c->bos_token_id = -1;
    if (get_int(root, "eos_token_id", &c->eos_token_id, 0, path, err, err_size) < 0) goto out;
    if (get_int(root, "bos_token_id", &c->bos_token_id, 0, path, err, err_size) < 0) goto out;
    const json_value *eps = json_get(root, "layer_norm_epsilon");
    c->layer_norm_epsilon = 1e-5f;
    if (eps && eps->type == JSON_NUMBER) c->layer_norm_epsilon = (float)eps->number;
    if (!(c->layer_norm_epsilon > 0) || !isfinite(c->layer_norm_epsilon)) { /* sqrt(var + eps) of a negative */
        snprintf(err, err_size, "%s: layer_norm_epsilon %g must be a positive finite number", path,
                 eps && eps->type == JSON_NUMBER ? eps->number : (double)c->layer_norm_epsilon);
        goto out;
    }
    const json_value *tie = json_get(root, "tie_word_embeddings");
    c->tie_word_embeddings = tie && tie->type == JSON_BOOL && tie->boolean;

    if (c->n_embd <= 0 || c->n_head <= 0 || c->n_layer <= 0 || c->vocab_size <= 0 || c->n_positions <= 0) {
        snprintf(err, err_size, "%s: n_embd, n_head, n_layer, vocab_size and n_positions must be positive", path);
        goto out;
    }
    /* Limits far above any CodeGen (16B: E=6144, L=34, V=51200), checked before any size is
     * computed from them, so size arithmetic (64-bit) cannot overflow and an absurd config is
     * refused before anything is allocated or listed. n_positions is only a limit on sequence
     * length: nothing is sized by it. */
    const struct { const char *name; long value, limit; } lim[] = {
        {"n_embd", c->n_embd, TP_MAX_EMBD},     {"n_layer", c->n_layer, TP_MAX_LAYERS},
        {"n_head", c->n_head, TP_MAX_HEADS},    {"vocab_size", c->vocab_size, TP_MAX_VOCAB},
        {"n_inner", inner, TP_MAX_INNER},
    };
    for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++)
        if (lim[i].value > lim[i].limit) {
            snprintf(err, err_size, "%s: %s %ld is above tpgen's limit %ld", path, lim[i].name, lim[i].value,
                     lim[i].limit);
            goto out;
        }
    if (c->n_embd % c->n_head) {
        snprintf(err, err_size, "%s: n_embd %d is not divisible by n_head %d", path, c->n_embd, c->n_head);
        goto out;
    }
    /* n_head % qkv_groups: checked by tp_checkpoint_qkv_groups (checkpoint/remote_code.h), once the checkpoint's modeling code is known */
    c->head_dim = c->n_embd / c->n_head;
    if (c->rotary_dim > c->head_dim || c->rotary_dim % 2) {
        snprintf(err, err_size, "%s: rotary_dim %d must be even and at most head_dim %d", path, c->rotary_dim,
                 c->head_dim);
        goto out;
    }
    long n_inner = inner > 0 ? inner : 4L * c->n_embd;
    if (n_inner > TP_MAX_INNER) {
        snprintf(err, err_size, "%s: the MLP width %ld (n_inner, or 4 * n_embd) is above tpgen's limit %ld", path,
                 n_inner, (long)TP_MAX_INNER);
        goto out;
    }
    c->n_inner = (int)n_inner;
    rc = 0;
out:
    json_free(root);
    return rc;
}

void tp_config_valid_tp(const tp_config *c, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = 0;
    for (int tp = 1; tp <= c->n_head && used + 16 < size; tp++)
        if (c->n_head % tp == 0) used += snprintf(buf + used, size - used, used ? ", %d" : "%d", tp);
}
