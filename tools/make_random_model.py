#!/usr/bin/env python3
"""Write a random HF-format CodeGen checkpoint for any config, with numpy only.

    python3 tools/make_random_model.py CONFIG OUTDIR [--dtype f32|f16|bf16] [--seed S]
        [--shard-size-mb N] [--tokenizer DIR]

CONFIG is an HF CodeGen config.json (e.g. configs/codegen-350M.json). OUTDIR receives
config.json, either model.safetensors or model.safetensors.index.json with shards
model-0000i-of-0000N.safetensors (HF names), and the tokenizer files of --tokenizer DIR.

Only numpy is needed (no torch), so a demo runs on a fresh machine after `pip install numpy`.
Tensors are generated and written one chunk of CHUNK values at a time, so memory use stays
near 150 MB whatever the model size (a codegen-16B shape is ~32 GB in f16).

The output loads with transformers' CodeGenForCausalLM.from_pretrained, and is what tpgen reads.
Values are noise: weights ~ N(0, 0.02), biases ~ N(0, 0.02), layer-norm weights ~ 1 + N(0, 0.02).
"""

import argparse
import json
import os
import shutil
import sys
import time
from statistics import NormalDist

try:
    import numpy as np
except ImportError:
    sys.exit("make_random_model.py: numpy is required: pip install numpy")

# safetensors dtype name, bytes per element
DTYPES = {"f32": ("F32", 4), "f16": ("F16", 2), "bf16": ("BF16", 2)}
CHUNK = 16 << 20  # values generated per step: 32 MB of random bits, up to 64 MB of output

TORCH_DTYPE_NAME = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}

# Tokenizer files HF tokenizers read; any of them present in --tokenizer DIR is copied.
TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt",
                   "special_tokens_map.json", "added_tokens.json"]


def die(msg):
    sys.exit(f"make_random_model.py: error: {msg}")


def read_config(path):
    try:
        with open(path) as f:
            cfg = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        die(f"cannot read config {path}: {e}")
    for key in ("n_embd", "n_head", "n_layer", "vocab_size"):
        if not isinstance(cfg.get(key), int) or cfg[key] <= 0:
            die(f"{path}: '{key}' must be a positive integer, found {cfg.get(key)!r}")
    if cfg["n_embd"] % cfg["n_head"]:
        die(f"{path}: n_embd {cfg['n_embd']} is not a multiple of n_head {cfg['n_head']}")
    if cfg["n_head"] % 4:
        # CodeGen's fused qkv_proj is laid out as 4 blocks (mp_num = 4): heads must split in 4.
        die(f"{path}: n_head {cfg['n_head']} is not a multiple of 4 (CodeGen qkv layout)")
    return cfg


def tensor_specs(cfg):
    """(name, shape, kind) in HF CodeGenForCausalLM state_dict order.

    kind: 'w' weight ~ N(0, std), 'b' bias ~ N(0, std), 'ln_w' ~ 1 + N(0, std)."""
    E, L, V = cfg["n_embd"], cfg["n_layer"], cfg["vocab_size"]
    inner = cfg.get("n_inner") or 4 * E
    specs = [("transformer.wte.weight", (V, E), "w")]
    for i in range(L):
        p = f"transformer.h.{i}."
        specs += [
            (p + "ln_1.weight", (E,), "ln_w"),
            (p + "ln_1.bias", (E,), "b"),
            (p + "attn.qkv_proj.weight", (3 * E, E), "w"),
            (p + "attn.out_proj.weight", (E, E), "w"),
            (p + "mlp.fc_in.weight", (inner, E), "w"),
            (p + "mlp.fc_in.bias", (inner,), "b"),
            (p + "mlp.fc_out.weight", (E, inner), "w"),
            (p + "mlp.fc_out.bias", (E,), "b"),
        ]
    specs += [
        ("transformer.ln_f.weight", (E,), "ln_w"),
        ("transformer.ln_f.bias", (E,), "b"),
        ("lm_head.weight", (V, E), "w"),
        ("lm_head.bias", (V,), "b"),
    ]
    return specs


def nbytes(shape, esize):
    n = esize
    for d in shape:
        n *= d
    return n


def plan_shards(specs, esize, shard_bytes):
    """Greedy in state_dict order, like HF: start a new shard when the next tensor would
    overflow the current one (a tensor bigger than the limit gets a shard of its own)."""
    shards, cur, cur_bytes = [], [], 0
    for spec in specs:
        b = nbytes(spec[1], esize)
        if cur and cur_bytes + b > shard_bytes:
            shards.append(cur)
            cur, cur_bytes = [], 0
        cur.append(spec)
        cur_bytes += b
    if cur:
        shards.append(cur)
    return shards


def header_bytes(specs, st_dtype, esize):
    """safetensors header: JSON with __metadata__ and dtype/shape/data_offsets per tensor,
    offsets relative to the end of the header; padded with spaces to a multiple of 8 as the
    safetensors library does, so every tensor starts 8-byte aligned."""
    header = {"__metadata__": {"format": "pt"}}
    off = 0
    for name, shape, _ in specs:
        b = nbytes(shape, esize)
        header[name] = {"dtype": st_dtype, "shape": list(shape), "data_offsets": [off, off + b]}
        off += b
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text, off


def to_dtype(x, dtype):
    """x: float32 array -> bytes-ready array of the output dtype."""
    if dtype == "f32":
        return x
    if dtype == "f16":
        return x.astype(np.float16)
    # bf16: round-to-nearest-even on the f32 bits (no NaNs here: values are finite noise).
    u = x.view(np.uint32)
    u = u + (np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))
    return (u >> np.uint32(16)).astype(np.uint16)


