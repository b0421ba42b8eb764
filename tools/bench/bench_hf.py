#!/usr/bin/env python3
"""Decode speed of HF transformers on the same checkpoint and prompts as tpgen, same machine, same run.

    python3 tools/bench/bench_hf.py MODEL_DIR --prompt-len 32 --new-tokens 64 --batch 1 --threads 2 --runs 5

Greedy `generate` (KV cache on, as HF does by default), float32 on the CPU (tpgen's CPU backend
computes in f32 too). Prints one JSON line: median seconds per run and generated tokens/s, plus
the time of the prefill alone (a 1-token generate), so decode ms/token = (t_full - t_prefill) /
(new_tokens - 1). Needs torch + transformers (tools/fixtures/requirements-fixtures.txt). The HF half of
tools/bench/bench_vs_hf.py, which records the run (--record).
"""
import argparse
import json
import statistics
import time

import torch
from transformers import CodeGenForCausalLM

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tools/tool_args.py

import tool_args  # tools/


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    tool_args.add_numbers(ap, prompt_len=32, new_tokens=64, batch=1, threads=2, runs=5, seed=0)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model = CodeGenForCausalLM.from_pretrained(a.model, dtype=torch.float32).eval()
    g = torch.Generator().manual_seed(a.seed)
    ids = torch.randint(0, model.config.vocab_size - 200, (a.batch, a.prompt_len), generator=g)

    def run(n):
        with torch.inference_mode():
            t0 = time.perf_counter()
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
                                 do_sample=False, pad_token_id=0)
            dt = time.perf_counter() - t0
        assert out.shape[1] == a.prompt_len + n
        return dt

    run(2)  # warm-up
    full = statistics.median(run(a.new_tokens) for _ in range(a.runs))
    prefill = statistics.median(run(1) for _ in range(a.runs))
    decode_ms = (full - prefill) / (a.new_tokens - 1) * 1e3
    print(json.dumps({"impl": "hf", "batch": a.batch, "prompt_len": a.prompt_len, "new_tokens": a.new_tokens,
                      "threads": a.threads, "seconds": full, "prefill_seconds": prefill,
                      "decode_ms_per_step": decode_ms, "tokens_per_s": a.batch * a.new_tokens / full,
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
