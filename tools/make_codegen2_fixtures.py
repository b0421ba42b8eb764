#!/usr/bin/env python3
"""Make the CodeGen2-shaped HF-parity fixture tests/data/codegen2-f32 without torch.

    python3 tools/make_codegen2_fixtures.py [--out tests/data]      (numpy, safetensors, tokenizers)
    python3 tools/make_codegen2_fixtures.py --check-hf [--out tests/data]   (+ torch, transformers)

CodeGen2 (Salesforce/codegen2-*) is HF model_type "codegen" with its own modeling_codegen.py
(config.json "auto_map", trust_remote_code), whose attention splits the fused qkv_proj into
mp_num = 8 groups where HF's built-in CodeGenAttention sets self.mp_num = 4. The reference is the
independent float64 numpy model of tools/codegen_ref.py run with groups=8 (no torch needed);
--check-hf checks it against HF's class in float64, at 4 groups on the CodeGen 1 fixtures and at
8 on this one by setting each attention module's mp_num = 8 (docs/FIXTURES.md has the figures).
The script also checks that the 4-group reading of the same weights gives other greedy ids, so
a loader that ignores the group count fails the parity test.

The fixture directory is laid out as HF's cache / save_pretrained lay out a remote-code model:
  config.json        auto_map {"AutoModelForCausalLM": "modeling_codegen.CodeGenForCausalLM"}
  modeling_codegen.py  a minimal hand-written stand-in, kept as it is by this script (NOT
                     Salesforce's file, which is under their license and not redistributed): it
                     states the layout with the same `mp_num = 8` assignment tpgen identifies in
                     the real file
  model.safetensors  F32 random weights, HF CodeGenForCausalLM names and shapes
  tokenizer.json     a small byte-level BPE trained here, with CodeGen2's FIM special tokens
                     <|endoftext|>, <mask_1>, <sep>, <eom> as added tokens (ids are this
                     fixture's own, not CodeGen2's)
  fim.json           tpgen's FIM format for this model (configs/ entry format, docs/SERVING.md)
  expected.json      the parity schema of docs/FIXTURES.md, plus "fim": a FIM prompt's ids (as
                     the tokenizer encodes the FIM string) and its greedy infill up to <eom>
"""

import argparse
import glob
import json
import os
import shutil
import sys
from types import SimpleNamespace

import numpy as np
from safetensors.numpy import save_file
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from codegen_ref import dump_json, edge_ids, numpy_logits, score_entry, valid_tp  # noqa: E402
from make_random_model import tensor_specs  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GROUPS = 8
FIM_TOKENS = ["<|endoftext|>", "<mask_1>", "<sep>", "<eom>"]
FX = dict(name="codegen2-f32", n_embd=128, n_head=16, rotary_dim=4, n_layer=2, n_positions=128,
          n_inner=None, layer_norm_epsilon=1e-5, seed=808, bpe_vocab=420, vocab_pad=13)
PROMPT_LENS, MAX_NEW, SCORE_LEN, TOP_K = [1, 7, 20], [16, 14, 12], 24, 5
MIN_TOP2_MARGIN, MIN_TOPK_GAP = 1e-3, 1e-4
FIM_PREFIX = "def add(a, b):\n    "
FIM_SUFFIX = "\n    return c\n"

# the stand-in is hand-written source kept in the fixture (tests/data/codegen2-f32/modeling_codegen.py):
# read before the directory is remade, written back unchanged
MODELING_STANDIN = os.path.join(ROOT, "tests", "data", "codegen2-f32", "modeling_codegen.py")


def die(msg):
    sys.exit(f"make_codegen2_fixtures.py: error: {msg}")


def train_tokenizer(d):
    """Byte-level BPE on the repository's own sources, then CodeGen2's FIM tokens as added
    special tokens (HF's AddedToken, saved by HF in tokenizer.json)."""
    files = sorted(glob.glob(os.path.join(ROOT, "tools", "*.py")) + glob.glob(os.path.join(ROOT, "engine", "*.c")))
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train(files, trainers.BpeTrainer(vocab_size=FX["bpe_vocab"], show_progress=False,
                                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in FIM_TOKENS])
    tok.save(os.path.join(d, "tokenizer.json"))
    return tok


