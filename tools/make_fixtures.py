#!/usr/bin/env python3
"""Make the HF-parity fixtures under tests/data/ from HF transformers itself.

    pip install -r tools/requirements-fixtures.txt
    python3 tools/make_fixtures.py [--out tests/data] [--only NAME]

For each fixture: a tiny random CodeGenForCausalLM (seeded, shapes below) saved with
save_pretrained as safetensors in the fixture's dtype (sharded for one of them), and
expected.json with HF's greedy continuations and per-position log-probabilities.
The C tests read these files; torch and transformers are needed only to remake them.

Each fixture of BIN_FIXTURES is also written as torch.save checkpoints under <out>/bin/NAME
(the same state dict, loaded back from the safetensors just written): one pytorch_model.bin,
or shards pytorch_model-0000K-of-0000N.bin with pytorch_model.bin.index.json, as
save_pretrained(safe_serialization=False) writes them. --bin-all writes all four (not committed:
the repository keeps the two small ones).
docs/FIXTURES.md describes the schema and the HF semantics the references rely on.

References are computed in float32 from the weights as saved: a BF16/F16 checkpoint is
loaded back with dtype=torch.float32 (so the weights are the rounded values) because tpgen's
CPU backend also computes in fp32 from the stored values.

Every reference sequence is also recomputed by an independent float64 numpy implementation
of the model as docs/FIXTURES.md describes it; the script fails if the two disagree.
"""

import argparse
import json
import os
import shutil
import sys

import numpy as np
import torch
import transformers
from safetensors import safe_open
from transformers import CodeGenConfig, CodeGenForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_random_model import tensor_specs  # noqa: E402  (names and shapes of the state_dict)
from codegen_ref import dump_json, edge_ids, numpy_logits, save_pretrained_clean, score_entry, valid_tp  # noqa: E402  (torch-free, shared)

# Shapes chosen to exercise the engine: heads 4..24, rotary_dim < D and = D, n_inner set,
# vocab sizes not divisible by 2, 3 or 4 (vocab-parallel padding), F32/BF16/F16, an index
# with shards, several layer-norm epsilons (so a hard-coded eps shows up).
FIXTURES = [
    dict(name="tiny-f32", n_embd=64, n_head=4, rotary_dim=8, n_layer=2, vocab_size=1001,
         n_positions=128, n_inner=None, layer_norm_epsilon=1e-3, dtype="F32", seed=101),
    dict(name="rot-full-bf16", n_embd=128, n_head=8, rotary_dim=16, n_layer=2, vocab_size=515,
         n_positions=64, n_inner=200, layer_norm_epsilon=1e-4, dtype="BF16", seed=202),
    dict(name="heads24-f16-sharded", n_embd=192, n_head=24, rotary_dim=4, n_layer=3,
         vocab_size=777, n_positions=96, n_inner=None, layer_norm_epsilon=1e-5, dtype="F16",
         seed=303, max_shard_size="1MB"),
    dict(name="heads12-f32", n_embd=96, n_head=12, rotary_dim=8, n_layer=2, vocab_size=300,
         n_positions=64, n_inner=None, layer_norm_epsilon=1e-5, dtype="F32", seed=404),
]

# name -> number of .bin shards (1: a single pytorch_model.bin, with the attn.causal_mask /
# attn.masked_bias buffers old CodeGen checkpoints carry, which tpgen must ignore).
BIN_FIXTURES = {"tiny-f32": 1, "rot-full-bf16": 3}

TORCH_DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
PROMPT_LENS = [1, 7, 20]
MAX_NEW = [16, 14, 12]          # prompt 20 + 12 new stays inside every n_positions
SCORE_LEN = 24
TOP_K = 5
MIN_TOP2_MARGIN = 1e-3          # greedy steps: logit gap between best and second best
MIN_TOPK_GAP = 1e-4             # top_logprobs: gap between neighbours among the top K+1
NUMPY_TOL = 1e-4                # HF fp32 logits vs the float64 numpy model, max abs


def die(msg):
    sys.exit(f"make_fixtures.py: error: {msg}")


