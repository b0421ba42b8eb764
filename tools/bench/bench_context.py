#!/usr/bin/env python3
"""Decode time against context, for one or more tpgen builds side by side (issue 35: attention at
long context, and the KV cache layout before and after).

    python3 tools/bench/bench_context.py --build LABEL=DIR [--build LABEL=DIR ...]
        [--env LABEL:VAR=VALUE ...] [--config configs/codegen-350M.json] [--dtypes f32,bf16]
        [--contexts 96,1000,1900,2000] [--batch 1] [--steps 16] [--threads N] [--runs 3]
        [--attention-only] [--out FILE.json] [--record docs/bench/cpu-attention.jsonl]

--env runs every build once per variant with VAR=VALUE in its environment (e.g. --env
attn-avx2:TPGEN_CPU_ATTN=avx2 --env attn-avx512:TPGEN_CPU_ATTN=avx512: the attention builds side by
side); the row label is then "BUILD VARIANT". Each configuration (build x variant x dtype x
context) is one `DIR/bin/tpgen bench --config CONFIG --random-weights --batch B --context C
--steps S --prefill 0 --json` (the median of S timed decode steps at positions C .. C + S - 1);
run r visits the configurations in an order rotated by r, so drift on the machine spreads over
all of them; every figure is the median over --runs. --attention-only times the attention op
alone instead (DIR/tests/bench_attention: the config's layers, heads and head size, --batch
sequences of one new token, each layer its own K/V caches; the median of 15 steps): the K/V reads
without the weights around them.

Prints a Markdown table: per build and dtype, ms per step at each context and the last context's
time over the first's (the issue's goal: bf16 batch 1 at context 1,900 within 1.35x of context
96). --record appends it to docs/bench/ (section cpu-attention, table context or attention-only;
tools/bench/perf_record.py) for tools/bench/perf_tables.py. Run on a quiet machine: nothing else may run
while it times. Stdlib only.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
import perf_record  # noqa: E402

PROG = "bench_context.py"
DTYPE_FLAGS = {"f32": [], "bf16": ["--dtype", "bf16"], "int8": ["--weights", "int8"]}


def die(msg):
    sys.exit(f"{PROG}: {msg}")


def int_list(s, flag):
    try:
        v = [int(x) for x in s.split(",") if x]
    except ValueError:
        die(f"{flag} {s!r}: expected comma-separated integers")
    if not v or any(x < 1 for x in v):
        die(f"{flag} {s!r}: expected positive integers")
    return v


def parse_builds(items):
    builds = []
    for it in items:
        label, sep, d = it.partition("=")
        if not sep or not label or not d:
            die(f"--build {it!r}: expected LABEL=DIR (e.g. new=build)")
        tpgen = os.path.join(d, "bin", "tpgen")
        if not os.access(tpgen, os.X_OK):
            die(f"--build {it}: no executable {tpgen} (build it first)")
        builds.append((label, tpgen))
    if len({b[0] for b in builds}) != len(builds):
        die("--build: labels must differ")
    return builds


def parse_envs(items):
    envs = []
    for it in items or []:
        label, sep, kv = it.partition(":")
        var, eq, val = kv.partition("=")
        if not sep or not label or not eq or not var:
            die(f"--env {it!r}: expected LABEL:VAR=VALUE (e.g. attn-avx2:TPGEN_CPU_ATTN=avx2)")
        envs.append((label, {var: val}))
    return envs or [("", {})]


def attention_once(tpgen, env, a, dtype, context):
    """ms of one step's attention (all layers) from DIR/tests/bench_attention, and its kernel."""
    exe = os.path.join(os.path.dirname(os.path.dirname(tpgen)), "tests", "bench_attention")
    if not os.access(exe, os.X_OK):
        die(f"--attention-only: no executable {exe} (build the tests)")
    with open(a.config) as f:
        c = json.load(f)
    L, H, E = c.get("n_layer", c.get("num_hidden_layers")), c.get("n_head", c.get("num_attention_heads")), \
        c.get("n_embd", c.get("hidden_size"))
    if not (L and H and E) or dtype == "int8":
        die(f"--attention-only: {a.config} needs n_layer, n_head, n_embd; dtypes f32 or bf16")
    cmd = [exe, dtype, str(a.threads), str(context), str(a.batch), str(L), str(H), str(E // H), "15"]
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env})
    if p.returncode != 0:
        die(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-2000:]}")
    ms = kern = None
    for line in p.stdout.splitlines():
        if "kernel " in line:
            kern = line.rsplit("kernel ", 1)[1].strip()
        if line.startswith("context"):
            ms = float(line.split(":")[1].split()[0])
    if ms is None:
        die(f"{' '.join(cmd)}: no 'context' line in its output")
    return ms, {"attention": kern or "?"}


