/* The architecture table (arch.h) and each architecture's config.json reader: every key it
 * reads, with HF's default written where it is read. */
#include "arch.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "config.h"

/* ---- config.json fields ---- */

/* An integer key: 1 when present, 0 when absent or null (out keeps its default), -1 with err. */
static int get_int(const json_value *root, const char *key, int *out, const char *path, char *err, size_t err_size) {
    const json_value *v = json_get(root, key);
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type != JSON_NUMBER || !v->is_integer || v->integer < 0 || v->integer > 1000000000) {
        snprintf(err, err_size, "%s: field \"%s\" must be a non-negative integer", path, key);
        return -1;
    }
    *out = (int)v->integer;
    return 1;
}

static int need_int(const json_value *root, const char *key, int *out, const char *path, char *err, size_t err_size) {
    int r = get_int(root, key, out, path, err, err_size);
    if (r == 0) snprintf(err, err_size, "%s: missing field \"%s\"", path, key);
    return r == 1 ? 0 : -1;
}

/* A positive finite number (epsilons, rope_theta); absent or null keeps the default. */
static int get_pos(const json_value *root, const char *key, float *out, const char *path, char *err, size_t err_size) {
    const json_value *v = json_get(root, key);
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type != JSON_NUMBER) {
        snprintf(err, err_size, "%s: field \"%s\" must be a number", path, key);
        return -1;
    }
    if (!(v->number > 0) || !isfinite((float)v->number)) { /* sqrt(var + eps) of a negative; theta^x */
        snprintf(err, err_size, "%s: %s %g must be a positive finite number", path, key, v->number);
        return -1;
    }
    *out = (float)v->number;
    return 0;
}

static int get_bool(const json_value *root, const char *key, int *out, const char *path, char *err, size_t err_size) {
    const json_value *v = json_get(root, key);
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type != JSON_BOOL) {
        snprintf(err, err_size, "%s: field \"%s\" must be true or false", path, key);
        return -1;
    }
    *out = v->boolean;
    return 0;
}

/* A string key that must equal want when present (absent: HF's default, which is want). */
static int want_str(const json_value *root, const char *key, const char *want, const char *why, const char *path,
                    char *err, size_t err_size) {
    const json_value *v = json_get(root, key);
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type != JSON_STRING || strcmp(v->str, want) != 0) {
        snprintf(err, err_size, "%s: %s %s%s%s is not supported (%s)", path, key, v->type == JSON_STRING ? "\"" : "",
                 v->type == JSON_STRING ? v->str : json_type_name(v->type), v->type == JSON_STRING ? "\"" : "", why);
        return -1;
    }
    return 0;
}

/* ---- CodeGen (HF CodeGenConfig) ---- */
static int codegen_read(const json_value *root, const char *path, tp_config *c, char *err, size_t err_size) {
    if (want_str(root, "activation_function", "gelu_new", "CodeGen uses gelu_new", path, err, err_size)) return -1;
    if (need_int(root, "vocab_size", &c->vocab_size, path, err, err_size) ||
        need_int(root, "n_positions", &c->n_positions, path, err, err_size) ||
        need_int(root, "n_embd", &c->n_embd, path, err, err_size) ||
        need_int(root, "n_layer", &c->n_layer, path, err, err_size) ||
        need_int(root, "n_head", &c->n_head, path, err, err_size) ||
        need_int(root, "rotary_dim", &c->rotary_dim, path, err, err_size))
        return -1;
    c->n_inner = 0; /* null: 4 * n_embd (clamped: an absurd n_embd is refused by its limit) */
    if (get_int(root, "n_inner", &c->n_inner, path, err, err_size) < 0) return -1;
    if (c->n_inner == 0) c->n_inner = c->n_embd > TP_MAX_INNER / 4 ? (int)TP_MAX_INNER + 1 : 4 * c->n_embd;
    c->norm_eps = 1e-5f;
    if (get_pos(root, "layer_norm_epsilon", &c->norm_eps, path, err, err_size)) return -1;
    c->tie_word_embeddings = 0;
    if (get_bool(root, "tie_word_embeddings", &c->tie_word_embeddings, path, err, err_size)) return -1;
    c->n_kv_head = c->n_head;
    if (c->n_head > 0 && c->n_embd % c->n_head) {
        snprintf(err, err_size, "%s: n_embd %d is not divisible by n_head %d", path, c->n_embd, c->n_head);
        return -1;
    }
    c->head_dim = c->n_head > 0 ? c->n_embd / c->n_head : 0;
    c->rope_theta = 10000.0f; /* HF CodeGen's fixed base */
    c->qkv_bias = c->o_bias = 0;
    c->mlp_in_bias = c->mlp_out_bias = c->lm_head_bias = 1;
    return 0;
}

