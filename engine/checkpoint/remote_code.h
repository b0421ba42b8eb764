/* The checkpoint's qkv_proj group count, from the modeling code it ships (if any).
 *
 * CodeGen's fused qkv_proj [3E, E] is laid out in G groups (mp_num, the TPU cores it was trained
 * on), group g = rows [g*3E/G, (g+1)*3E/G) = [Q_g; V_g; K_g], each E/G rows = H/G whole heads.
 * HF's own CodeGen class hard-codes G = 4 (CodeGen 1). CodeGen2 checkpoints ship their own
 * modeling_codegen.py (config.json "auto_map", trust_remote_code in HF) with mp_num = 8; nothing
 * in config.json says so. tpgen reads G from that file (an `mp_num = N` assignment), or from
 * --qkv-groups, and refuses remote code it cannot identify rather than guess a layout.
 */
#ifndef TPGEN_REMOTE_CODE_H
#define TPGEN_REMOTE_CODE_H

#include <stddef.h>

#define TP_MAX_QKV_GROUPS 64

/* *groups = G for the checkpoint whose config.json is at path (a dir or the file):
 * no auto_map model entry: 4 (HF's own class); auto_map: the mp_num of the modeling file next to
 * config.json. flag > 0 (--qkv-groups) states G: it must agree with an identified file, and it is
 * what lets an unidentifiable file load. Checks n_head % G == 0 (heads whole within groups).
 * Returns 0, or -1 with a message naming the file, the field or the flag. */
int tp_checkpoint_qkv_groups(const char *path, int n_head, int flag, int *groups, char *err, size_t err_size);

/* G of a modeling file's text: the value of its `mp_num = N` assignments (`self.mp_num = N`
 * too), all equal. Returns G > 0, 0 when there is none, -1 when they disagree. */
int tp_modeling_mp_num(const char *text);

#endif
