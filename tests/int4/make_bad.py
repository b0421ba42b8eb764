#!/usr/bin/env python3
"""Bad 4-bit checkpoints for the int4 error tests (tests/int4.cmake), derived from the fixtures of
tests/data/int4 into OUT/CASE/ (config.json and model.safetensors), standard library only.

    python3 tests/int4/make_bad.py OUT

Each case changes one thing a loader must refuse (the regex each test expects is in int4.cmake)."""

import json
import os
import shutil
import struct
import sys

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "int4")


def read_st(path):
    """safetensors -> ({name: (dtype, shape, bytes)}, metadata)"""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in header.items()}, meta


def write_st(path, tensors, meta):
    header, blobs, at = {}, [], 0
    for k, (dt, shape, b) in tensors.items():
        header[k] = {"dtype": dt, "shape": shape, "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    if meta:
        header["__metadata__"] = meta
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def case(out, name, src, qc=None, drop=(), add=None, edit=None, config=None):
    """OUT/name from fixture src: quantization_config updated by qc (a key set to None is removed),
    tensors dropped / added / edited (edit(tensors) in place), config(cfg) for other edits."""
    d = os.path.join(out, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    with open(os.path.join(DATA, src, "config.json")) as f:
        cfg = json.load(f)
    for k, v in (qc or {}).items():
        if v is None:
            cfg["quantization_config"].pop(k, None)
        else:
            cfg["quantization_config"][k] = v
    if config:
        config(cfg)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    tensors, meta = read_st(os.path.join(DATA, src, "model.safetensors"))
    for k in drop:
        del tensors[k]
    tensors.update(add or {})
    if edit:
        edit(tensors)
    write_st(os.path.join(d, "model.safetensors"), tensors, meta)


def permute_g_idx(tensors):
    """desc_act's act-order: k 0 and k 40 swap groups in layer 0's down_proj."""
    name = "model.layers.0.mlp.down_proj.g_idx"
    dt, shape, b = tensors[name]
    g = list(struct.unpack("<%di" % shape[0], b))
    g[0], g[40] = g[40], g[0]
    tensors[name] = (dt, shape, struct.pack("<%di" % shape[0], *g))


def scales_as_i32(tensors):
    name = "model.layers.0.self_attn.q_proj.scales"
    dt, shape, b = tensors[name]
    tensors[name] = ("I32", shape, b"\0" * (4 * shape[0] * shape[1]))


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_bad.py OUT")
    out = sys.argv[1]
    awq_cg, awq_ll, gptq = "awq-codegen-g32", "awq-llama-g32", "gptq-llama-sym-g32"
    case(out, "bits8", gptq, {"bits": 8})
    case(out, "method", awq_cg, {"quant_method": "bitsandbytes"})
    case(out, "awq_gemv", awq_cg, {"version": "gemv"})
    case(out, "awq_zero_point", awq_cg, {"zero_point": False})
    case(out, "gptq_marlin", gptq, {"checkpoint_format": "marlin"})
    case(out, "gptq_dynamic", gptq, {"dynamic": {"-:model.layers.1.mlp.down_proj": {}}})
    case(out, "gptq_lm_head", gptq, {"lm_head": True})
    case(out, "group16", gptq, {"group_size": 16})
    case(out, "no_quant_config", awq_cg, config=lambda c: c.pop("quantization_config"))
    case(out, "mixed_not_convert", awq_ll, {"modules_to_not_convert": ["model.layers.0.self_attn.q_proj"]})
    case(out, "missing_qzeros", gptq, drop=["model.layers.0.self_attn.q_proj.qzeros"])
    case(out, "desc_act_gidx", gptq, {"desc_act": True}, edit=permute_g_idx)
    case(out, "act_scales", awq_cg, add={"transformer.h.0.mlp.act.scales": ("F16", [256], b"\0\x3c" * 256)})
    case(out, "scales_i32", gptq, edit=scales_as_i32)


if __name__ == "__main__":
    main()
