#!/usr/bin/env python3
"""tpgen vs HF transformers on the CPU, in one run, on the same random checkpoint.

    python3 tools/bench/bench_vs_hf.py --model /tmp/codegen-350M-f16 [--config configs/codegen-350M.json]
        [--batch 1,8] [--prompt-len 32] [--new-tokens 32] [--runs 5] [--record docs/bench/cpu.jsonl]

Writes the checkpoint with tools/fixtures/make_random_model.py when MODEL has none. For each batch size,
times greedy generation of `new-tokens` tokens after a `prompt-len` prompt: tpgen at TP=1 (all
cores in one rank) and TP=2 (one core per rank), and HF `generate` (tools/bench/bench_hf.py, f32,
all cores), alternating runs so machine noise hits all alike; decode ms/step = (full run - a
1-token run) / (new_tokens - 1), medians. Prints a Markdown table; --record appends it to
docs/bench/ as cpu-hf/decode (tools/bench/perf_record.py), from which docs/PERFORMANCE.md's table is
rendered (tools/bench/perf_tables.py).
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TPGEN = os.path.join(ROOT, "build", "bin", "tpgen")
MPIRUN = os.path.join(ROOT, "launcher", "tpgen-mpirun")


def tpgen_generate(model, prompts_file, new_tokens, np_, threads, extra=()):
    """Greedy `tpgen generate --json --stats` through launcher/tpgen-mpirun: (its --stats dict,
    its JSON result lines: one per prompt, with "prompt_ids" and "ids")."""
    cmd = [MPIRUN, "-np", str(np_), "generate", "--model", model, "--prompts-file", prompts_file,
           "--max-new-tokens", str(new_tokens), "--ignore-eos", "--json", "--backend", "cpu",
           "--threads", str(threads), "--stats", *extra]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-2000:]}")
    results = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    for line in p.stderr.splitlines():
        if line.startswith('{"stats"'):
            return json.loads(line)["stats"], results
    raise RuntimeError("no stats line from tpgen:\n" + p.stderr)


def tpgen_seconds(model, prompts_file, new_tokens, np_, threads):
    return tpgen_generate(model, prompts_file, new_tokens, np_, threads)[0]["seconds"]


def hf_run(model, batch, prompt_len, new_tokens, threads):
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "bench", "bench_hf.py"), model, "--batch", str(batch),
                        "--prompt-len", str(prompt_len), "--new-tokens", str(new_tokens), "--threads",
                        str(threads), "--runs", "1"], capture_output=True, text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--config", default=os.path.join(ROOT, "configs", "codegen-350M.json"))
    ap.add_argument("--batch", default="1,8")
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--runs", type=int, default=5)
    sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
    import perf_record  # --record (imported here: bench_vs_ct2 imports this file for tpgen_seconds)
    perf_record.add_argument(ap, "cpu-hf/decode")
    a = ap.parse_args()
    load0 = os.getloadavg()[0]
    if not os.path.exists(os.path.join(a.model, "config.json")):
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "fixtures", "make_random_model.py"), a.config, a.model,
                        "--dtype", "f16"], check=True)
    cores = os.cpu_count()
    rows = []
    for batch in [int(b) for b in a.batch.split(",")]:
        rng = random.Random(batch)
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            for _ in range(batch):
                f.write(",".join(str(rng.randrange(50000)) for _ in range(a.prompt_len)) + "\n")
            pf = f.name
        res = {"tp1": [], "tp2": [], "hf": []}
        for _ in range(a.runs):
            for key, np_, th in (("tp1", 1, cores), ("tp2", 2, max(1, cores // 2))):
                full = tpgen_seconds(a.model, pf, a.new_tokens, np_, th)
                pre = tpgen_seconds(a.model, pf, 1, np_, th)
                res[key].append((full - pre) / (a.new_tokens - 1) * 1e3)
            h = hf_run(a.model, batch, a.prompt_len, a.new_tokens, cores)
            res["hf"].append(h["decode_ms_per_step"])
        os.unlink(pf)
        med = {k: statistics.median(v) for k, v in res.items()}
        rows.append((batch, med))
        print(json.dumps({"batch": batch, "decode_ms_per_step_median": med, "runs": res}), flush=True)
    print("\n| batch | tpgen TP=1 ms/step | tpgen TP=2 ms/step | HF ms/step | HF / tpgen TP=1 |")
    print("| --- | --- | --- | --- | --- |")
    for batch, m in rows:
        print(f"| {batch} | {m['tp1']:.1f} | {m['tp2']:.1f} | {m['hf']:.1f} | {m['hf'] / m['tp1']:.2f}x |")
    print(f"\n{time.strftime('%Y-%m-%d')}, {cores} cores, prompt {a.prompt_len} tokens, {a.new_tokens} new tokens, "
          f"median of {a.runs} alternating runs")
    if a.record:
        perf_record.record_rows(a.record, "cpu-hf", "decode", [
            (str(batch), [("tpgen TP=1 ms/step", m["tp1"], "ms"), ("tpgen TP=2 ms/step", m["tp2"], "ms"),
                          ("HF ms/step", m["hf"], "ms"), ("HF / tpgen (TP=1)", round(m["hf"] / m["tp1"], 2), "x")])
            for batch, m in rows], perf_record.command_line(__file__), row_header="batch",
            load=f"{load0:.1f}-{os.getloadavg()[0]:.1f}",
            notes=f"Greedy, {a.new_tokens} new tokens after {a.prompt_len}-token prompts, f32 on the CPU, {cores} cores; "
                  f"decode ms/step = (full run - a 1-token run) / {a.new_tokens - 1}; median of {a.runs} alternating runs.")


if __name__ == "__main__":
    main()
