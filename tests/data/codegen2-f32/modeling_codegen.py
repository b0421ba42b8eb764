"""Stand-in for Salesforce CodeGen2's modeling_codegen.py, written for tpgen's test fixture.

This is not Salesforce's file (theirs is distributed with the CodeGen2 checkpoints under their
license). It states only what tpgen reads from it: CodeGen2's attention splits the fused
qkv_proj output into mp_num = 8 groups, each group holding [q | v | k] of n_head / 8 whole heads,
where HF's built-in CodeGen class uses 4. tools/codegen_ref.py is the model it describes.
"""
import numpy as np


def split_qkv(qkv, n_head, head_dim):
    """qkv: [..., 3 * n_head * head_dim] -> q, k, v: [..., n_head, head_dim]."""
    mp_num = 8
    local_dim = n_head * head_dim // mp_num
    groups = qkv.reshape(qkv.shape[:-1] + (mp_num, 3, local_dim))
    q, v, k = groups[..., 0, :], groups[..., 1, :], groups[..., 2, :]
    shape = qkv.shape[:-1] + (n_head, head_dim)
    return q.reshape(shape), k.reshape(shape), v.reshape(shape)