def draw_weights(cfg, rng, eom, eom_bias, unprintable):
    E = cfg["n_embd"]
    std = 1.0 / np.sqrt(E) * 1.6
    w = {}
    for name, shape, kind in tensor_specs(cfg):
        if name == "lm_head.bias":
            b = rng.normal(-6.0, 0.3, shape)
            b[edge_ids(cfg["vocab_size"])] += 0.8
            b[cfg["tok_vocab"]:] -= 4.0          # ids past the tokenizer: never chosen
            b[unprintable] -= 4.0                # byte tokens that decode to no printable text
            b[eom] += eom_bias
        elif kind == "ln_w":
            b = rng.normal(1.0, 0.1, shape)
        elif kind == "b":
            b = rng.normal(0.0, 0.1, shape)
        elif name == "transformer.wte.weight":
            b = rng.normal(0.0, 1.0, shape)
        else:
            b = rng.normal(0.0, std, shape)
        w[name] = b.astype(np.float32)
    return w


def log_softmax(x):
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def top_k_entry(row):
    idx = np.argsort(-row, kind="stable")[:TOP_K + 1]
    vals = row[idx]
    ok = float(np.min(vals[:-1] - vals[1:])) >= MIN_TOPK_GAP
    return [[int(i), float(v)] for i, v in zip(idx[:TOP_K], vals[:TOP_K])], ok


def greedy(w64, c, prompt, max_new, groups, stop=None):
    """Whole-sequence forward at every step, argmax; None on a near-tie."""
    seq, ids, lps, tops = list(prompt), [], [], []
    for _ in range(max_new):
        logits = numpy_logits(w64, c, np.array(seq), groups)[-1]
        s = np.sort(logits)
        if s[-1] - s[-2] < MIN_TOP2_MARGIN:
            return None
        lp = log_softmax(logits)
        nxt = int(np.argmax(logits))
        top, ok = top_k_entry(lp)
        if not ok:
            return None
        ids.append(nxt)
        lps.append(float(lp[nxt]))
        tops.append(top)
        seq.append(nxt)
        if nxt == stop:
            break
    return {"prompt_ids": list(prompt), "max_new_tokens": max_new, "ids": ids, "logprobs": lps,
            "top_logprobs": tops}


def score(w64, c, ids):
    return score_entry(ids, log_softmax(numpy_logits(w64, c, np.array(ids), GROUPS)), top_k_entry)


HF_LOGIT_TOL, HF_LP_TOL = 1e-9, 1e-6


