#!/usr/bin/env python3
"""Triton's cost per token: streaming TTFT and inter-token latency through Triton (HTTP
generate_stream of launcher/triton/model_repository/tpgen) vs straight to `tpgen serve`
(/v1/completions, stream), against the same tpgen in the same run, requests alternating, one at
a time, HumanEval-style prompts (a signature and a docstring), greedy, ignore_eos.

usage: tools/bench/bench_triton.py MODEL_DIR [--venv build/triton-venv] [--tpgen build/bin/tpgen] [--np 2]
       [--tokens 64] [--runs 3] [--threads 0] [--record docs/bench/serving.jsonl]
MODEL_DIR needs the tokenizer (e.g. tools/fixtures/make_random_model.py configs/tiny-demo.json DIR
--tokenizer tests/data/tokenizer/codegen). Run it with the venv's Python (tritonclient not needed:
both sides are SSE over http.client). Figures per request: TTFT = send to the first text;
ITL = (last text - first text) / (tokens - 1); medians over prompts x runs. One JSON line each.
--record appends the figures to docs/bench/ as triton/cost (tools/bench/perf_record.py), from which
docs/PERFORMANCE.md's table is rendered (tools/bench/perf_tables.py).
"""
import argparse
import http.client
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
import serve_harness as sh  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
import perf_record  # noqa: E402  (--record)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tools/tool_args.py
import tool_args  # noqa: E402
ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("--venv", default=os.path.join(ROOT, "build", "triton-venv"))
ap.add_argument("--tpgen", default=os.path.join(ROOT, "build", "bin", "tpgen"))
ap.add_argument("--mpiexec", default=shutil.which("mpirun") or "mpirun")
tool_args.add_numbers(ap, np=2, tokens=64, runs=3, threads=0)
perf_record.add_argument(ap, "triton/cost")
a = perf_record.parse_args(ap, "bench_triton")
load0 = os.getloadavg()[0]

PROMPTS = [
    'def has_close_elements(numbers: List[float], threshold: float) -> bool:\n    """ Check if in given list of numbers, are any two numbers closer to each other than\n    given threshold.\n    """\n',
    'def truncate_number(number: float) -> float:\n    """ Given a positive floating point number, return its decimal part.\n    """\n',
    'def below_zero(operations: List[int]) -> bool:\n    """ You\'re given a list of deposit and withdrawal operations on a bank account that starts\n    with zero balance. Return True if at any point the balance falls below zero.\n    """\n',
    'def mean_absolute_deviation(numbers: List[float]) -> float:\n    """ For a given list of input numbers, calculate Mean Absolute Deviation around the mean.\n    """\n',
    'def intersperse(numbers: List[int], delimeter: int) -> List[int]:\n    """ Insert a number \'delimeter\' between every two consecutive elements of input list.\n    """\n',
    'def parse_nested_parens(paren_string: str) -> List[int]:\n    """ Input is a string of groups of nested parentheses separated by spaces. For each group,\n    output the deepest level of nesting.\n    """\n',
    'def filter_by_substring(strings: List[str], substring: str) -> List[str]:\n    """ Filter an input list of strings only for ones that contain given substring.\n    """\n',
    'def sum_product(numbers: List[int]) -> Tuple[int, int]:\n    """ For a given list of integers, return a tuple consisting of a sum and a product.\n    """\n',
]


free_port = sh.free_port


