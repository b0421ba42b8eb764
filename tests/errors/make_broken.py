#!/usr/bin/env python3
"""Broken checkpoints for the error tests, made at test time from the committed fixtures.

usage: make_broken.py TINY_FIXTURE SHARDED_FIXTURE TOKENIZER_DIR OUT_DIR

Writes OUT_DIR/<case>/ for each case below: a copy of TINY_FIXTURE (or of SHARDED_FIXTURE for
the index case) with one thing broken. Python standard library only.
"""
import json
import os
import shutil
import struct
import sys


def copy_fixture(src, dst):
    if os.path.exists(dst):
        shutil.rmtree(dst)
    os.makedirs(dst)
    for name in os.listdir(src):
        if name == "expected.json":
            continue
        shutil.copyfile(os.path.join(src, name), os.path.join(dst, name))


def edit_config(d, fn):
    path = os.path.join(d, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    fn(cfg)
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2)


def read_st(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def write_st(path, header, data):
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # keep the data area 8-byte aligned, as the format suggests
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def main():
    tiny, sharded, tokenizer, out = sys.argv[1:5]
    os.makedirs(out, exist_ok=True)
    st_name = "model.safetensors"

    def case(name, src=tiny):
        d = os.path.join(out, name)
        copy_fixture(src, d)
        return d

    with open(os.path.join(tiny, "config.json")) as f:
        cfg = json.load(f)
    n_layer, n_embd = cfg["n_layer"], cfg["n_embd"]

    # config names one layer more than the weights hold: transformer.h.<n_layer>.* is missing
    d = case("extra_layer")
    edit_config(d, lambda c: c.update(n_layer=n_layer + 1))

    # n_inner set to half the 4E the weights were made with: fc_in/fc_out shapes disagree
    d = case("inner_changed")
    edit_config(d, lambda c: c.update(n_inner=2 * n_embd))

    # vocab_size changed: wte / lm_head shapes disagree
    d = case("vocab_changed")
    edit_config(d, lambda c: c.update(vocab_size=cfg["vocab_size"] + 7))

    d = case("config_not_json")
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write('{"n_layer": 2, "n_embd": 64,\n  "n_head": 4 "vocab_size": 1001}\n')

    d = case("config_no_embd")
    edit_config(d, lambda c: c.pop("n_embd"))

    # data area cut short: the last tensors' data_offsets point past the end of the file
    d = case("truncated")
    p = os.path.join(d, st_name)
    os.truncate(p, os.path.getsize(p) - 1000)

    # the header (after the 8-byte length) overwritten with bytes that are not JSON
    d = case("header_not_json")
    p = os.path.join(d, st_name)
    with open(p, "r+b") as f:
        f.seek(8)
        f.write(b"\x00\xffnot json at all\x01")

    # an 8-byte header length far larger than any real header (and than the file)
    d = case("header_too_long")
    p = os.path.join(d, st_name)
    with open(p, "r+b") as f:
        f.write(struct.pack("<Q", 1 << 50))

    # one tensor's data_offsets beyond the data area (file size unchanged)
    d = case("offsets_outside")
    p = os.path.join(d, st_name)
    header, data = read_st(p)
    t = header["transformer.h.0.mlp.fc_in.bias"]
    size = t["data_offsets"][1] - t["data_offsets"][0]
    t["data_offsets"] = [len(data) + 64, len(data) + 64 + size]
    write_st(p, header, data)

    d = case("no_safetensors")
    os.remove(os.path.join(d, st_name))

    # the index names a shard that is not there
    d = case("index_missing_shard", sharded)
    with open(os.path.join(d, "model.safetensors.index.json")) as f:
        shards = sorted(set(json.load(f)["weight_map"].values()))
    os.remove(os.path.join(d, shards[-1]))

    # a dtype tpgen does not read (F64 is valid safetensors; I4 is not a safetensors dtype at all):
    # one tensor rewritten, sized consistently so only the dtype is wrong
    for name, dtype, elem in (("dtype_f64", "F64", 8), ("dtype_unknown", "I4", 1)):
        d = case(name)
        p = os.path.join(d, st_name)
        header, data = read_st(p)
        t = header["transformer.h.1.ln_1.bias"]
        n = 1
        for s in t["shape"]:
            n *= s
        t["dtype"] = dtype
        t["data_offsets"] = [len(data), len(data) + n * elem]
        write_st(p, header, data + b"\x00" * (n * elem))

    # tokenizer files that are not JSON
    d = case("tokenizer_not_json")
    with open(os.path.join(d, "vocab.json"), "w") as f:
        f.write('{"!": 0, "a": \n')
    with open(os.path.join(d, "merges.txt"), "w") as f:
        f.write("#version: 0.2\n")

    # the real CodeGen tokenizer next to a model of 1001 tokens: text encodes to ids >= vocab_size
    d = case("tokenizer_bigger_vocab")
    for name in os.listdir(tokenizer):
        shutil.copyfile(os.path.join(tokenizer, name), os.path.join(d, name))

    # no tokenizer files in the others; a plain valid copy shows copying alone breaks nothing
    case("valid")
    print("broken checkpoints written to", out)


if __name__ == "__main__":
    main()
