#!/usr/bin/env python3
"""HF transformers in bf16 on the CPU as the reference for tpgen's `--dtype bf16` CPU backend.

For every fixture tests/data/*/expected.json (made by tools/make_fixtures.py, HF in f32), loads
the same checkpoint with dtype=torch.bfloat16 (f32/f16 weights rounded to bf16 as tpgen rounds
them at load), eager attention, and reruns the fixture's score ids and generate prompts: greedy
(full forward each step, no cache, never stopping at eos), log_softmax of the logits in f32.
Writes expected-hf-bf16.json beside expected.json, in the same format plus, per generate step,
"top2_gap" (HF-bf16's own top-1 minus top-2 log-probability): where it is small, another bf16
implementation may legitimately pick the runner-up (tests/parity/hf_parity.sh).

usage: python3 tools/make_bf16_reference.py [--data tests/data]   (needs torch + transformers)
"""
import argparse
import glob
import json
import os

import torch
import transformers
from transformers import CodeGenForCausalLM

TOP_K = 5


def logprobs(model, ids):
    with torch.no_grad():
        logits = model(torch.tensor([ids], dtype=torch.long)).logits[0].float()
    return torch.log_softmax(logits, -1)


def top(lp_row):
    vals, idx = torch.topk(lp_row, TOP_K)
    return [[int(i), float(v)] for i, v in zip(idx.tolist(), vals.tolist())]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data"))
    a = ap.parse_args()
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    for path in sorted(glob.glob(os.path.join(a.data, "*", "expected.json"))):
        fx = os.path.dirname(path)
        exp = json.load(open(path))
        model = CodeGenForCausalLM.from_pretrained(fx, dtype=torch.bfloat16, attn_implementation="eager").eval()
        out = {k: exp[k] for k in ("name", "dtype", "valid_tp", "eos_token_id")}
        out.update({"transformers_version": transformers.__version__, "torch_version": torch.__version__,
                    "reference": "HF CodeGenForCausalLM in torch.bfloat16 on the CPU (eager attention)"})
        ids = exp["score"]["ids"]
        lp = logprobs(model, ids)
        out["score"] = {"ids": ids, "logprobs": [None] + [float(lp[t - 1, ids[t]]) for t in range(1, len(ids))],
                        "top_logprobs": [None] + [top(lp[t - 1]) for t in range(1, len(ids))]}
        out["generate"] = []
        for ge in exp["generate"]:
            seq, g = list(ge["prompt_ids"]), {"prompt_ids": ge["prompt_ids"], "max_new_tokens": ge["max_new_tokens"],
                                             "ids": [], "logprobs": [], "top_logprobs": [], "top2_gap": []}
            for _ in range(ge["max_new_tokens"]):
                row = logprobs(model, seq)[-1]
                v2 = torch.topk(row, 2).values
                nxt = int(torch.argmax(row))
                g["ids"].append(nxt)
                g["logprobs"].append(float(row[nxt]))
                g["top_logprobs"].append(top(row))
                g["top2_gap"].append(float(v2[0] - v2[1]))
                seq.append(nxt)
            out["generate"].append(g)
        with open(os.path.join(fx, "expected-hf-bf16.json"), "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
        print("%s: %d score positions, %d prompts" % (out["name"], len(ids), len(out["generate"])))


if __name__ == "__main__":
    main()
