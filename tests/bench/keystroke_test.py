#!/usr/bin/env python3
"""The keystroke benchmark (tools/bench/bench_serving.py --dataset completion-trace, its trace in
tools/bench/completion_trace.py).

usage: keystroke_test.py TPGEN MODEL WORKDIR PART      (MODEL: configs/tiny-demo.json written by
       tools/fixtures/make.py random with the CodeGen tokenizer; unused by PART unit and errors)
PART "unit" (no server): the prompt builder on every cursor of a fixed text (a prompt has at most
  `context` tokens and more than context - step once the cursor is past context, starts at a
  multiple of step, is the file's tokens up to the cursor, and keeps its start while the cursor
  moves within a step: the previous prompt is a prefix of the next); build_trace on a fixed text
  with a byte tokenizer: the same seed gives the same trace and digest, another seed another.
PART "trace": the harness starts `tpgen serve` itself, twice (--variant a=, --variant b=--max-batch
  4) on a short trace of 3 editors typing faster than the answers come: the table has a row per
  variant, the JSON has exactly the keys, both variants played the same trace, every request is
  completed or cancelled (0 failed), cancellations happened (client and server counts > 0), every
  editor's last request completed, prompts <= context tokens, percentiles ordered, the cache hit
  rate is a fraction or "n/a" (null), goodput present, a PNG written and redrawn from the JSON.
PART "seed": against a running server (--url): seed 0 twice gives the same trace digest, files,
  starts and prompt lengths; seed 1 another digest.
PART "errors": bad completion-trace specs and flags give clear errors naming the key or flag.
"""
import json
import os
import subprocess
import sys
import sysconfig

TPGEN, MODEL, WORK, PART = sys.argv[1:5]
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(HERE, "..", "common"))
sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
import serve_harness as sh  # noqa: E402
import completion_trace as ct  # noqa: E402
HARNESS = os.path.join(ROOT, "tools", "bench", "bench_serving.py")
check = sh.check
KEYS = {"requests", "completed", "cancelled", "cancelled_after_first_token", "failed",
        "failed_before_answer", "duration_s", "ttft_ms",
        "e2e_ms", "prompt_tokens", "output_tokens_mean", "prefix_cache", "server_cancelled", "ttft_samples_ms",
        "config", "goodput"}
SERVE_FLAGS = ["--backend", "cpu", "--threads", "1"]
# A stdlib file long enough for context 400 + 8 pauses x 3 tokens (the trace picks among these).
FILES = os.path.join(sysconfig.get_paths()["stdlib"], "[a-d]*.py")
SPEC = f"completion-trace:editors=3,pauses=8,context=400,step=128,typed=3,think=20,files={FILES}"


def harness(args, timeout=100):
    r = subprocess.run([sys.executable, HARNESS, "--no-progress"] + args, capture_output=True, text=True,
                       timeout=timeout)
    print(r.stdout + r.stderr, flush=True)
    return r


def part_unit():
    context, step = 600, 128
    ids = list(range(5000))
    prev = None
    for n in range(1, 3000):
        d, m = ct.prompt_window(n, context, step)
        p = ids[d:m]
        check(m == n and p[-1] == n - 1 and len(p) <= context and d % step == 0,
              f"cursor {n}: window [{d}, {m}) of {len(p)} tokens (context {context}, step {step})")
        if n > context:
            check(len(p) > context - step, f"cursor {n}: {len(p)} tokens kept, want > {context - step}")
        if prev is not None:
            pd, pp = prev
            check(d >= pd, f"cursor {n}: start moved back {pd} -> {d}")
            if d == pd:
                check(p[:len(pp)] == pp, f"cursor {n}: the previous prompt is not a prefix of this one")
            else:  # the start moves only when the cursor crosses context + k * step
                check((n - 1 - context) % step == 0 and d == pd + step, f"cursor {n}: start {pd} -> {d}")
        prev = (d, p)
    # a fixed text (this file) tokenized by bytes
    spec = ct.parse_spec(f"completion-trace:editors=3,pauses=40,context=900,step=256,typed=6,think=50,"
                         f"files={os.path.abspath(__file__)}")
    toks = list(open(__file__, "rb").read())

    def tok(text):
        return list(text.encode())
    check(tok(open(__file__, encoding="utf-8").read()) == toks, "this file is UTF-8 read back exactly")
    tr = ct.build_trace(spec, 5, tok)
    check(len(tr) == 3 and all(len(e["pauses"]) == 40 for e in tr), "3 editors x 40 pauses")
    for e in tr:
        cur, prev = e["start"], None
        check(cur >= 900, f"editor starts at {cur} >= context")
        for think, p in e["pauses"]:
            check(think >= 0, "think time >= 0")
            check(0 < len(p) <= 900 and len(p) > 900 - 256, f"prompt of {len(p)} tokens, context 900 step 256")
            # the prompt is the text up to the cursor: find the cursor (it moved 1..6 tokens)
            ends = [c for c in range(cur + 1, cur + 7) if toks[c - len(p):c] == p]
            if not check(ends, f"the prompt is the file's tokens ending 1..6 past the cursor {cur}"):
                break
            cur = ends[0]
            check((cur - len(p)) % 256 == 0, f"prompt starts at {cur - len(p)}: a multiple of 256")
            if prev is not None and cur - len(p) == prev[0]:
                check(p[:len(prev[1])] == prev[1], "same start: the previous prompt is a prefix")
            prev = (cur - len(p), p)
    again = ct.build_trace(spec, 5, tok)
    check(again == tr and ct.trace_digest(again) == ct.trace_digest(tr), "the same seed gives the same trace")
    check(ct.trace_digest(ct.build_trace(spec, 6, tok)) != ct.trace_digest(tr), "another seed, another trace")


