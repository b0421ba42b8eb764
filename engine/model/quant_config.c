/* config.json's quantization_config (quant_config.h): what is read, and what is refused by name. */
#include "quant_config.h"

#include <ctype.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>

#include "util/log.h" /* tp_set_err */


/* A string field, lower-cased into out (absent or null: out = dflt). -1 when it is not a string. */
static int get_lower(const json_value *qc, const char *key, const char *dflt, char *out, size_t size,
                     const char *path, char *err, size_t err_size) {
    const json_value *v = json_get(qc, key);
    if (!v || v->type == JSON_NULL) {
        snprintf(out, size, "%s", dflt);
        return 0;
    }
    if (v->type != JSON_STRING)
        return tp_set_err(err, err_size, "%s: quantization_config.%s must be a string, found %s", path, key,
                    json_type_name(v->type));
    size_t i = 0;
    for (; v->str[i] && i + 1 < size; i++) out[i] = (char)tolower((unsigned char)v->str[i]);
    out[i] = 0;
    return 0;
}

static int get_int(const json_value *qc, const char *key, int dflt, int *out, const char *path, char *err,
                   size_t err_size) {
    const json_value *v = json_get(qc, key);
    *out = dflt;
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type != JSON_NUMBER || !v->is_integer || v->integer < -1 || v->integer > 1000000)
        return tp_set_err(err, err_size, "%s: quantization_config.%s must be an integer (-1 or positive)", path, key);
    *out = (int)v->integer;
    return 0;
}

static int get_bool(const json_value *qc, const char *key, int dflt, int *out, const char *path, char *err,
                    size_t err_size) {
    const json_value *v = json_get(qc, key);
    *out = dflt;
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type != JSON_BOOL)
        return tp_set_err(err, err_size, "%s: quantization_config.%s must be true or false", path, key);
    *out = v->boolean;
    return 0;
}

/* modules_to_not_convert: null or a list of module names / patterns. */
static int read_skip(const json_value *qc, tp_quant *q, const char *path, char *err, size_t err_size) {
    const json_value *v = json_get(qc, "modules_to_not_convert");
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type != JSON_ARRAY)
        return tp_set_err(err, err_size, "%s: quantization_config.modules_to_not_convert must be a list of module names",
                    path);
    if (v->n > TP_QUANT_MAX_SKIP)
        return tp_set_err(err, err_size, "%s: quantization_config.modules_to_not_convert has %zu entries; tpgen reads at most %d",
                    path, v->n, TP_QUANT_MAX_SKIP);
    for (size_t i = 0; i < v->n; i++) {
        const json_value *s = &v->items[i];
        if (s->type != JSON_STRING || !s->str[0] || s->str_len >= sizeof q->skip[0])
            return tp_set_err(err, err_size,
                        "%s: quantization_config.modules_to_not_convert[%zu] must be a module name of 1 to %zu bytes",
                        path, i, sizeof q->skip[0] - 1);
        snprintf(q->skip[q->n_skip++], sizeof q->skip[0], "%s", s->str);
    }
    return 0;
}

static int read_awq(const json_value *qc, tp_quant *q, const char *path, char *err, size_t err_size) {
    int zero_point;
    if (get_bool(qc, "zero_point", 1, &zero_point, path, err, err_size)) return -1;
    if (!zero_point)
        return tp_set_err(err, err_size,
                    "%s: quantization_config.zero_point false is not supported (tpgen reads AWQ's GEMM packing with "
                    "zero points: zero_point true)", path);
    /* transformers' AwqConfig: "version" (the legacy key AutoAWQ writes) wins over "format" */
    const char *key = json_get(qc, "version") && json_get(qc, "version")->type != JSON_NULL ? "version" : "format";
    char packing[32];
    if (get_lower(qc, key, "gemm", packing, sizeof packing, path, err, err_size)) return -1;
    if (strcmp(packing, "gemm") != 0)
        return tp_set_err(err, err_size,
                    "%s: quantization_config.%s \"%s\" is not supported: tpgen unpacks AWQ's GEMM packing (%s "
                    "\"gemm\"); gemv, gemv_fast, marlin and llm-awq lay the 4-bit weights out differently",
                    path, key, packing, key);
    return read_skip(qc, q, path, err, err_size);
}

static int read_gptq(const json_value *qc, tp_quant *q, const char *path, char *err, size_t err_size) {
    if (get_bool(qc, "desc_act", 0, &q->desc_act, path, err, err_size) ||
        get_bool(qc, "sym", 1, &q->sym, path, err, err_size))
        return -1;
    /* transformers' GPTQConfig: the legacy "checkpoint_format" wins over "format" */
    const json_value *cf = json_get(qc, "checkpoint_format");
    const char *key = cf && cf->type != JSON_NULL ? "checkpoint_format" : "format";
    char fmt[32];
    if (get_lower(qc, key, "gptq", fmt, sizeof fmt, path, err, err_size)) return -1;
    if (strcmp(fmt, "gptq") && strcmp(fmt, "gptq_v2"))
        return tp_set_err(err, err_size,
                    "%s: quantization_config.%s \"%s\" is not supported (tpgen reads GPTQ's \"gptq\" and \"gptq_v2\" "
                    "formats)", path, key, fmt);
    q->gptq_v1 = strcmp(fmt, "gptq") == 0;
    char pack[32];
    if (get_lower(qc, "pack_dtype", "int32", pack, sizeof pack, path, err, err_size)) return -1;
    if (strcmp(pack, "int32") && strcmp(pack, "torch.int32"))
        return tp_set_err(err, err_size, "%s: quantization_config.pack_dtype \"%s\" is not supported (int32 only)", path,
                    pack);
    int lm_head;
    if (get_bool(qc, "lm_head", 0, &lm_head, path, err, err_size)) return -1;
    if (lm_head)
        return tp_set_err(err, err_size,
                    "%s: quantization_config.lm_head true is not supported (tpgen reads lm_head as a float tensor)",
                    path);
    const json_value *dyn = json_get(qc, "dynamic");
    if (dyn && dyn->type != JSON_NULL && !(dyn->type == JSON_OBJECT && dyn->n == 0))
        return tp_set_err(err, err_size,
                    "%s: quantization_config.dynamic is not supported (per-module bits or group sizes; tpgen applies "
                    "one group_size to every layer)", path);
    const json_value *blk = json_get(qc, "modules_in_block_to_quantize");
    if (blk && blk->type != JSON_NULL)
        return tp_set_err(err, err_size,
                    "%s: quantization_config.modules_in_block_to_quantize is not supported (tpgen expects every layer "
                    "Linear quantized)", path);
    return read_skip(qc, q, path, err, err_size);
}

