#!/usr/bin/env python3
"""Baseline (b) of issue 15 (tools/dev/seed_pattern) in a real tritonserver (the `nvidia-pytriton`
wheel, tools/dev/seed_pattern/setup.sh) on a tiny random CodeGen with the CodeGen tokenizer.

usage: greedy_test.py WORKDIR VENV
SKIPPED (77) without torch + transformers (CI has none) or when Triton cannot be set up.
Checks: greedy token ids from the BLS loop (text prompts and input_ids prompts) == HF generate's,
streamed text == the tokenizer's decoding of them, one response per token with context 0 then
prompt length + 1 per step; a seeded temperature request repeats exactly; a prompt longer than
n_positions, sampling_parameters that are not JSON, and a KV cache of the wrong layer count sent
to the step model each give a Triton error naming the problem; a good request works after them.
"""
import http.client
import json
import os
import shutil
import subprocess
import sys
from types import SimpleNamespace

WORK, VENV = sys.argv[1:3]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
try:
    import torch
    from transformers import AutoTokenizer, CodeGenForCausalLM
except ImportError as e:
    print("SKIPPED: needs torch + transformers (%s)" % e)
    sys.exit(77)
sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
import bench_baselines as bb  # noqa: E402

FAILS = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        FAILS.append(what)


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
model = os.path.join(WORK, "model")
subprocess.run([sys.executable, os.path.join(ROOT, "tools", "fixtures", "make_random_model.py"), os.path.join(ROOT, "configs", "tiny-demo.json"),
                model, "--tokenizer", os.path.join(ROOT, "tests", "data", "tokenizer", "codegen"), "--seed", "7"],
               check=True, stdout=subprocess.DEVNULL)
tok = AutoTokenizer.from_pretrained(model)
hf = CodeGenForCausalLM.from_pretrained(model, dtype=torch.float32).eval()


def hf_greedy(ids, n):
    with torch.inference_mode():
        x = torch.tensor([ids])
        return hf.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=n, min_new_tokens=n, do_sample=False,
                           pad_token_id=0)[0, len(ids):].tolist()


tr = bb.Triton(SimpleNamespace(venv=VENV, threads=1, load_timeout=280, triton_args=""), model, None)
try:
    N = 12
    for p in ["def fib(n):\n    ", "import numpy as np\nclass A:"]:
        r = bb.req_bls(tr.port, p, N)
        ids = tok(p)["input_ids"]
        want = hf_greedy(ids, N)
        check(r["ids"] == want, "greedy ids of %r == HF generate (%s vs %s)" % (p, r["ids"], want))
        check(r["text"] == tok.decode(r["ids"]), "streamed text == decode(ids): %r" % r["text"])
        ctx = [int(s["context"]) for s in r["steps"]]
        check(ctx == [0] + [len(ids) + i for i in range(N - 1)], "context per step %s" % ctx)
        check(all(s["forward_ms"] > 0 and s["step_ms"] >= s["forward_ms"] for s in r["steps"]),
              "step_ms >= forward_ms > 0 every step")
    ids = list(range(300, 340))
    r = bb.req_bls(tr.port, ids, 8)
    check(r["ids"] == hf_greedy(ids, 8), "input_ids prompt: greedy ids == HF generate")
    # temperature: a seeded request repeats
    body = {"text_input": "def f(x):", "max_tokens": 8,
            "sampling_parameters": json.dumps({"temperature": 1.5, "seed": 3, "ignore_eos": True})}
    outs = []
    for _ in range(2):
        it = bb.sse(tr.port, "/v2/models/codegen_bls/generate_stream", body)
        next(it)
        outs.append([int(ev["token_id"]) for _, ev in it])
    check(outs[0] == outs[1] and len(outs[0]) == 8, "seeded temperature sampling repeats: %s" % outs)
    # too long: an error naming the limit, then the model still answers
    try:
        bb.req_bls(tr.port, list(range(100, 2100)), 100)
        check(False, "a prompt over n_positions is refused")
    except RuntimeError as e:
        check("n_positions=2048" in str(e), "a prompt over n_positions is refused: %s" % e)
    # sampling_parameters that are not JSON: an error naming the input
    try:
        it = bb.sse(tr.port, "/v2/models/codegen_bls/generate_stream",
                    {"text_input": "x", "max_tokens": 2, "sampling_parameters": "{temperature: 1"})
        list(it)
        check(False, "sampling_parameters that are not JSON are refused")
    except RuntimeError as e:
        check("sampling_parameters is not JSON" in str(e), "sampling_parameters that are not JSON are refused: %s" % e)
    # the step model directly, with a KV cache of the wrong layer count: an error naming the shape
    c = http.client.HTTPConnection("127.0.0.1", tr.port, timeout=60)
    c.request("POST", "/v2/models/codegen_step/infer", body=json.dumps({"inputs": [
        {"name": "input_ids", "shape": [1, 1], "datatype": "INT64", "data": [5]},
        {"name": "past_key_values", "shape": [3, 2, 1, 1, 1, 1], "datatype": "FP32", "data": [0] * 6}]}))
    resp = c.getresponse()
    body = resp.read().decode(errors="replace")
    check(resp.status != 200 and "n_layer=2" in body and "[3, 2, 1, 1, 1, 1]" in body,
          "codegen_step refuses a KV cache of 3 layers: %d %s" % (resp.status, body[:200]))
    r = bb.req_bls(tr.port, "x = 1", 3)
    check(len(r["ids"]) == 3, "a good request after the errors works")
finally:
    tr.stop()
print("FAILED: %d checks" % len(FAILS) if FAILS else "PASSED")
sys.exit(1 if FAILS else 0)
