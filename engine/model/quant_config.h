/* 4-bit checkpoints as published: config.json's "quantization_config" (AWQ, GPTQ), and the
 * 4-bit group rule every int4 matrix (a checkpoint's, or --weights int4's) obeys under tensor
 * parallelism.
 *
 * What is read (anything else that changes the weights' meaning is refused, naming config.json and
 * the field):
 *   quant_method "awq": bits 4; group_size G (-1: the whole row); zero_point true; version (or
 *     format) "gemm" (AutoAWQ's WQLinear_GEMM packing; gemv, gemv_fast, marlin, llm-awq and the
 *     rest pack differently); modules_to_not_convert honoured (those Linears are read as float
 *     .weight tensors, as transformers' should_convert_module matches them).
 *   quant_method "gptq": bits 4; group_size; sym (the stored zeros are read either way); desc_act
 *     (allowed only while every g_idx is the trivial k / G: checked at load); checkpoint_format
 *     (or format) "gptq" (zeros stored minus 1, read back as GPTQModel does: + 0x11111111 on the
 *     int32) or "gptq_v2" (zeros as they are); pack_dtype int32; no lm_head, dynamic or
 *     modules_in_block_to_quantize (per-module overrides tpgen does not apply).
 * Runtime-only fields (backend, use_exllama, exllama_config, damp_percent, true_sequential, ...)
 * say how a library computed or runs the weights, not what they are: ignored. */
#ifndef TPGEN_QUANT_CONFIG_H
#define TPGEN_QUANT_CONFIG_H

#include <stddef.h>

#include "util/json.h"

typedef enum { TP_QUANT_NONE = 0, TP_QUANT_AWQ = 1, TP_QUANT_GPTQ = 2 } tp_quant_method;

#define TP_QUANT_MAX_SKIP 32 /* modules_to_not_convert entries */

typedef struct {
    tp_quant_method method; /* NONE: a float checkpoint (no quantization_config) */
    int group;              /* group_size as stated: k per group (a multiple of 32), or -1: the whole row */
    int desc_act;           /* GPTQ act-order: allowed while g_idx is trivial */
    int sym;                /* GPTQ sym (informational) */
    int gptq_v1;            /* GPTQ checkpoint_format "gptq": qzeros hold zero - 1 */
    int n_skip;             /* modules_to_not_convert (AWQ) */
    char skip[TP_QUANT_MAX_SKIP][128];
} tp_quant;

/* Reads root's "quantization_config" (absent or null: method NONE). Returns 0, or -1 with a message
 * naming path and the field in err. */
int tp_quant_config_read(const json_value *root, const char *path, tp_quant *q, char *err, size_t err_size);

/* 1 when the checkpoint stores the Linear `module` (its name without ".weight") in 4 bits: a
 * quantized checkpoint and no modules_to_not_convert entry matches it (transformers' rule: a
 * prefix ending at a module boundary, as a regular expression, or a suffix). */
int tp_quant_converts(const tp_quant *q, const char *module);

/* "AWQ (GEMM packing)", "GPTQ (checkpoint_format gptq)": for messages and the log. */
const char *tp_quant_describe(const tp_quant *q);

#endif
