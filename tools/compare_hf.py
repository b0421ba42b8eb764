#!/usr/bin/env python3
"""Compares `tpgen score` with HF transformers on any checkpoint (e.g. a real-shape random one
from tools/make_random_model.py), on random token ids; for checks beyond the tiny committed
fixtures.

    python3 tools/compare_hf.py MODEL_DIR [--np 2] [--len 40] [--seed 5] [-- extra tpgen flags]

HF computes in f32 from the checkpoint's weights (as tpgen's CPU backend does). Prints the
largest |log-prob difference| and whether the top-1 alternative agrees at every position; exits
1 when the difference exceeds --tol (default 2e-4). Needs torch + transformers.
"""
import argparse
import json
import os
import random
import subprocess
import sys

import tool_args  # tools/

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    tool_args.add_numbers(ap, np=2, len=40, seed=5, tol=2e-4)
    ap.add_argument("extra", nargs="*")
    a = ap.parse_args()
    import torch
    from transformers import CodeGenForCausalLM
    m = CodeGenForCausalLM.from_pretrained(a.model, dtype=torch.float32).eval()
    rng = random.Random(a.seed)
    ids = [rng.randrange(m.config.vocab_size) for _ in range(a.len)]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    out = subprocess.run([os.path.join(ROOT, "launcher", "tpgen-mpirun"), "-np", str(a.np), "score", "--model",
                          a.model, "--ids", ",".join(map(str, ids)), "--logprobs", "1", "--json", *a.extra],
                         capture_output=True, text=True, env=env, check=True).stdout
    t = json.loads(out)
    with torch.no_grad():
        lp = torch.log_softmax(m(torch.tensor([ids])).logits[0].float(), -1)
    diff = max(abs(t["logprobs"][i] - lp[i - 1, ids[i]].item()) for i in range(1, len(ids)))
    top = all(t["top_logprobs"][i][0][0] == int(lp[i - 1].argmax()) for i in range(1, len(ids)))
    print(json.dumps({"model": a.model, "np": a.np, "tokens": len(ids), "max_abs_logprob_diff": diff,
                      "top1_equal": top}))
    sys.exit(0 if diff <= a.tol and top else 1)


if __name__ == "__main__":
    main()
