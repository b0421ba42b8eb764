"""Torch-free helpers shared by the fixture tools: the independent float64 numpy CodeGen model
(docs/FIXTURES.md states its semantics; make_fixtures.py checks it against HF's class at 4 qkv
groups in fp32, make_codegen2_fixtures.py --check-hf at 4 and 8 in float64, and
make_codegen2_fixtures.py uses it as the reference at 8), the engine's valid TP sizes, vocab-edge
ids and the fixtures' JSON layout."""

import json
import os
import shutil

import numpy as np


def valid_tp(n_head):
    """TP sizes up to 8 that divide the heads (the engine's rule)."""
    return [t for t in range(1, 9) if n_head % t == 0]


def edge_ids(vocab):
    """Vocabulary edges: 0, V-1 and the first/last id of each rank's vocab slice for TP 2, 3, 4
    (slices of ceil(V / TP) ids, the last one padded)."""
    ids = {0, vocab - 1}
    for tp in (2, 3, 4):
        per = -(-vocab // tp)
        for r in range(1, tp):
            if r * per < vocab:
                ids.update({r * per - 1, r * per})
    return sorted(ids)


# ---------- independent float64 reference of the model as docs/FIXTURES.md states it ----------

def numpy_logits(w, cfg, ids, groups=4):
    """w: name -> float64 array; cfg: an object with CodeGen's config fields; ids: [T];
    groups: qkv_proj's group count G (mp_num: 4 in HF's class and CodeGen 1, 8 in CodeGen2's
    modeling file). Returns logits [T, V] (float64)."""
    E, H, L = cfg.n_embd, cfg.n_head, cfg.n_layer
    D, R, eps = E // H, cfg.rotary_dim, cfg.layer_norm_epsilon
    G = groups
    assert H % G == 0, f"n_head {H} is not a multiple of {G} groups"
    T = len(ids)

    def ln(x, p):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * w[p + ".weight"] + w[p + ".bias"]

    def rotary(x):                                   # x: [T, H, D]; rotate_every_two on dims < R
        inv = 10000.0 ** (-np.arange(0, R, 2) / R)  # [R/2]
        ang = np.arange(T)[:, None] * inv[None, :]  # [T, R/2]
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        out = x.copy()
        x0, x1 = x[:, :, 0:R:2], x[:, :, 1:R:2]
        out[:, :, 0:R:2] = x0 * c - x1 * s
        out[:, :, 1:R:2] = x1 * c + x0 * s
        return out

    h = w["transformer.wte.weight"][ids]             # [T, E]
    mask = np.triu(np.ones((T, T), dtype=bool), 1)
    for i in range(L):
        p = f"transformer.h.{i}."
        x = ln(h, p + "ln_1")
        y = x @ w[p + "attn.qkv_proj.weight"].T      # [T, 3E]: G groups of [Q_g; V_g; K_g]
        y = y.reshape(T, G, 3, E // G)
        q = y[:, :, 0].reshape(T, H, D)              # head h = g * H/G + j
        v = y[:, :, 1].reshape(T, H, D)
        k = y[:, :, 2].reshape(T, H, D)
        q, k = rotary(q), rotary(k)
        sc = np.einsum("thd,shd->hts", q, k) / np.sqrt(D)
        sc[:, mask] = -np.inf
        sc = np.exp(sc - sc.max(-1, keepdims=True))
        sc /= sc.sum(-1, keepdims=True)
        att = np.einsum("hts,shd->thd", sc, v).reshape(T, E)
        att = att @ w[p + "attn.out_proj.weight"].T
        u = x @ w[p + "mlp.fc_in.weight"].T + w[p + "mlp.fc_in.bias"]
        u = 0.5 * u * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (u + 0.044715 * u ** 3)))
        mlp = u @ w[p + "mlp.fc_out.weight"].T + w[p + "mlp.fc_out.bias"]
        h = att + mlp + h
    h = ln(h, "transformer.ln_f")
    return h @ w["lm_head.weight"].T + w["lm_head.bias"]


def save_pretrained_clean(model, d, max_shard_size=None):
    """An HF model saved into a fresh folder d (sharded when max_shard_size is given), without the
    generation_config.json tpgen does not read, so a fixture holds what tpgen reads."""
    if os.path.isdir(d):
        shutil.rmtree(d)
    model.save_pretrained(d, **({"max_shard_size": max_shard_size} if max_shard_size else {}))
    gen_cfg = os.path.join(d, "generation_config.json")
    if os.path.exists(gen_cfg):
        os.remove(gen_cfg)


def score_entry(ids, lp, top_k_entry):
    """expected.json's score entry of ids from their log-probabilities lp [T, V] (numpy or torch):
    log p(ids[t] | ids[:t]) and top_k_entry's alternatives for every t >= 1; None where top_k_entry
    says their order is not well-posed."""
    lps, tops = [None], [None]
    for t in range(1, len(ids)):
        top, ok = top_k_entry(lp[t - 1])
        if not ok:
            return None
        lps.append(float(lp[t - 1, ids[t]]))
        tops.append(top)
    return {"ids": list(ids), "logprobs": lps, "top_logprobs": tops}


def dump_json(o, ind=0):
    """JSON with one line per dict member and per greedy step; short lists inline."""
    def depth(x):
        if isinstance(x, dict):
            return 99
        if isinstance(x, list):
            return 1 + max((depth(e) for e in x), default=0)
        return 0
    pad, pad1 = " " * ind, " " * (ind + 1)
    if isinstance(o, dict):
        body = ",\n".join(f"{pad1}{json.dumps(k)}: {dump_json(v, ind + 1)}" for k, v in o.items())
        return "{\n" + body + "\n" + pad + "}"
    if isinstance(o, list) and depth(o) > 2:
        return "[\n" + ",\n".join(pad1 + dump_json(e, ind + 1) for e in o) + "\n" + pad + "]"
    return json.dumps(o, separators=(", ", ": "))