def build_model(fx):
    """A random model, every parameter drawn here (HF's init leaves biases at 0 and layer-norm
    weights at 1, which would hide a missing bias or a swapped weight/bias in the engine)."""
    E = fx["n_embd"]
    std = 1.0 / np.sqrt(E) * 1.6     # large enough that outputs are far from uniform
    cfg = CodeGenConfig(
        vocab_size=fx["vocab_size"], n_positions=fx["n_positions"], n_ctx=fx["n_positions"],
        n_embd=E, n_layer=fx["n_layer"], n_head=fx["n_head"], rotary_dim=fx["rotary_dim"],
        n_inner=fx["n_inner"], activation_function="gelu_new",
        layer_norm_epsilon=fx["layer_norm_epsilon"], initializer_range=float(round(std, 4)),
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=False,
        bos_token_id=fx["vocab_size"] - 1, eos_token_id=fx["vocab_size"] - 1,
        architectures=["CodeGenForCausalLM"])
    torch.manual_seed(fx["seed"])
    model = CodeGenForCausalLM(cfg).eval()
    g = torch.Generator().manual_seed(fx["seed"])

    def normal(shape, s, mean=0.0):
        return torch.randn(shape, generator=g, dtype=torch.float32) * s + mean

    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("ln_1.weight") or name.endswith("ln_f.weight"):
                p.copy_(normal(p.shape, 0.1, 1.0))
            elif name == "lm_head.bias":
                # Shift all logits well below 0 (log-softmax does not change), so an engine
                # that leaves padded vocab logits at 0 picks a padded id or gets wrong
                # log-probs; give the vocab-edge ids a small lift so greedy picks some.
                b = normal(p.shape, 0.3, -6.0)
                b[edge_ids(fx["vocab_size"])] += 0.8
                p.copy_(b)
            elif name.endswith(".bias"):
                p.copy_(normal(p.shape, 0.1))
            elif name == "transformer.wte.weight":
                p.copy_(normal(p.shape, 1.0))
            else:
                p.copy_(normal(p.shape, std))
    return model.to(TORCH_DTYPES[fx["dtype"]])


def load_hf(d, dtype=torch.float32, attn="eager"):
    """HF's own CodeGenForCausalLM on the checkpoint in d (any auto_map ignored), eval mode."""
    return CodeGenForCausalLM.from_pretrained(d, dtype=dtype, attn_implementation=attn).eval()


def load_hf_float64(d):
    """load_hf in float64 end to end, for checks against the numpy model at ~1e-12: SDPA (eager
    attention casts the scores to fp32) and the rotary sin/cos table recomputed in float64 (HF
    builds it in fp32; .double() keeps the rounded values)."""
    model = load_hf(d, torch.float64, "sdpa")
    rot = model.transformer.rotary_emb
    R = rot.pos_embd_dim
    inv = 1.0 / (10000 ** (torch.arange(0, R, 2, dtype=torch.float64) / R))        # [R/2]
    ang = torch.arange(rot.max_positions, dtype=torch.float64)[:, None] * inv      # [P, R/2]
    rot.embed_positions = torch.cat((torch.sin(ang), torch.cos(ang)), dim=1)       # [P, R]
    return model


def forward_logprobs(model, ids):
    """log_softmax of the logits at every position: [T, V], and raw logits [T, V]; fp32, or
    float64 for a float64 model."""
    with torch.no_grad():
        logits = model(torch.tensor([ids], dtype=torch.long)).logits[0]
    if logits.dtype != torch.float64:
        logits = logits.float()
    return torch.log_softmax(logits, -1), logits


def top_k_entry(lp_row):
    """[[id, lp] x TOP_K] sorted by lp descending, and whether neighbours among the top K+1
    are at least MIN_TOPK_GAP apart (otherwise the order is not well-posed at 2e-4)."""
    vals, idx = torch.topk(lp_row, TOP_K + 1)
    gaps = (vals[:-1] - vals[1:]).tolist()
    ok = min(gaps) >= MIN_TOPK_GAP
    return [[int(i), float(v)] for i, v in zip(idx[:TOP_K].tolist(), vals[:TOP_K].tolist())], ok


def greedy(model, prompt, max_new):
    """Full forward pass on the whole sequence at every step (no cache), argmax with the
    lowest id on ties, never stopping at eos. None if some step is a near-tie."""
    seq, ids, lps, tops = list(prompt), [], [], []
    for _ in range(max_new):
        lp, logits = forward_logprobs(model, seq)
        last = logits[-1]
        top2 = torch.topk(last, 2).values
        if float(top2[0] - top2[1]) < MIN_TOP2_MARGIN:
            return None
        nxt = int(torch.argmax(last))
        top, ok = top_k_entry(lp[-1])
        if not ok:
            return None
        ids.append(nxt)
        lps.append(float(lp[-1, nxt]))
        tops.append(top)
        seq.append(nxt)
    return {"prompt_ids": list(prompt), "max_new_tokens": max_new, "ids": ids,
            "logprobs": lps, "top_logprobs": tops}


