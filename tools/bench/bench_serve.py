#!/usr/bin/env python3
"""Serving benchmark: streaming inter-token latency at batch 1 against `tpgen bench`'s decode step,
measured in the same run, and throughput with 64 concurrent clients.

usage: tools/bench/bench_serve.py [--tpgen build/bin/tpgen] [--config configs/codegen-350M.json] [--np 1]
       [--prompt 160] [--tokens 64] [--clients 64] [--client-prompt 64] [--client-tokens 32] [--runs 3]
       [--record docs/bench/serving.jsonl]
Random weights (--random-weights), the CPU backend, token-id prompts (no tokenizer needed).
Inter-token latency of a stream: the median time between its tokens as the client receives them
(a chunk of k tokens, counted from `return_token_ids`, stands for k gaps of 1/k of the time since
the previous chunk), the same statistic as the median step time of `tpgen bench`.
Prints one JSON line per figure; medians of --runs runs. --record appends them to docs/bench/ as
serving/bench-serve (tools/bench/perf_record.py), from which docs/PERFORMANCE.md's table is rendered.
"""
import argparse
import http.client
import json
import os
import random
import statistics
import sys
import subprocess
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "common"))
import serve_harness as sh  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perf_record  # noqa: E402  (--record)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tools/tool_args.py
import tool_args  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--tpgen", default="build/bin/tpgen")
ap.add_argument("--mpiexec", default="mpiexec")
ap.add_argument("--config", default="configs/codegen-350M.json")
tool_args.add_numbers(ap, np=1, prompt=160, tokens=64, clients=64, client_prompt=64, client_tokens=32, runs=3,
                      threads=0)
perf_record.add_argument(ap, "serving/bench-serve")
a = perf_record.parse_args(ap, "bench_serve.py")
load0 = os.getloadavg()[0]


CPU = ["--backend", "cpu"] + (["--threads", str(a.threads)] if a.threads else [])
MPIEXEC = a.mpiexec if a.np > 1 else None


def cmd(args):
    return sh.command(a.tpgen, args + CPU, a.np, MPIEXEC)


# decode step of `tpgen bench` at batch 1, context = the middle of the streamed positions
ctx = a.prompt + a.tokens // 2
out = subprocess.run(cmd(["bench", "--config", a.config, "--random-weights", "--batch", "1", "--context", str(ctx),
                          "--steps", "32", "--prefill", "0", "--json"]), capture_output=True, text=True,
          check=True).stdout
bench = [r for r in (json.loads(l) for l in out.splitlines() if l.startswith("{")) if r.get("kind", "decode") == "decode"][0]

srv = sh.Server(a.tpgen, ["--config", a.config, "--random-weights", "--max-batch", str(max(a.clients, 1)),
                         "--kv-cache-tokens",
                         str(a.clients * (a.client_prompt + a.client_tokens) + 2 * (a.prompt + a.tokens))] + CPU,
                a.np, MPIEXEC, timeout=600)
host, port = srv.host, srv.port
rng = random.Random(1)


def stream(n_prompt, n_tokens):
    ids = [rng.randrange(50000) for _ in range(n_prompt)]
    c = http.client.HTTPConnection(host, port, timeout=600)
    body = {"prompt": ids, "max_tokens": n_tokens, "temperature": 0, "ignore_eos": True, "stream": True,
            "return_token_ids": True}
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    times, gaps, last = [], [], None
    for data in sh.sse_data(r):
        if data.startswith("{"):
            now = time.perf_counter()
            ch = json.loads(data)["choices"]
            k = len(ch[0]["token_ids"]) if ch else 0
            if k and last is not None:
                gaps += [(now - last) / k] * k  # a chunk of k tokens: k steps since the last one
            if k:
                last = now
            times += [now] * k
    c.close()
    return t0, times, gaps


try:
    itl = []
    for _ in range(a.runs):
        t0, times, gaps = stream(a.prompt, a.tokens)
        assert len(times) == a.tokens, len(times)
        itl.append(statistics.median(gaps))
    step = bench["ms_per_step"] / 1e3
    fig_itl = {"itl_ms": round(statistics.median(itl) * 1e3, 3), "bench_step_ms": round(step * 1e3, 3),
               "ratio": round(statistics.median(itl) / step, 4)}
    print(json.dumps({"figure": "itl_batch1", "tp": a.np, "prompt": a.prompt, "tokens": a.tokens,
                      "itl_ms": round(statistics.median(itl) * 1e3, 3), "bench_step_ms": round(step * 1e3, 3),
                      "ratio": round(statistics.median(itl) / step, 4), "itl_runs_ms": [round(x * 1e3, 3) for x in itl]}),
          flush=True)

    sat = []
    for _ in range(max(1, a.runs - 1)):
        res = [None] * a.clients

        def one(i):
            res[i] = stream(a.client_prompt, a.client_tokens)[:2]

        t0 = time.perf_counter()
        th = [threading.Thread(target=one, args=(i,)) for i in range(a.clients)]
        for t in th:
            t.start()
        for t in th:
            t.join()
        dt = time.perf_counter() - t0
        assert all(len(r[1]) == a.client_tokens for r in res)
        ttft = statistics.median(r[1][0] - r[0] for r in res)
        sat.append((dt, ttft))
    dt = statistics.median(s[0] for s in sat)
    print(json.dumps({"figure": "saturation", "tp": a.np, "clients": a.clients, "prompt": a.client_prompt,
                      "tokens": a.client_tokens, "seconds": round(dt, 3), "req_per_s": round(a.clients / dt, 3),
                      "output_tokens_per_s": round(a.clients * a.client_tokens / dt, 2),
                      "median_ttft_s": round(statistics.median(s[1] for s in sat), 3)}), flush=True)
    if a.record:
        perf_record.record_rows(a.record, "serving", "bench-serve", [(f, [("value", v, u)]) for f, v, u in (
            (f"`tpgen bench` decode step, batch 1, context {a.prompt} (ms)", fig_itl["bench_step_ms"], "ms"),
            ("streaming inter-token latency, batch 1, median gap (ms)", fig_itl["itl_ms"], "ms"),
            ("ratio", fig_itl["ratio"], "x"),
            (f"{a.clients} clients x ({a.client_prompt} prompt + {a.client_tokens} output tokens) (s)", dt, "s"),
            ("requests/s", a.clients / dt, "req/s"), ("output tokens/s", a.clients * a.client_tokens / dt, "tokens/s"),
            ("median time to first token (s)", statistics.median(s[1] for s in sat), "s"))],
            perf_record.command_line(__file__), row_header="figure", load=f"{load0:.1f}-{os.getloadavg()[0]:.1f}",
            notes=f"Random {os.path.basename(a.config)} weights, CPU, TP {a.np}; medians of {a.runs} runs.")
finally:
    srv.stop(timeout=120)  # SIGTERM to rank 0: it drains and stops the workers