class Progress:
    def __init__(self, total):
        self.total, self.done, self.t0, self.last = total, 0, time.time(), 0.0
        self.verbose = total >= (64 << 20)

    def add(self, b):
        self.done += b
        now = time.time()
        if self.verbose and (now - self.last > 2.0 or self.done == self.total):
            self.last = now
            el = max(now - self.t0, 1e-9)
            print(f"  {self.done / 2**20:9.1f} / {self.total / 2**20:.1f} MiB "
                  f"({100.0 * self.done / self.total:5.1f}%), {self.done / 2**20 / el:7.1f} MiB/s",
                  flush=True)


def noise_tables(dtype, std):
    """Per kind, the 65536 quantiles of its normal distribution, already in the output dtype.

    numpy's standard_normal runs at ~60 M values/s, which would make a 16B checkpoint take
    10 minutes of generation. Instead each value is a table entry picked by 16 random bits:
    the table holds N(mean, std) at the probabilities (i + 0.5) / 65536, so every value is an
    exact draw from a normal distribution discretized to 2^16 levels (tails cut at 4.3 std),
    computed in float32 and then cast (f16) or rounded (bf16) like any other weights."""
    q = np.array([NormalDist().inv_cdf((i + 0.5) / 65536) for i in range(65536)])
    base = (q * std).astype(np.float32)
    return {"w": to_dtype(base, dtype), "b": to_dtype(base, dtype),
            "ln_w": to_dtype(base + np.float32(1.0), dtype)}


def write_tensor(f, idx, shape, kind, tables, seed, progress):
    """Generate and write one tensor in chunks. Each tensor has its own generator seeded by
    (seed, index in the state_dict), so values do not depend on sharding or chunking."""
    rng = np.random.default_rng([seed, idx])
    n_total = 1
    for d in shape:
        n_total *= d
    table = tables[kind]
    for start in range(0, n_total, CHUNK):
        n = min(CHUNK, n_total - start)
        bits = rng.bit_generator.random_raw((n + 3) // 4).view(np.uint16)[:n]  # [n] 16-bit indices
        out = table[bits]
        f.write(out)
        progress.add(out.nbytes)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config", help="HF CodeGen config.json")
    ap.add_argument("outdir", help="output model directory (created)")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="f16")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--std", type=float, default=0.02, help="std of the noise (default 0.02)")
    ap.add_argument("--shard-size-mb", type=float, default=4096,
                    help="largest shard in MiB before splitting into an index + shards (default 4096)")
    ap.add_argument("--tokenizer", metavar="DIR", help="copy tokenizer files from DIR")
    args = ap.parse_args()
    if args.shard_size_mb <= 0:
        die("--shard-size-mb must be positive")
    if sys.byteorder != "little":
        die("safetensors is little-endian and this writer dumps native arrays: run it on a "
            "little-endian machine")

    cfg = read_config(args.config)
    st_dtype, esize = DTYPES[args.dtype]
    specs = tensor_specs(cfg)
    total = sum(nbytes(s[1], esize) for s in specs)
    shards = plan_shards(specs, esize, int(args.shard_size_mb * (1 << 20)))
    idx_of = {s[0]: i for i, s in enumerate(specs)}

    os.makedirs(args.outdir, exist_ok=True)
    out_cfg = dict(cfg)
    out_cfg["torch_dtype"] = TORCH_DTYPE_NAME[args.dtype]
    with open(os.path.join(args.outdir, "config.json"), "w") as f:
        json.dump(out_cfg, f, indent=2)
        f.write("\n")
    if args.tokenizer:
        copied = [n for n in TOKENIZER_FILES if os.path.isfile(os.path.join(args.tokenizer, n))]
        if not copied:
            die(f"--tokenizer {args.tokenizer}: none of {', '.join(TOKENIZER_FILES)} found there")
        for n in copied:
            shutil.copyfile(os.path.join(args.tokenizer, n), os.path.join(args.outdir, n))

    nparams = total // esize
    print(f"writing {args.outdir}: {nparams / 1e6:.1f} M parameters, {args.dtype}, "
          f"{total / 2**20:.1f} MiB in {len(shards)} file(s)", flush=True)
    # Remove files of an earlier run with another layout, so the directory is unambiguous.
    for n in os.listdir(args.outdir):
        if n == "model.safetensors.index.json" or (n.startswith("model") and n.endswith(".safetensors")):
            os.remove(os.path.join(args.outdir, n))

    progress = Progress(total)
    tables = noise_tables(args.dtype, args.std)
    t0 = time.time()
    names = []
    for si, shard in enumerate(shards):
        if len(shards) == 1:
            fname = "model.safetensors"
        else:
            fname = f"model-{si + 1:05d}-of-{len(shards):05d}.safetensors"
        names.append(fname)
        path = os.path.join(args.outdir, fname)
        head, data_len = header_bytes(shard, st_dtype, esize)
        with open(path, "wb") as f:
            f.write(head)
            for name, shape, kind in shard:
                write_tensor(f, idx_of[name], shape, kind, tables, args.seed, progress)
            if f.tell() != len(head) + data_len:
                die(f"{path}: wrote {f.tell()} bytes, expected {len(head) + data_len}")
    if len(shards) > 1:
        index = {"metadata": {"total_size": total},
                 "weight_map": {s[0]: names[si] for si, shard in enumerate(shards) for s in shard}}
        with open(os.path.join(args.outdir, "model.safetensors.index.json"), "w") as f:
            json.dump(index, f, indent=2)
            f.write("\n")
    el = time.time() - t0
    print(f"done in {el:.1f} s ({total / 2**20 / max(el, 1e-9):.1f} MiB/s)", flush=True)


if __name__ == "__main__":
    main()