/* ---- LLaMA (HF LlamaConfig; CodeGen2.5 is one) ---- */

/* rope_scaling must be null; transformers 5 writes rope_parameters {rope_type, rope_theta} instead
 * of rope_theta: only rope_type "default" (plain RoPE) is run. */
static int llama_rope(const json_value *root, const char *path, tp_config *c, char *err, size_t err_size) {
    const json_value *sc = json_get(root, "rope_scaling");
    if (sc && sc->type != JSON_NULL) {
        const json_value *t = sc->type == JSON_OBJECT ? json_get(sc, "rope_type") : NULL;
        if (!t && sc->type == JSON_OBJECT) t = json_get(sc, "type");
        snprintf(err, err_size, "%s: rope_scaling%s%s%s is not supported (tpgen runs plain RoPE: rope_scaling null)",
                 path, t && t->type == JSON_STRING ? " \"" : "", t && t->type == JSON_STRING ? t->str : "",
                 t && t->type == JSON_STRING ? "\"" : "");
        return -1;
    }
    c->rope_theta = 10000.0f;
    if (get_pos(root, "rope_theta", &c->rope_theta, path, err, err_size)) return -1;
    const json_value *rp = json_get(root, "rope_parameters");
    if (!rp || rp->type == JSON_NULL) return 0;
    if (rp->type != JSON_OBJECT) {
        snprintf(err, err_size, "%s: field \"rope_parameters\" must be an object", path);
        return -1;
    }
    if (want_str(rp, "rope_type", "default", "tpgen runs plain RoPE: rope_type \"default\"", path, err, err_size))
        return -1;
    if (get_pos(rp, "rope_theta", &c->rope_theta, path, err, err_size)) return -1;
    float prf = 1.0f;
    if (get_pos(rp, "partial_rotary_factor", &prf, path, err, err_size)) return -1;
    if (prf != 1.0f) {
        snprintf(err, err_size, "%s: rope_parameters.partial_rotary_factor %g is not supported (LLaMA rotates all of "
                                "head_dim: 1.0)", path, (double)prf);
        return -1;
    }
    return 0;
}

