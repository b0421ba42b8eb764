#!/usr/bin/env python3
"""Faulty checkpoints for the reliability tests, made at test time from the committed tiny-f32
fixture (F32, H=4, E=64, V=1001, n_positions=128). Python standard library only.

usage: make_faulty.py TINY_FIXTURE OUT_DIR

Each OUT_DIR/<case>/ is a copy of the fixture with one thing changed:
  inf_bias      lm_head.bias[5] = +inf      (one +inf logit: vocab slice of rank 0)
  inf_bias_hi   lm_head.bias[900] = +inf    (one +inf logit: the last rank's slice at TP 2)
  nan_bias      lm_head.bias[700] = NaN     (one NaN logit)
  nan_all       transformer.ln_f.bias = NaN (every logit NaN)
  poison_id7    transformer.wte.weight[7, 0] = +inf (only prompts containing id 7 go NaN)
  eps_negative  config layer_norm_epsilon = -1
  npos_huge     config n_positions = 1000000000 (only a limit: nothing may be sized by it)
  embd_huge     config n_embd = 1000000000
  layers_huge   config n_layer = 1000000
  rotary_odd    config rotary_dim = 7
  rotary_big    config rotary_dim = 32 (> head_dim 16)
  heads_not4    config n_head = 2 (not a multiple of 4)
  heads_nodiv   config n_head = 12 (does not divide n_embd 64)
  heads_zero    config n_head = 0
  index_escape  an index whose weight_map names ../outside/model.safetensors (a real file)
  index_absolute  an index whose weight_map names the absolute path of a real file
  hf_snapshot   HF cache layout: snapshots/abc/{config.json, index, shard} are symlinks to
                ../../blobs/<hash>; must load (the names stay inside the snapshot)
  truncated     model.safetensors cut short (a request error must be reported before it is read)
"""
import json
import math
import os
import shutil
import struct
import sys


def read_st(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    return raw[:8 + n], json.loads(raw[8:8 + n]), bytearray(raw[8 + n:])


def copy_fixture(src, dst):
    if os.path.exists(dst):
        shutil.rmtree(dst)
    os.makedirs(dst)
    for name in os.listdir(src):
        if name != "expected.json":
            shutil.copyfile(os.path.join(src, name), os.path.join(dst, name))


def main():
    tiny, out = sys.argv[1:3]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(tiny, "config.json")) as f:
        cfg = json.load(f)
    prefix, header, data = read_st(os.path.join(tiny, "model.safetensors"))

    def case(name):
        d = os.path.join(out, name)
        copy_fixture(tiny, d)
        return d

    def poke(name, tensor, index, value):
        d = case(name)
        t = header[tensor]
        assert t["dtype"] == "F32"
        begin, end = t["data_offsets"]
        buf = bytearray(data)
        idx = range((end - begin) // 4) if index is None else [index]
        for i in idx:
            struct.pack_into("<f", buf, begin + 4 * i, value)
        with open(os.path.join(d, "model.safetensors"), "wb") as f:
            f.write(prefix + bytes(buf))

    def config(name, **changes):
        d = case(name)
        c = dict(cfg, **changes)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(c, f, indent=2)

    poke("inf_bias", "lm_head.bias", 5, math.inf)
    poke("inf_bias_hi", "lm_head.bias", 900, math.inf)
    poke("nan_bias", "lm_head.bias", 700, math.nan)
    poke("nan_all", "transformer.ln_f.bias", None, math.nan)
    poke("poison_id7", "transformer.wte.weight", 7 * cfg["n_embd"], math.inf)
    config("eps_negative", layer_norm_epsilon=-1.0)
    config("npos_huge", n_positions=1000000000)
    config("embd_huge", n_embd=1000000000)
    config("layers_huge", n_layer=1000000)
    config("rotary_odd", rotary_dim=7)
    config("rotary_big", rotary_dim=32)
    config("heads_not4", n_head=2)
    config("heads_nodiv", n_head=12)
    config("heads_zero", n_head=0)

    # index cases: the shard lives outside the model directory
    weight_map = {name: None for name in header if name != "__metadata__"}
    outside = os.path.join(out, "outside")
    copy_fixture(tiny, outside)
    for name, target in (("index_escape", "../outside/model.safetensors"),
                         ("index_absolute", os.path.abspath(os.path.join(outside, "model.safetensors")))):
        d = case(name)
        os.remove(os.path.join(d, "model.safetensors"))
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": {k: target for k in weight_map}}, f)

    # HF hub cache: snapshots/<rev>/<file> -> ../../blobs/<hash>
    root = os.path.join(out, "hf_snapshot")
    if os.path.exists(root):
        shutil.rmtree(root)
    blobs, snap = os.path.join(root, "blobs"), os.path.join(root, "snapshots", "abc")
    os.makedirs(blobs)
    os.makedirs(snap)
    files = {"config.json": open(os.path.join(tiny, "config.json"), "rb").read(),
             "model-00001-of-00001.safetensors": open(os.path.join(tiny, "model.safetensors"), "rb").read(),
             "model.safetensors.index.json": json.dumps(
                 {"metadata": {}, "weight_map": {k: "model-00001-of-00001.safetensors" for k in weight_map}}).encode()}
    for i, (name, content) in enumerate(files.items()):
        with open(os.path.join(blobs, "blob%d" % i), "wb") as f:
            f.write(content)
        os.symlink(os.path.join("..", "..", "blobs", "blob%d" % i), os.path.join(snap, name))

    d = case("truncated")
    with open(os.path.join(d, "model.safetensors"), "r+b") as f:
        f.truncate(len(prefix) + 1000)


if __name__ == "__main__":
    main()