def part_trace():
    sh.become_subreaper()
    out, png, png2, rec = (os.path.join(WORK, f) for f in ("trace.json", "trace.png", "replot.png", "ks.jsonl"))
    for f in (out, png, png2, rec):
        if os.path.exists(f):
            os.remove(f)
    r = harness(["--model", MODEL, "--tpgen", TPGEN, "--dataset", SPEC, "--max-tokens", "48",
                 "--goodput-ttft-ms", "60000", "--variant", "a=", "--variant", "b=--max-batch 4",
                 "--out", out, "--plot", png, "--record", rec, "--record-run", "test", "--"] + SERVE_FLAGS,
                timeout=200)
    check(r.returncode == 0, f"harness exit {r.returncode}")
    rows = [ln for ln in r.stdout.splitlines() if ln.startswith("| a |") or ln.startswith("| b |")]
    check(len(rows) == 2 and "| configuration |" in r.stdout, "a markdown row per variant")
    runs = json.load(open(out)) if os.path.exists(out) else []
    if not check(isinstance(runs, list) and len(runs) == 2, "--variant x2 writes an array of 2 runs"):
        return
    check(runs[0]["config"]["trace_sha256"] == runs[1]["config"]["trace_sha256"], "both variants: the same trace")
    check("--max-batch" in runs[1]["config"]["server_cmd"] and "--max-batch" not in runs[0]["config"]["server_cmd"],
          "variant b's server got its flags")
    for run in runs:
        what = run["config"]["label"]
        check(set(run) == KEYS, f"{what}: keys {sorted(run)} != {sorted(KEYS)}")
        check(run["requests"] == 24 and run["failed"] == 0, f"{what}: 24 requests, 0 failed: {run['failed']}")
        check(run["completed"] + run["cancelled"] == 24, f"{what}: completed + cancelled == 24")
        check(run["completed"] >= 3, f"{what}: every editor's last request completes: {run['completed']}")
        check(run["cancelled"] > 0, f"{what}: editors typing faster than the answers cancel: {run['cancelled']}")
        check(isinstance(run["server_cancelled"], (int, float)) and run["server_cancelled"] > 0,
              f"{what}: the server cancelled what the editors dropped: {run['server_cancelled']}")
        pt = run["prompt_tokens"]
        check(pt["max"] <= 400 and pt["mean"] > 400 - 128, f"{what}: prompt tokens {pt} within (272, 400]")
        sent = [n for ed in run["config"]["trace_prompt_tokens"] for n in ed]
        check(len(sent) == 24 and all(400 - 128 < n <= 400 for n in sent), f"{what}: prompts sent {sent}")
        check(len(run["ttft_samples_ms"]) == run["completed"], f"{what}: a TTFT sample per completed request")
        for k in ("ttft_ms", "e2e_ms"):
            s = run[k]
            check(s["p50"] <= s["p90"] <= s["p99"] <= s["max"], f"{what}: {k} ordered: {s}")
        check(run["ttft_ms"]["max"] <= run["e2e_ms"]["max"], f"{what}: TTFT <= E2E")
        c = run["prefix_cache"]
        for k in ("hit_rate_usage", "hit_rate_metrics"):
            check(c[k] is None or 0 <= c[k] <= 1, f"{what}: {k} {c[k]} is a fraction or null")
        check(run["config"]["max_tokens"] == 48 and run["config"]["stop"] == ["\n"], f"{what}: config {run['config']}")
        g = run["goodput"]
        check(g["slo"] == {"ttft_ms": 60000} and 0 <= g["requests_met"] <= run["completed"], f"{what}: goodput {g}")
    recs = [json.loads(line) for line in open(rec)] if os.path.exists(rec) else []
    rows = list(dict.fromkeys(x["row"] for x in recs))
    check(len(rows) == 2 and rows[0].endswith(", TP 1, 3 x 8, a") and rows[1].endswith(", b")
          and {x["run"] for x in recs} == {"keystroke/trace@test"}, f"--record: a row per variant, one run: {rows}")
    got = {(x["row"], x["metric"]): x["value"] for x in recs}
    check(got.get((rows[0], "completed")) == runs[0]["completed"] and got.get((rows[1], "TTFT p50 (ms)"))
          == runs[1]["ttft_ms"]["p50"], "--record holds the JSON's figures")
    check(os.path.exists(png) and open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n", "the CDF plot is a PNG")
    r = harness(["--compare", out, "--plot", png2])
    check(r.returncode == 0 and os.path.exists(png2), "--compare + --plot redraws the CDF")
    left = list(sh.tpgen_pids(os.getpid(), TPGEN))
    check(not left, f"server ranks still running after the harness exited: {left}")


def part_seed():
    try:
        srv = sh.Server(TPGEN, ["--model", MODEL] + SERVE_FLAGS, timeout=60)
    except sh.ServerError as e:
        check(False, f"server ready line: {e}")
        return
    try:
        spec = f"completion-trace:editors=2,pauses=2,context=300,step=64,typed=2,think=0,files={FILES}"
        got = []
        for seed in (0, 0, 1):
            out = os.path.join(WORK, f"seed{len(got)}.json")
            r = harness(["--url", srv.base, "--dataset", spec, "--max-tokens", "4", "--seed", str(seed), "--out", out])
            check(r.returncode == 0, f"seed {seed}: exit {r.returncode}")
            got.append(json.load(open(out)) if r.returncode == 0 else None)
        if all(got):
            check(got[0]["config"]["trace_sha256"] == got[1]["config"]["trace_sha256"], "seed 0 twice: the same trace")
            check(got[0]["config"]["trace_sha256"] != got[2]["config"]["trace_sha256"], "seed 1: another trace")
            # The second seed-0 run sends prompts the server has seen: with a prefix cache (the
            # server reports cached_tokens), its completed requests are mostly served from it.
            c = got[1]["prefix_cache"]
            if c["hit_rate_usage"] is None:
                print("note: the server reports no usage.prompt_tokens_details.cached_tokens: no hit check")
            else:
                check(c["hit_rate_usage"] > 0.5 and c["hit_rate_metrics"] is not None,
                      f"the same trace again: most prompt tokens cached: {c}")
            c0, c1 = got[0]["config"], got[1]["config"]
            check(c0["trace_prompt_tokens"] == c1["trace_prompt_tokens"] and c0["trace_files"] == c1["trace_files"],
                  f"seed 0 twice: the same files, starts and prompt lengths: {c0['trace_files']} {c1['trace_files']}")
    finally:
        srv.stop(to="launcher", timeout=30)


def part_errors():
    u = ["--url", "http://127.0.0.1:9"]
    bad = [(["--dataset", "completion-trace:editor=2"], "'editor=2': write KEY=VALUE with KEY one of"),
           (["--dataset", "completion-trace:editors=0"], "editors=0: must be >= 1"),
           (["--dataset", "completion-trace:think=-5"], "think=-5: must be >= 0 ms"),
           (["--dataset", "completion-trace:pauses=x"], "pauses='x' is not an integer"),
           (["--dataset", "completion-trace:context=256"], "context=256 must be > step=256"),
           (["--dataset", "completion-trace:files=/nonexistent/*.py"], "files=/nonexistent/*.py: no file matches"),
           (["--dataset", "completion-trace", "--variant", "x"], "write LABEL=FLAGS or LABEL=http://HOST:PORT"),
           (["--dataset", "completion-trace", "--variant", "x=--no-prefix-cache"], "serve flags need --model DIR"),
           (["--dataset", "random:4:4", "--vocab-size", "9", "--variant", "x="], "--variant: only with --dataset "
                                                                                "completion-trace"),
           (["--dataset", "completion-trace", "--goodput-ttft-ms", "0"], "--goodput-ttft-ms 0: must be > 0 ms")]
    for args, msg in bad:
        r = harness(u + args, timeout=30)
        check(r.returncode != 0 and msg in r.stderr, f"{args}: exit {r.returncode}, want {msg!r} in: {r.stderr}")


os.makedirs(WORK, exist_ok=True)
{"unit": part_unit, "trace": part_trace, "seed": part_seed, "errors": part_errors}[PART]()
sh.exit_with_checks()