def check_hf(out):
    """--check-hf: the numpy reference against HF's own CodeGenForCausalLM in float64 (needs torch
    and transformers; make_fixtures.py's loaders). The CodeGen 1 fixtures under out at 4 groups;
    then codegen2-f32 with every CodeGenAttention's mp_num set to 8 (an instance attribute read
    by forward in transformers 5.x; checked), against codegen_ref groups=8 and the committed
    expected.json; then with mp_num left at 4, which must change the greedy ids."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        die(f"--check-hf needs torch and transformers (pip install -r tools/requirements-fixtures.txt): {e}")
    import inspect
    import make_fixtures as mf
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}; HF float64, SDPA")

    def worst_logit(model, w64, seqs, groups):
        worst = 0.0
        for seq in seqs:
            _, hf = mf.forward_logprobs(model, seq)
            ref = numpy_logits(w64, model.config, np.array(seq), groups)
            worst = max(worst, float(np.abs(hf.numpy() - ref).max()))
        return worst

    def seqs_of(ex):
        s = [g["prompt_ids"] + g["ids"] for g in ex["generate"]] + [ex["score"]["ids"]]
        return s + ([ex["fim"]["prompt_ids"] + ex["fim"]["ids"]] if "fim" in ex else [])

    def load(d):
        model = mf.load_hf_float64(d)
        with open(os.path.join(d, "expected.json")) as f:
            ex = json.load(f)
        return model, {k: v.detach().double().numpy() for k, v in model.state_dict().items()}, ex

    for fx in mf.FIXTURES:
        d = os.path.join(out, fx["name"])
        if not os.path.isfile(os.path.join(d, "expected.json")):
            continue
        model, w64, ex = load(d)
        worst = worst_logit(model, w64, seqs_of(ex), 4)
        print(f"  {fx['name']}: HF (mp_num 4) vs codegen_ref groups=4: max |dlogit| {worst:.2e}")
        if not worst < HF_LOGIT_TOL:
            die(f"{fx['name']}: HF and codegen_ref differ by {worst:.3g} at 4 groups (> {HF_LOGIT_TOL})")

    d = os.path.join(out, FX["name"])
    model, w64, ex = load(d)
    attns = [blk.attn for blk in model.transformer.h]
    src = inspect.getsource(type(attns[0]).forward)
    if not all("mp_num" in vars(a) and a.mp_num == 4 for a in attns) or "self.mp_num" not in src:
        die(f"transformers {transformers.__version__}: CodeGenAttention has no instance attribute "
            "mp_num = 4 read by forward; this check does not know how to set 8 groups there")
    worst_lp = 0.0

    def compare(got, want, what):
        nonlocal worst_lp
        if got is None or got["ids"] != want["ids"]:
            die(f"{what}: HF greedy ids {got and got['ids']} != expected {want['ids']}")
        for a, b in zip(got["logprobs"], want["logprobs"]):
            if a is not None:
                worst_lp = max(worst_lp, abs(a - b))
        for ta, tb in zip(got["top_logprobs"], want.get("top_logprobs", [])):   # fim: none
            if ta is not None and [i for i, _ in ta] != [i for i, _ in tb]:
                die(f"{what}: HF top_logprobs ids {ta} != expected {tb}")
            worst_lp = max([worst_lp] + [abs(a[1] - b[1]) for a, b in zip(ta or [], tb or [])])

    for a in attns:
        a.mp_num = GROUPS
    worst = worst_logit(model, w64, seqs_of(ex), GROUPS)
    print(f"  {FX['name']}: HF (mp_num {GROUPS}) vs codegen_ref groups={GROUPS}: max |dlogit| {worst:.2e}")
    if not worst < HF_LOGIT_TOL:
        die(f"{FX['name']}: HF and codegen_ref differ by {worst:.3g} at {GROUPS} groups (> {HF_LOGIT_TOL})")
    runs = [(g, g["max_new_tokens"], f"generate[{i}]") for i, g in enumerate(ex["generate"])]
    runs.append((ex["fim"], len(ex["fim"]["ids"]), "fim"))
    for want, n, what in runs:
        compare(mf.greedy(model, want["prompt_ids"], n), want, what)
    compare(mf.score(model, ex["score"]["ids"]), ex["score"], "score")
    print(f"  {FX['name']}: HF greedy ids = expected.json in {len(runs)} of {len(runs)} sequences "
          f"(+ score top-{mf.TOP_K} ids); max |dlogprob| vs expected.json {worst_lp:.2e}")
    if not worst_lp < HF_LP_TOL:
        die(f"{FX['name']}: HF logprobs differ from expected.json by {worst_lp:.3g} (> {HF_LP_TOL})")

    for a in attns:
        a.mp_num = 4
    differ = sum((mf.greedy(model, w["prompt_ids"], n) or {}).get("ids") != w["ids"] for w, n, _ in runs)
    print(f"  {FX['name']}: HF at mp_num 4 (its default): {differ} of {len(runs)} greedy sequences differ")
    if differ < 3:
        die(f"{FX['name']}: only {differ} of {len(runs)} greedy sequences differ at 4 groups")
    print("check-hf: ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data"))
    ap.add_argument("--check-hf", action="store_true",
                    help="write nothing; check the fixtures under --out against HF's class in "
                         "float64 (needs torch, transformers)")
    args = ap.parse_args()
    if args.check_hf:
        check_hf(args.out)
        return
    d = os.path.join(args.out, FX["name"])
    if not os.path.isfile(MODELING_STANDIN):
        die(f"{MODELING_STANDIN}: missing (the stand-in modeling file is committed source, not generated)")
    standin = open(MODELING_STANDIN).read()
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    tok = train_tokenizer(d)
    n_tok = tok.get_vocab_size(with_added_tokens=True)
    tid = {t: tok.token_to_id(t) for t in FIM_TOKENS}
    V = n_tok + FX["vocab_pad"]
    cfg = {"activation_function": "gelu_new", "architectures": ["CodeGenForCausalLM"],
           "auto_map": {"AutoModelForCausalLM": "modeling_codegen.CodeGenForCausalLM"},
           "attn_pdrop": 0.0, "bos_token_id": tid["<|endoftext|>"], "eos_token_id": tid["<|endoftext|>"],
           "embd_pdrop": 0.0, "layer_norm_epsilon": FX["layer_norm_epsilon"], "model_type": "codegen",
           "n_ctx": FX["n_positions"], "n_embd": FX["n_embd"], "n_head": FX["n_head"],
           "n_inner": FX["n_inner"], "n_layer": FX["n_layer"], "n_positions": FX["n_positions"],
           "resid_pdrop": 0.0, "rotary_dim": FX["rotary_dim"], "tie_word_embeddings": False,
           "torch_dtype": "float32", "vocab_size": V}
    c = SimpleNamespace(**cfg)
    spec_cfg = dict(cfg, tok_vocab=n_tok)

    fim_text = FIM_PREFIX + "<mask_1>" + FIM_SUFFIX + "<|endoftext|>" + "<sep>" + "<mask_1>"
    fim_ids = tok.encode(fim_text, add_special_tokens=False).ids
    for t in FIM_TOKENS:
        if fim_ids.count(tid[t]) != (2 if t == "<mask_1>" else 0 if t == "<eom>" else 1):
            die(f"the FIM prompt does not encode {t} as its added token")
    # <eom> bias: the smallest (of a few seeds) that ends the FIM infill after 3..12 greedy tokens,
    # so the FIM test sees text, then the stop.
    unprintable = [i for i in range(n_tok) if i not in tid.values()
                   and not all(32 <= ord(ch) < 127 or ch in "\n\t" for ch in tok.decode([i]))]
    found = None
    for seed in range(FX["seed"], FX["seed"] + 20):
        for eom_bias in np.arange(1.0, 5.0, 0.05):
            w = draw_weights(spec_cfg, np.random.default_rng(seed), tid["<eom>"], eom_bias, unprintable)
            w64 = {k: v.astype(np.float64) for k, v in w.items()}
            fim = greedy(w64, c, fim_ids, 12, GROUPS, stop=tid["<eom>"])
            if fim and fim["ids"][-1] == tid["<eom>"]:
                break
        if fim and fim["ids"][-1] == tid["<eom>"] and len(fim["ids"]) >= 4:
            found = seed
            break
    if found is None:
        die("no seed and <eom> bias end the FIM infill after 3..12 tokens")
    save_file(w, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    with open(os.path.join(d, "modeling_codegen.py"), "w") as f:
        f.write(standin)
    with open(os.path.join(ROOT, "configs", "fim-codegen2.json")) as f:
        shutil.copyfileobj(f, open(os.path.join(d, "fim.json"), "w"))

    drng = np.random.default_rng(found + 1)
    edges = edge_ids(V)
    forced = {1: [], 7: [0], 20: [n_tok - 1] + [e for e in edges if 0 < e < n_tok - 1][:6]}

    def draw(length, force):
        p = drng.integers(0, n_tok, length).tolist()
        for where, t in zip(drng.choice(length, size=min(len(force), length), replace=False).tolist(), force):
            p[where] = int(t)
        return p

    def redraw(make, what):
        for _ in range(200):
            r = make()
            if r is not None:
                return r
        die(f"no well-posed {what} in 200 draws")

    gens = [redraw(lambda: greedy(w64, c, draw(n, forced[n]), m, GROUPS), f"prompt of length {n}")
            for n, m in zip(PROMPT_LENS, MAX_NEW)]
    sc = redraw(lambda: score(w64, c, draw(SCORE_LEN, [e for e in edges if e < n_tok])), "score ids")
    differ = sum(g["ids"] != (greedy(w64, c, g["prompt_ids"], g["max_new_tokens"], 4) or {}).get("ids")
                 for g in gens + [fim])
    if differ < 3:
        die(f"only {differ} of 4 greedy sequences differ between 8 and 4 qkv groups")
    fim_out = {"prefix": FIM_PREFIX, "suffix": FIM_SUFFIX, "prompt_text": fim_text, "prompt_ids": fim_ids,
               "ids": fim["ids"], "logprobs": fim["logprobs"],
               "text": tok.decode(fim["ids"][:-1], skip_special_tokens=False), "seed": found, "eom_bias": float(eom_bias)}
    expected = {"reference": "float64 numpy (tools/codegen_ref.py numpy_logits, groups=8)", "name": FX["name"],
                "dtype": "F32", "qkv_groups": GROUPS, "valid_tp": valid_tp(FX["n_head"]),
                "eos_token_id": tid["<|endoftext|>"], "generate": gens, "score": sc, "fim": fim_out}
    with open(os.path.join(d, "expected.json"), "w") as f:
        f.write(dump_json(expected) + "\n")
    size = sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d))
    print(f"{FX['name']}: {size / 1024:.0f} KiB, vocab {V} (tokenizer {n_tok}), FIM tokens {tid}, "
          f"seed {found}, <eom> bias {eom_bias:.2f}, FIM infill {fim['ids']} = {fim_out['text']!r}; "
          f"{differ} of 4 greedy sequences differ at 4 groups")


if __name__ == "__main__":
    main()