def stream(port, path, body):
    """(ttft_s, itl_s, text) of one streamed request."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    t0 = time.perf_counter()
    c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200, (r.status, r.read())
    times, text = [], []
    for data in sh.sse_data(r):
        if data == "[DONE]":
            continue
        ev = json.loads(data)
        t = ev["text_output"] if "text_output" in ev else ev["choices"][0]["text"]
        if t:
            times.append(time.perf_counter())
            text.append(t)
    c.close()
    return times[0] - t0, (times[-1] - times[0]) / (a.tokens - 1), "".join(text)


work = tempfile.mkdtemp(prefix="bench-triton-")
repo = os.path.join(work, "repo")
shutil.copytree(os.path.join(ROOT, "launcher", "triton", "model_repository"), repo)
cfg_path = os.path.join(repo, "tpgen", "config.pbtxt")
cfg = open(cfg_path).read()
flags = "--backend cpu" + (" --threads %d" % a.threads if a.threads else "")
for k, v in {"model": os.path.abspath(a.model), "tp_size": str(a.np), "tpgen_bin": os.path.abspath(a.tpgen),
             "mpirun": a.mpiexec, "mpirun_flags": "--oversubscribe --allow-run-as-root", "tpgen_flags": flags,
             "tpgen_url": ""}.items():
    cfg = re.sub(r'(key: "%s" value: \{ string_value: )"[^"]*"' % k, lambda m: m.group(1) + json.dumps(v), cfg)
open(cfg_path, "w").write(cfg)
py = os.path.join(a.venv, "bin", "python")
tdir = subprocess.run([py, "-c", "import os, pytriton; print(os.path.join(os.path.dirname(pytriton.__file__), 'tritonserver'))"],
                      capture_output=True, text=True, check=True).stdout.strip()
site = subprocess.run([py, "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True, text=True,
                      check=True).stdout.strip()
hp, gp = free_port(), free_port()
log = open(os.path.join(work, "tritonserver.log"), "w+")
tr = subprocess.Popen([tdir + "/bin/tritonserver", "--model-repository", repo, "--backend-directory", tdir + "/backends",
                       "--http-address", "127.0.0.1", "--http-port", str(hp), "--grpc-address", "127.0.0.1",
                       "--grpc-port", str(gp), "--allow-metrics", "false"],
                      env=dict(os.environ, PYTHONPATH=site), stdout=log, stderr=subprocess.STDOUT)
try:
    deadline = time.time() + 600
    tport = None
    while time.time() < deadline and tr.poll() is None:
        log.seek(0)
        txt = log.read()
        m = re.search(r"tpgen: serving \S+ on http://127\.0\.0\.1:(\d+)", txt)
        if m and "successfully loaded 'tpgen'" in txt:
            tport = int(m.group(1))
            break
        time.sleep(0.5)
    if tport is None:
        log.seek(0)
        sys.exit("bench_triton: Triton/tpgen did not come up:\n" + log.read()[-3000:])
    direct = {"max_tokens": a.tokens, "temperature": 0, "ignore_eos": True, "stream": True}
    sp = json.dumps({"temperature": 0, "ignore_eos": True})
    res = {"direct": [], "triton": []}
    for p in PROMPTS[:2]:  # warm-up
        stream(tport, "/v1/completions", dict(direct, prompt=p))
        stream(hp, "/v2/models/tpgen/generate_stream", {"text_input": p, "max_tokens": a.tokens, "stream": True,
                                                         "sampling_parameters": sp, "exclude_input_in_output": True})
    for run in range(a.runs):
        for p in PROMPTS:
            d = stream(tport, "/v1/completions", dict(direct, prompt=p))
            t = stream(hp, "/v2/models/tpgen/generate_stream", {"text_input": p, "max_tokens": a.tokens, "stream": True,
                                                                 "sampling_parameters": sp, "exclude_input_in_output": True})
            assert d[2] == t[2], "texts differ: %r vs %r" % (d[2], t[2])
            res["direct"].append(d)
            res["triton"].append(t)
    out = {"model": os.path.basename(os.path.abspath(a.model)), "np": a.np, "tokens": a.tokens,
           "requests": len(res["direct"]), "date": time.strftime("%Y-%m-%d")}
    for k, v in res.items():
        out["ttft_ms_" + k] = round(1e3 * statistics.median(x[0] for x in v), 2)
        out["itl_ms_" + k] = round(1e3 * statistics.median(x[1] for x in v), 3)
    out["ttft_added_ms"] = round(out["ttft_ms_triton"] - out["ttft_ms_direct"], 2)
    out["itl_added_ms"] = round(out["itl_ms_triton"] - out["itl_ms_direct"], 3)
    # paired: each Triton request against the direct one just before it
    out["itl_added_ms_paired_median"] = round(1e3 * statistics.median(t[1] - d[1] for d, t in zip(res["direct"], res["triton"])), 3)
    print(json.dumps(out), flush=True)
    if a.record:
        perf_record.record_rows(a.record, "triton", "cost", [
            ("straight to `tpgen serve`", [("TTFT (ms)", out["ttft_ms_direct"], "ms"),
                                           ("ITL (ms/token)", out["itl_ms_direct"], "ms")]),
            ("through Triton", [("TTFT (ms)", out["ttft_ms_triton"], "ms"), ("ITL (ms/token)", out["itl_ms_triton"], "ms")]),
            ("added by Triton", [("TTFT (ms)", out["ttft_added_ms"], "ms"),
                                 ("ITL (ms/token)", f"{out['itl_added_ms']:+.2f} (paired median "
                                  f"{out['itl_added_ms_paired_median']:+.2f})", "ms")])],
            perf_record.command_line(__file__), row_header="path", load=f"{load0:.1f}-{os.getloadavg()[0]:.1f}",
            notes=f"{out['model']}, TP {a.np}, {a.tokens} tokens, greedy; medians of {out['requests']} requests, "
                  f"the two paths alternating.")
finally:
    tr.send_signal(signal.SIGTERM)
    try:
        tr.wait(60)
    except subprocess.TimeoutExpired:
        tr.kill()
    shutil.rmtree(work, ignore_errors=True)