int tp_quant_config_read(const json_value *root, const char *path, tp_quant *q, char *err, size_t err_size) {
    memset(q, 0, sizeof *q);
    const json_value *qc = json_get(root, "quantization_config");
    if (!qc || qc->type == JSON_NULL) return 0;
    if (qc->type != JSON_OBJECT) return tp_set_err(err, err_size, "%s: quantization_config must be an object", path);
    const json_value *m = json_get(qc, "quant_method");
    if (!m || m->type != JSON_STRING)
        return tp_set_err(err, err_size,
                    "%s: quantization_config has no quant_method string (tpgen reads 4-bit \"awq\" and \"gptq\" "
                    "checkpoints)", path);
    char method[64];
    if (get_lower(qc, "quant_method", "", method, sizeof method, path, err, err_size)) return -1;
    if (!strcmp(method, "awq")) q->method = TP_QUANT_AWQ;
    else if (!strcmp(method, "gptq")) q->method = TP_QUANT_GPTQ;
    else
        return tp_set_err(err, err_size,
                    "%s: quantization_config.quant_method \"%s\" is not supported (tpgen reads 4-bit \"awq\" and "
                    "\"gptq\" checkpoints)", path, m->str);
    int bits;
    if (q->method == TP_QUANT_GPTQ && !json_get(qc, "bits"))
        return tp_set_err(err, err_size, "%s: quantization_config has no bits (GPTQ states it)", path);
    if (get_int(qc, "bits", 4, &bits, path, err, err_size)) return -1;
    if (bits != 4)
        return tp_set_err(err, err_size, "%s: quantization_config.bits %d is not supported (tpgen reads 4-bit %s weights)",
                    path, bits, method);
    if (get_int(qc, "group_size", 128, &q->group, path, err, err_size)) return -1;
    if (q->group == 0 || (q->group > 0 && q->group % 32))
        return tp_set_err(err, err_size,
                    "%s: quantization_config.group_size %d is not supported: tpgen's 4-bit kernels take groups of a "
                    "multiple of 32 weights (or -1, the whole row)", path, q->group);
    return q->method == TP_QUANT_AWQ ? read_awq(qc, q, path, err, err_size) : read_gptq(qc, q, path, err, err_size);
}

/* transformers' should_convert_module for one pattern: `key` matches `full` from the start up to a
 * module boundary (as a regular expression: POSIX extended here, Python's re there; the patterns
 * published are names and ".*"), or as a suffix. */
static int pattern_matches(const char *full, const char *key) {
    const size_t lf = strlen(full), lk = strlen(key);
    if (lf >= lk && strcmp(full + lf - lk, key) == 0) return 1;
    char re_text[300];
    regex_t re;
    regmatch_t m;
    int hit = 0;
    snprintf(re_text, sizeof re_text, "^(%s)(\\.|$)", key); /* the boundary before a '.' or at the end */
    if (regcomp(&re, re_text, REG_EXTENDED) == 0) {
        hit = regexec(&re, full, 1, &m, 0) == 0;
        regfree(&re);
    } else /* not a POSIX pattern: the name itself */
        return strncmp(full, key, lk) == 0 && (full[lk] == 0 || full[lk] == '.' || (lk && key[lk - 1] == '.'));
    snprintf(re_text, sizeof re_text, "^(%s)", key); /* or just after a '.' */
    if (!hit && regcomp(&re, re_text, REG_EXTENDED) == 0) {
        hit = regexec(&re, full, 1, &m, 0) == 0 && m.rm_eo > 0 && full[m.rm_eo - 1] == '.';
        regfree(&re);
    }
    return hit;
}

int tp_quant_converts(const tp_quant *q, const char *module) {
    if (q->method == TP_QUANT_NONE) return 0;
    for (int i = 0; i < q->n_skip; i++)
        if (pattern_matches(module, q->skip[i])) return 0;
    return 1;
}

const char *tp_quant_describe(const tp_quant *q) {
    static char buf[96];
    if (q->method == TP_QUANT_AWQ) snprintf(buf, sizeof buf, "AWQ (GEMM packing), group_size %d", q->group);
    else if (q->method == TP_QUANT_GPTQ)
        snprintf(buf, sizeof buf, "GPTQ (checkpoint_format %s%s), group_size %d", q->gptq_v1 ? "gptq" : "gptq_v2",
                 q->sym ? ", sym" : "", q->group);
    else snprintf(buf, sizeof buf, "none");
    return buf;
}
