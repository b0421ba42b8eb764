#!/usr/bin/env python3
"""Write expected.json (the HF-parity fixture) into the trained tiny model's directory.

    python3 tools/make_tiny_fixture.py [--model models/codegen-tiny-py]

The same schema and HF semantics as tools/make_fixtures.py (docs/FIXTURES.md): HF
transformers' greedy continuations and per-position log-probabilities, computed in float32
from the weights as saved (f16 loaded back as fp32, eager attention), every sequence also
recomputed by the independent float64 numpy model. The difference: the model is the trained
checkpoint and the prompts are real Python text (tokenized by HF), not random ids, so parity
holds where the distribution is peaked and real, at TP 1, 2 and 4 (tests/tiny.cmake).
"""

import argparse
import json
import os
import sys

import torch
import transformers
from transformers import AutoTokenizer, CodeGenForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures import NUMPY_TOL, dump_json, greedy, numpy_vs_hf, score, valid_tp  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
PROMPTS = [                       # tried in order; the first N_PROMPTS well-posed ones are used
    "def fibonacci(n):\n",
    "import os\nimport sys\n\n\ndef main(argv):\n    ",
    "class Stack:\n    def __init__(self):\n        self.",
    "for i in range(10):\n",
    "def read_lines(path):\n    with open(path) as f:\n",
    "if __name__ == '__main__':\n",
]
N_PROMPTS = 3
MAX_NEW = 24
SCORE_LEN = 96


def die(msg):
    sys.exit(f"make_tiny_fixture.py: error: {msg}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "codegen-tiny-py"))
    a = ap.parse_args()
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    tok = AutoTokenizer.from_pretrained(a.model)
    ref = CodeGenForCausalLM.from_pretrained(a.model, dtype=torch.float32,
                                             attn_implementation="eager").eval()
    cfg = ref.config
    dtype = {torch.float16: "F16", torch.bfloat16: "BF16", torch.float32: "F32"}[
        CodeGenForCausalLM.from_pretrained(a.model).dtype]
    w64 = {k: v.detach().double().numpy() for k, v in ref.state_dict().items()}

    gens = []
    for p in PROMPTS:
        g = greedy(ref, tok(p)["input_ids"], MAX_NEW)
        if g is None:
            print(f"  prompt {p!r}: a near-tie step, skipped")
            continue
        gens.append(g)
        print(f"  prompt {p!r} -> {tok.decode(g['ids'])!r}")
        if len(gens) == N_PROMPTS:
            break
    if len(gens) < N_PROMPTS:
        die(f"only {len(gens)} of {len(PROMPTS)} prompts are well-posed")

    with open(os.path.join(a.model, "heldout.txt")) as f:
        held = tok(f.read())["input_ids"]
    sc = None
    for start in range(0, len(held) - SCORE_LEN, SCORE_LEN):
        sc = score(ref, held[start:start + SCORE_LEN])
        if sc is not None:
            break
    if sc is None:
        die("no well-posed score window in heldout.txt")

    worst = numpy_vs_hf(ref, w64, cfg, [g["prompt_ids"] + g["ids"] for g in gens] + [sc["ids"]])
    if not worst < NUMPY_TOL:
        die(f"HF logits differ from the numpy model by {worst:.3g} (> {NUMPY_TOL})")

    expected = {
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "name": os.path.basename(os.path.normpath(a.model)),
        "dtype": dtype,
        "valid_tp": valid_tp(cfg.n_head),
        "eos_token_id": int(cfg.eos_token_id),
        "generate": gens,
        "score": sc,
    }
    with open(os.path.join(a.model, "expected.json"), "w") as f:
        f.write(dump_json(expected) + "\n")
    print(f"expected.json: {len(gens)} prompts, score of {len(sc['ids'])} ids; "
          f"numpy-vs-HF max |dlogit| {worst:.2e}")


if __name__ == "__main__":
    main()
