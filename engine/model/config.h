/* Model hyper-parameters, read once from an HF config.json into one struct. Which keys are read,
 * and their defaults, is the architecture's (engine/model/arch.c); what every architecture shares is
 * checked here. */
#ifndef TPGEN_CONFIG_H
#define TPGEN_CONFIG_H

#include <stddef.h>

#include "arch.h"
#include "config_fields.h" /* struct tp_config and its limits */

/* Reads DIR/config.json (or a config file path). Returns 0, or -1 with a message naming the
 * file and field in err. */
int tp_config_load(const char *path, tp_config *c, char *err, size_t err_size);

/* 1 when TP ranks can split this model's heads: TP divides H, and TP divides Hk (each rank keeps
 * whole KV heads) or Hk divides TP (each KV head replicated on TP / Hk ranks); and with 4-bit
 * layers (q4_group), every rank's slice of them keeps whole groups (tp_config_q4_ok). */
int tp_config_tp_ok(const tp_config *c, int tp);
/* 1 when the 4-bit layers' groups of G (c->q4_group's meaning; 0: not 4-bit, always 1) survive TP
 * ranks: G divides every matrix's k (n_embd, n_head * head_dim, the MLP width), and each rank's
 * column slice of the row-parallel ones (out_proj / o_proj, fc_out / down_proj), so every rank's
 * groups are the whole row's: the same bits at any TP size. G = -1 (the whole row): each rank's
 * slice is one group, a multiple of 32. Else 0 and why names the matrix, the slice and G. */
int tp_config_q4_ok(const tp_config *c, int tp, int G, char *why, size_t size);
/* Valid tensor-parallel sizes (tp_config_tp_ok). Writes "1, 2, 4, ..." into buf. */
void tp_config_valid_tp(const tp_config *c, char *buf, size_t size);

#endif