static int llama_read(const json_value *root, const char *path, tp_config *c, char *err, size_t err_size) {
    if (want_str(root, "hidden_act", "silu", "LLaMA's MLP is SiLU-gated: hidden_act \"silu\"", path, err, err_size))
        return -1;
    /* LlamaConfig's defaults (LLaMA-7B's shape) */
    c->vocab_size = 32000;
    c->n_embd = 4096;
    c->n_inner = 11008;
    c->n_layer = 32;
    c->n_head = 32;
    c->n_positions = 2048;
    if (get_int(root, "vocab_size", &c->vocab_size, path, err, err_size) < 0 ||
        get_int(root, "hidden_size", &c->n_embd, path, err, err_size) < 0 ||
        get_int(root, "intermediate_size", &c->n_inner, path, err, err_size) < 0 ||
        get_int(root, "num_hidden_layers", &c->n_layer, path, err, err_size) < 0 ||
        get_int(root, "num_attention_heads", &c->n_head, path, err, err_size) < 0 ||
        get_int(root, "max_position_embeddings", &c->n_positions, path, err, err_size) < 0)
        return -1;
    c->n_kv_head = c->n_head; /* num_key_value_heads: None -> num_attention_heads */
    if (get_int(root, "num_key_value_heads", &c->n_kv_head, path, err, err_size) < 0) return -1;
    if (c->n_head > 0 && c->n_embd % c->n_head && !json_get(root, "head_dim")) {
        snprintf(err, err_size, "%s: hidden_size %d is not divisible by num_attention_heads %d (and no head_dim)",
                 path, c->n_embd, c->n_head);
        return -1;
    }
    c->head_dim = c->n_head > 0 ? c->n_embd / c->n_head : 0; /* head_dim: None -> hidden / heads */
    if (get_int(root, "head_dim", &c->head_dim, path, err, err_size) < 0) return -1;
    if (c->head_dim <= 0 || c->head_dim % 2 || c->head_dim > 4096) {
        snprintf(err, err_size, "%s: head_dim %d must be even and between 2 and 4096", path, c->head_dim);
        return -1;
    }
    c->rotary_dim = c->head_dim;
    if (c->n_kv_head <= 0 || (c->n_head > 0 && c->n_head % c->n_kv_head)) {
        snprintf(err, err_size, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", path,
                 c->n_head, c->n_kv_head);
        return -1;
    }
    c->norm_eps = 1e-6f;
    if (get_pos(root, "rms_norm_eps", &c->norm_eps, path, err, err_size)) return -1;
    if (llama_rope(root, path, c, err, err_size)) return -1;
    int attention_bias = 0, mlp_bias = 0;
    c->tie_word_embeddings = 0;
    if (get_bool(root, "tie_word_embeddings", &c->tie_word_embeddings, path, err, err_size) ||
        get_bool(root, "attention_bias", &attention_bias, path, err, err_size) ||
        get_bool(root, "mlp_bias", &mlp_bias, path, err, err_size))
        return -1;
    int ptp = 1; /* pretraining_tp > 1 slices the GEMMs in HF 4.x: the same product, refused to be safe */
    if (get_int(root, "pretraining_tp", &ptp, path, err, err_size) < 0) return -1;
    if (ptp > 1) {
        snprintf(err, err_size, "%s: pretraining_tp %d is not supported (1 or absent)", path, ptp);
        return -1;
    }
    c->qkv_bias = c->o_bias = attention_bias;
    c->mlp_in_bias = c->mlp_out_bias = mlp_bias;
    c->lm_head_bias = 0;
    return 0;
}

static const tp_arch ARCHS[TP_ARCH_COUNT] = {
    [TP_ARCH_CODEGEN] = {
        .id = TP_ARCH_CODEGEN, .model_type = "codegen", .hf_class = "CodeGenForCausalLM",
        .norm = TP_NORM_LAYERNORM, .mlp = TP_MLP_GELU, .rope = TP_ROPE_GPTJ, .residual = TP_RESIDUAL_PARALLEL,
        .norm_bias = 1,
        .names = {.embed = "transformer.wte", .norm_f = "transformer.ln_f", .lm_head = "lm_head",
                  .norm1 = "transformer.h.%d.ln_1", .qkv = "transformer.h.%d.attn.qkv_proj",
                  .o = "transformer.h.%d.attn.out_proj", .mlp_in = "transformer.h.%d.mlp.fc_in",
                  .mlp_out = "transformer.h.%d.mlp.fc_out"},
        .read = codegen_read,
    },
    [TP_ARCH_LLAMA] = {
        .id = TP_ARCH_LLAMA, .model_type = "llama", .hf_class = "LlamaForCausalLM",
        .norm = TP_NORM_RMSNORM, .mlp = TP_MLP_SILU_GATED, .rope = TP_ROPE_NEOX, .residual = TP_RESIDUAL_SEQUENTIAL,
        .norm_bias = 0,
        .names = {.embed = "model.embed_tokens", .norm_f = "model.norm", .lm_head = "lm_head",
                  .norm1 = "model.layers.%d.input_layernorm", .norm2 = "model.layers.%d.post_attention_layernorm",
                  .q = "model.layers.%d.self_attn.q_proj", .k = "model.layers.%d.self_attn.k_proj",
                  .v = "model.layers.%d.self_attn.v_proj", .o = "model.layers.%d.self_attn.o_proj",
                  .mlp_in = "model.layers.%d.mlp.gate_proj", .mlp_up = "model.layers.%d.mlp.up_proj",
                  .mlp_out = "model.layers.%d.mlp.down_proj"},
        .read = llama_read,
    },
};

const tp_arch *tp_arch_get(tp_arch_id id) { return id >= 0 && id < TP_ARCH_COUNT ? &ARCHS[id] : NULL; }