def score(model, ids):
    return score_entry(ids, forward_logprobs(model, ids)[0], top_k_entry)


def numpy_vs_hf(ref, w64, cfg, seqs):
    """the largest |float64 numpy logits - HF's| over seqs (the independent check of docs/FIXTURES.md)"""
    worst = 0.0
    for seq in seqs:
        _, hf = forward_logprobs(ref, seq)
        worst = max(worst, float(np.abs(numpy_logits(w64, cfg, np.array(seq)) - hf.double().numpy()).max()))
    return worst


def draw_prompt(rng, vocab, length, forced):
    """length random ids with the forced ids placed at random distinct positions."""
    p = rng.integers(0, vocab, length).tolist()
    pos = rng.choice(length, size=min(len(forced), length), replace=False)
    for where, tok in zip(pos.tolist(), forced):
        p[where] = int(tok)
    return p


def check_files(d, fx, cfg):
    """Every tensor present once with HF's name and shape, in the fixture's dtype."""
    files = sorted(n for n in os.listdir(d) if n.endswith(".safetensors"))
    index = os.path.join(d, "model.safetensors.index.json")
    if fx.get("max_shard_size"):
        if not os.path.isfile(index) or len(files) < 2:
            die(f"{d}: expected an index and >= 2 shards, found {files}")
        with open(index) as f:
            wmap = json.load(f)["weight_map"]
    elif files != ["model.safetensors"] or os.path.exists(index):
        die(f"{d}: expected a single model.safetensors, found {files}")
    want = {n: list(s) for n, s, _ in tensor_specs(cfg.to_dict())}
    seen = {}
    for fn in files:
        with safe_open(os.path.join(d, fn), "pt") as f:
            for k in f.keys():
                sl = f.get_slice(k)
                if k in seen:
                    die(f"{d}: tensor {k} in {seen[k]} and {fn}")
                seen[k] = fn
                if k not in want:
                    die(f"{d}/{fn}: unexpected tensor {k}")
                if list(sl.get_shape()) != want[k] or sl.get_dtype() != fx["dtype"]:
                    die(f"{d}/{fn}: {k} is {sl.get_dtype()} {sl.get_shape()}, "
                        f"expected {fx['dtype']} {want[k]}")
                if fx.get("max_shard_size") and wmap.get(k) != fn:
                    die(f"{d}: index maps {k} to {wmap.get(k)}, found in {fn}")
    missing = sorted(set(want) - set(seen))
    if missing:
        die(f"{d}: missing tensors {missing}")


def make_fixture(fx, out_dir):
    d = os.path.join(out_dir, fx["name"])
    model = build_model(fx)
    save_pretrained_clean(model, d, fx.get("max_shard_size"))
    check_files(d, fx, model.config)

    # Reference: the saved (rounded) weights, loaded back in fp32, eager attention.
    ref = load_hf(d)
    cfg = ref.config
    w64 = {k: v.detach().double().numpy() for k, v in ref.state_dict().items()}
    V = cfg.vocab_size
    rng = np.random.default_rng(fx["seed"])
    edges = edge_ids(V)
    forced_for_len = {1: [], 7: [0], 20: [V - 1] + [e for e in edges if e not in (0, V - 1)][:6]}

    def redraw(make, what):
        for attempt in range(200):
            r = make()
            if r is not None:
                return r, attempt
        die(f"{fx['name']}: no well-posed {what} in 200 draws")

    gens = []
    for length, max_new in zip(PROMPT_LENS, MAX_NEW):
        g, tries = redraw(lambda: greedy(ref, draw_prompt(rng, V, length, forced_for_len[length]),
                                          max_new), f"prompt of length {length}")
        gens.append(g)
        if tries:
            print(f"  {fx['name']}: prompt of length {length}: {tries} near-tie draw(s) rejected")
    sc, tries = redraw(lambda: score(ref, draw_prompt(rng, V, SCORE_LEN, edges)), "score ids")
    if tries:
        print(f"  {fx['name']}: score ids: {tries} near-tie draw(s) rejected")

    # Independent check of the documented semantics: float64 numpy vs HF fp32.
    worst = numpy_vs_hf(ref, w64, cfg, [g["prompt_ids"] + g["ids"] for g in gens] + [sc["ids"]])
    if not worst < NUMPY_TOL:
        die(f"{fx['name']}: HF logits differ from the numpy model by {worst:.3g} "
            f"(> {NUMPY_TOL}): the semantics in docs/FIXTURES.md do not match transformers")

    expected = {
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "name": fx["name"],
        "dtype": fx["dtype"],
        "valid_tp": valid_tp(cfg.n_head),
        "eos_token_id": int(cfg.eos_token_id),
        "generate": gens,
        "score": sc,
    }
    with open(os.path.join(d, "expected.json"), "w") as f:
        f.write(dump_json(expected) + "\n")

    size = sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d))
    out_ids = sorted({i for g in gens for i in g["ids"]})
    all_in = {i for g in gens for i in g["prompt_ids"] + g["ids"]} | set(sc["ids"])
    maxp = max(np.exp(lp) for g in gens for lp in g["logprobs"])
    print(f"{fx['name']}: {size / 1024:.0f} KiB, files {sorted(os.listdir(d))}\n"
          f"  numpy-vs-HF max |dlogit| {worst:.2e}; greedy ids used {out_ids}; "
          f"max p(chosen) {maxp:.3f}; edge ids present: "
          f"{[e for e in edges if e in all_in]} of {edges}")
    return size