def bench_once(tpgen, env, a, dtype, context):
    """ms per decode step and the kernels tpgen reports, from one `tpgen bench --json`."""
    if a.attention_only:
        return attention_once(tpgen, env, a, dtype, context)
    cmd = [tpgen, "bench", "--config", a.config, "--random-weights", "--backend", "cpu", "--threads",
           str(a.threads), *DTYPE_FLAGS[dtype], "--batch", str(a.batch), "--context", str(context),
           "--steps", str(a.steps), "--prefill", "0", "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env})
    if p.returncode != 0:
        die(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-2000:]}")
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            if row.get("kind") == "decode" and row.get("batch") == a.batch:
                return row["ms_per_step"], row.get("kernels", {})
    die(f"{' '.join(cmd)}: no decode row for batch {a.batch} in its output")


def main():
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    ap.add_argument("--build", action="append", required=True, help="LABEL=DIR (DIR/bin/tpgen); repeat to compare")
    ap.add_argument("--env", action="append", help="LABEL:VAR=VALUE; repeat for variants of every build")
    ap.add_argument("--config", default=os.path.join(ROOT, "configs", "codegen-350M.json"))
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--contexts", default="96,1000,1900,2000")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--attention-only", action="store_true", help="time the attention op alone (tests/bench_attention)")
    ap.add_argument("--out", help="every run as JSON")
    perf_record.add_argument(ap, "the table")
    a = perf_record.parse_args(ap, PROG)  # --record checked before anything runs
    builds = [(f"{bl} {el}".strip(), t, env) for bl, t in parse_builds(a.build) for el, env in parse_envs(a.env)]
    dtypes = [d for d in a.dtypes.split(",") if d]
    for d in dtypes:
        if d not in DTYPE_FLAGS:
            die(f"--dtypes: {d!r} is not one of {', '.join(DTYPE_FLAGS)}")
    contexts = int_list(a.contexts, "--contexts")
    if a.runs < 1 or a.steps < 1 or a.batch < 1 or a.threads < 1:
        die("--runs, --steps, --batch and --threads must be at least 1")
    configs = [(b, d, c) for b in builds for d in dtypes for c in contexts]
    times = {(b[0], d, c): [] for b, d, c in configs}
    kernels = {}
    for r in range(a.runs):
        for i in range(len(configs)):
            (label, tpgen, env), d, c = configs[(i + r) % len(configs)]
            ms, k = bench_once(tpgen, env, a, d, c)
            times[(label, d, c)].append(ms)
            kernels[(label, d)] = k.get("attention", "?")
            print(f"run {r + 1}/{a.runs}: {label} {d} context {c}: {ms:.2f} ms", file=sys.stderr)
    med = {k: statistics.median(v) for k, v in times.items()}
    c0, cl = contexts[0], contexts[-1]
    head = ["build", "dtype", "attention kernel"] + [f"context {c} ms" for c in contexts] + [f"{cl} / {c0}"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * 3 + " ---: |" * (len(contexts) + 1)]
    rows = []
    for (label, _, _), d in [(b, d) for b in builds for d in dtypes]:
        vals = [med[(label, d, c)] for c in contexts]
        lines.append(f"| {label} | {d} | {kernels[(label, d)]} | " + " | ".join(f"{v:.2f}" for v in vals)
                     + f" | {vals[-1] / vals[0]:.2f}x |")
        rows.append((f"{label} {d}", [(f"context {c}", round(v, 3), "ms") for c, v in zip(contexts, vals)]
                     + [(f"{cl} / {c0}", round(vals[-1] / vals[0], 3), "x")]))
    print("\n".join(lines))
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"contexts": contexts, "batch": a.batch, "steps": a.steps, "threads": a.threads,
                       "runs": {f"{k[0]} {k[1]} {k[2]}": v for k, v in times.items()},
                       "kernels": {f"{k[0]} {k[1]}": v for k, v in kernels.items()}}, f, indent=1)
    if a.record:
        what = ("attention alone (tests/bench_attention: the median of 15 steps)" if a.attention_only
                else f"whole decode step (the median of {a.steps} timed steps from each context)")
        notes = (f"{what}, batch {a.batch}, {a.threads} threads, medians of {a.runs} alternating runs; builds: "
                 + ", ".join(f"{lb} = {os.path.dirname(os.path.dirname(t))}"
                             + "".join(f" {k}={v}" for k, v in e.items()) for lb, t, e in builds) + ".")
        perf_record.record_rows(a.record, "cpu-attention", "attention-only" if a.attention_only else "context", rows,
                                perf_record.command_line(PROG),
                                row_header="build, dtype", notes=notes)


if __name__ == "__main__":
    main()