const tp_arch *tp_arch_of_config(const json_value *root, const char *path, char *err, size_t err_size) {
    char known[256];
    size_t u = 0;
    for (int i = 0; i < TP_ARCH_COUNT; i++)
        u += (size_t)snprintf(known + u, sizeof known - u, "%s%s (model_type \"%s\")", i ? ", " : "",
                              ARCHS[i].hf_class, ARCHS[i].model_type);
    const json_value *ar = json_get(root, "architectures"), *mt = json_get(root, "model_type");
    const tp_arch *by_class = NULL, *by_type = NULL;
    if (ar && ar->type == JSON_ARRAY && ar->n > 0) {
        for (size_t j = 0; j < ar->n && !by_class; j++)
            for (int i = 0; i < TP_ARCH_COUNT; i++)
                if (ar->items[j].type == JSON_STRING && strcmp(ar->items[j].str, ARCHS[i].hf_class) == 0)
                    by_class = &ARCHS[i];
        if (!by_class) {
            snprintf(err, err_size, "%s: architectures [\"%s\"%s] is not one tpgen runs; it runs %s", path,
                     ar->items[0].type == JSON_STRING ? ar->items[0].str : "?", ar->n > 1 ? ", ..." : "", known);
            return NULL;
        }
    }
    if (mt && mt->type == JSON_STRING) {
        for (int i = 0; i < TP_ARCH_COUNT; i++)
            if (strcmp(mt->str, ARCHS[i].model_type) == 0) by_type = &ARCHS[i];
        if (!by_type) {
            snprintf(err, err_size, "%s: model_type is \"%s\"; tpgen runs %s", path, mt->str, known);
            return NULL;
        }
    }
    if (by_class && by_type && by_class != by_type) {
        snprintf(err, err_size, "%s: architectures says %s but model_type says \"%s\"", path, by_class->hf_class,
                 by_type->model_type);
        return NULL;
    }
    return by_class ? by_class : by_type ? by_type : &ARCHS[TP_ARCH_CODEGEN];
}

int tp_arch_backend_ok(const tp_arch *a, const tp_backend *b, char *err, size_t err_size) {
    const char *missing = a->norm == TP_NORM_RMSNORM && !b->rmsnorm        ? "rmsnorm"
                          : a->mlp == TP_MLP_SILU_GATED && !b->silu_mul ? "silu_mul"
                                                                          : NULL;
    if (!missing) return 0;
    snprintf(err, err_size, "the %s backend (%s) has no %s op, which %s models need", b->name, tp_dtype_name(b->act),
             missing, a->hf_class);
    return -1;
}

void tp_arch_tensor(char *buf, size_t size, const char *fmt, int l, const char *suffix) {
    int n = snprintf(buf, size, fmt, l);
    if (n >= 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, "%s", suffix);
}

long long tp_arch_layer_matrix_elems(const tp_config *c, int Hl, int Hkl, int Il, long long *rows) {
    const long long E = c->n_embd, D = c->head_dim, qkv = (long long)(Hl + 2 * Hkl) * D, o = (long long)Hl * D;
    const long long in_rows = c->arch->mlp == TP_MLP_SILU_GATED ? 2LL * Il : Il;
    if (rows) *rows = qkv + E + in_rows + E;
    return qkv * E + E * o + in_rows * E + E * (long long)Il;
}

long long tp_arch_param_count(const tp_config *c) {
    const tp_arch *a = c->arch;
    const long long V = c->vocab_size, E = c->n_embd, I = c->n_inner, L = c->n_layer, D = c->head_dim;
    const long long norms = (a->residual == TP_RESIDUAL_SEQUENTIAL ? 2 : 1) * E * (a->norm_bias ? 2 : 1);
    const long long in_rows = a->mlp == TP_MLP_SILU_GATED ? 2 * I : I;
    const long long biases = (c->qkv_bias ? (long long)(c->n_head + 2 * c->n_kv_head) * D : 0) + (c->o_bias ? E : 0) +
                             (c->mlp_in_bias ? in_rows : 0) + (c->mlp_out_bias ? E : 0);
    const long long layer = tp_arch_layer_matrix_elems(c, c->n_head, c->n_kv_head, c->n_inner, NULL) + norms + biases;
    const long long lm = c->tie_word_embeddings ? 0 : V * E + (c->lm_head_bias ? V : 0);
    return V * E + L * layer + E * (a->norm_bias ? 2 : 1) + lm;
}