def write_bin(name, src, out_dir, n_shards):
    """The safetensors state dict of fixture src as torch.save checkpoints in out_dir/bin/name."""
    from safetensors.torch import load_file
    d = os.path.join(out_dir, "bin", name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    for f in ("config.json", "expected.json"):
        shutil.copy(os.path.join(src, f), d)
    if os.path.exists(os.path.join(src, "model.safetensors")):
        sd = load_file(os.path.join(src, "model.safetensors"))
    else:
        with open(os.path.join(src, "model.safetensors.index.json")) as f:
            sd = {}
            for fn in sorted(set(json.load(f)["weight_map"].values())):
                sd.update(load_file(os.path.join(src, fn)))
    names = list(sd)
    if n_shards == 1:
        with open(os.path.join(src, "config.json")) as f:
            cfg = json.load(f)
        npos = cfg["n_positions"]
        for i in range(cfg["n_layer"]):     # as in the Salesforce files: never loaded by tpgen
            sd[f"transformer.h.{i}.attn.causal_mask"] = torch.tril(
                torch.ones(npos, npos, dtype=torch.bool)).view(1, 1, npos, npos)
            sd[f"transformer.h.{i}.attn.masked_bias"] = torch.tensor(-1e9)
        torch.save(sd, os.path.join(d, "pytorch_model.bin"))
    else:
        per = -(-len(names) // n_shards)
        wmap = {}
        for k in range(n_shards):
            fn = f"pytorch_model-{k + 1:05d}-of-{n_shards:05d}.bin"
            part = {n: sd[n] for n in names[k * per:(k + 1) * per]}
            torch.save(part, os.path.join(d, fn))
            wmap.update({n: fn for n in part})
        total = sum(t.numel() * t.element_size() for t in sd.values())
        with open(os.path.join(d, "pytorch_model.bin.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": wmap}, f, indent=2)
    # Check: torch reads back exactly the tensors of the safetensors file.
    back = {}
    for fn in sorted(os.listdir(d)):
        if fn.endswith(".bin"):
            back.update(torch.load(os.path.join(d, fn), weights_only=True))
    for n in names:
        if not torch.equal(back[n], sd[n]) or back[n].dtype != sd[n].dtype:
            die(f"{d}: tensor {n} does not round-trip")
    size = sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d))
    print(f"bin/{name}: {size / 1024:.0f} KiB, files {sorted(os.listdir(d))}")
    return size


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "..", "tests", "data"))
    ap.add_argument("--only", help="make only this fixture")
    ap.add_argument("--bin-all", action="store_true", help="write every fixture as .bin too")
    ap.add_argument("--bin-only", action="store_true",
                    help="only (re)write the .bin copies of the existing safetensors fixtures")
    args = ap.parse_args()
    torch.set_num_threads(1)          # deterministic reductions, and the machine is shared
    transformers.logging.set_verbosity_error()
    os.makedirs(args.out, exist_ok=True)
    total = 0
    for fx in FIXTURES:
        if args.only and fx["name"] != args.only:
            continue
        if not args.bin_only:
            total += make_fixture(fx, args.out)
        if args.bin_all or fx["name"] in BIN_FIXTURES:
            total += write_bin(fx["name"], os.path.join(args.out, fx["name"]), args.out,
                               BIN_FIXTURES.get(fx["name"], 2 if fx.get("max_shard_size") else 1))
    print(f"total {total / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
