#!/usr/bin/env python3
"""tools/perf_record.py and tools/perf_tables.py (ctest perf_tables_unit): a recorded run renders as
its table with provenance; the latest run per CPU tier wins, one table per tier; --check fails on a
table edited by hand and passes after --write; bad records and bad markers are refused naming the
file and line; the parsers of `tpgen bench --json` and `bench-comm --json` output. Stdlib only."""
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import perf_record  # noqa: E402
import perf_tables  # noqa: E402

AVX2 = {"model": "Test CPU", "cpus": 2, "flags": ["avx", "avx2", "fma"]}
AMX = {"model": "Test Xeon", "cpus": 8, "flags": ["avx2", "fma", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16",
                                                  "amx_int8"]}
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = perf_tables.main(argv)
    return rc, out.getvalue(), err.getvalue()


def cells(b1, b8):
    return [{"row": "CT2 int8", "metric": "batch 1", "value": 60.0, "unit": "ms"},
            {"row": "CT2 int8", "metric": "batch 8", "value": 100.0, "unit": "ms"},
            {"row": "tpgen int8", "metric": "batch 1", "value": b1, "unit": "ms", "ratio": round(60.0 / b1, 2),
             "reference": {"row": "CT2 int8", "value": 60.0}},
            {"row": "tpgen int8", "metric": "batch 8", "value": b8, "unit": "ms"},
            {"row": "CT2 bf16", "metric": "batch 1", "value": None, "unit": "ms", "text": "refused"}]


with tempfile.TemporaryDirectory() as d:
    res = os.path.join(d, "results")
    f = os.path.join(res, "ct2.jsonl")
    perf_record.record(f, "ct2", "t", cells(30.0, 80.0), "bench old", date="2026-01-01T00:00:00Z", commit="aaa",
                       cpu=AVX2, load="1.0")
    perf_record.record(f, "ct2", "t", cells(24.0, 81.4), "bench new", date="2026-02-01T00:00:00Z", commit="bbb",
                       cpu=AVX2, load="2.0", notes="Medians of 5.")
    perf_record.record(f, "ct2", "t", cells(10.0, 20.0), "bench amx", date="2026-01-15T00:00:00Z", commit="ccc",
                       cpu=AMX, load="0.5")
    lines = open(f).read().splitlines()
    check(len(lines) == 15 and all(json.loads(x)["section"] == "ct2" for x in lines), "one JSON line per cell")
    rec = json.loads(lines[0])
    check(all(k in rec for k in perf_record.FIELDS) and rec["tier"] == "avx2" and rec["cpu"] == AVX2,
          "each line carries its run's provenance (fields, tier avx2)")
    check(json.loads(lines[-1])["tier"] == "amx", "AMX flags give tier amx")
    check(perf_record.tier_of(["avx2", "fma", "avx512f"]) == "avx512" and perf_record.tier_of([]) == "baseline",
          "tiers avx512 and baseline")

    md = os.path.join(d, "P.md")
    open(md, "w").write("# P\n\n<!-- perf_tables ct2/t -->\nstale\n<!-- /perf_tables -->\n\ntext after\n")
    rc, out, err = run(["--check", md, "--results", res])
    check(rc == 1 and "stale" in out, "--check fails on a table that differs, with a diff")
    rc, out, err = run(["--write", md, "--results", res])
    text = open(md).read()
    check(rc == 0 and text.endswith("text after\n"), "--write regenerates only the block")
    check("| tpgen int8 | 24.0 (2.50x) | 81.4 |" in text, "the latest avx2 run, with its ratio")
    check("| CT2 bf16 | refused |" in text, "a null value prints its text")
    check("| tpgen int8 | 10.0 (6.00x) | 20.0 |" in text, "the amx tier gets its own table")
    check(text.index("tier amx") < text.index("tier avx2"), "tiers in order, most capable first")
    check("30.0" not in text and "Run 2026-02-01 00:00:00Z, tpgen bbb" in text and "Medians of 5." in text
          and "`bench new`" in text, "older runs stay out; date, commit, notes and command under the table")
    check(run(["--check", md, "--results", res])[0] == 0, "--check passes after --write")
    rc, out, err = run(["--history", "ct2", "--results", res])
    check(rc == 0 and out.count("### ct2/t@") == 3 and "30.0" in out, "--history prints every run")

    open(md, "w").write('<!-- perf_tables ct2/t rows="^tpgen" -->\n<!-- /perf_tables -->\n')
    rc, out, err = run(["--write", md, "--results", res])
    text = open(md).read()
    check(rc == 0 and "CT2 int8 |" not in text and "Rows shown: 1 of 3" in text, "rows= keeps matching rows, says so")

    for body, want in (('<!-- perf_tables ct2/t -->\n', "no closing"),
                       ('<!-- perf_tables nosuch/t -->\n<!-- /perf_tables -->\n', "no records of nosuch/t"),
                       ('<!-- perf_tables ct2/t rows="^zzz" -->\n<!-- /perf_tables -->\n', "matches none"),
                       ('<!-- perf_tables ct2 -->\n', "stray or malformed"), ("no blocks\n", "no <!-- perf_tables")):
        open(md, "w").write(body)
        rc, out, err = run(["--check", md, "--results", res])
        check(rc == 2 and want in err, f"marker error: {want}")

    bad = os.path.join(d, "bad")
    os.makedirs(bad)
    good = json.loads(lines[0])
    for mutate, want in ((lambda r: "{not json", "bad/x.jsonl:2: not JSON"),
                         (lambda r: json.dumps({k: v for k, v in r.items() if k != "commit"}), "field 'commit'"),
                         (lambda r: json.dumps(dict(r, value="12")), "field 'value' must be a number"),
                         (lambda r: json.dumps(dict(r, value=None)), "needs a 'text'"),
                         (lambda r: json.dumps(dict(r, tier="sse")), "tier 'sse'")):
        open(os.path.join(bad, "x.jsonl"), "w").write(json.dumps(good) + "\n" + mutate(good) + "\n")
        rc, out, err = run(["--list", "--results", bad])
        check(rc == 2 and want in err, f"bad record refused: {want}")
    open(os.path.join(bad, "x.jsonl"), "w").write(json.dumps(good) + "\n" + json.dumps(good) + "\n")
    open(md, "w").write("<!-- perf_tables ct2/t -->\n<!-- /perf_tables -->\n")
    rc, out, err = run(["--check", md, "--results", bad])
    check(rc == 2 and "twice" in err, "a cell recorded twice in one run is refused")
    rc, out, err = run(["--list", "--results", os.path.join(d, "empty")])
    check(rc == 2 and "no results/*.jsonl" in err, "an empty results folder is refused")

    # the parsers, on output lines of tpgen bench --json and bench-comm --json
    bench = [{"batch": 1, "context": 16, "tp": 1, "dtype": "F32", "weights": "INT8", "ms_per_step": 1.31,
              "tokens_per_s": 762.1, "gb_per_s": 22.4, "pct_read": 80.2, "kind": "decode"},
             {"prefill_tokens": 32, "tp": 1, "dtype": "F32", "weights": "F32", "ms": 2.06, "tokens_per_s": 15500.4,
              "pct_gemm": 37.8, "pct_attention": 3.6, "kind": "prefill"}]
    cs = perf_record.tpgen_bench_cells(bench)
    check([c["row"] for c in cs][::4] == ["decode, batch 1, context 16, INT8, TP 1", "prefill, 32 tokens, F32, TP 1"]
          and len(cs) == 8 and cs[0]["value"] == 1.31, "tpgen bench --json rows become cells")
    comm = [{"op": "allreduce", "size_bytes": 8, "dtype": "f32", "tp": 2, "comm": "mpi", "time_us": 2.3,
             "busbw_gb_per_s": 0.0035, "wrong": 0}]
    cs = perf_record.bench_comm_cells(comm)
    check(len(cs) == 3 and cs[1]["value"] == 0.0035, "bench-comm --json rows become cells")
    src = os.path.join(d, "comm.json")
    open(src, "w").write("\n".join(json.dumps(x) for x in comm) + "\n")
    out = os.path.join(d, "r", "a.jsonl")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "perf_record.py"), "--record", out,
                        "--from-bench-comm", src, "--command", "bench-comm --json"], capture_output=True, text=True)
    check(p.returncode == 0 and len(open(out).read().splitlines()) == 3, "perf_record.py --from-bench-comm appends")
    open(src, "w").write('{"op": "allreduce"}\n')
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "perf_record.py"), "--record", out,
                        "--from-bench-comm", src, "--command", "x"], capture_output=True, text=True)
    check(p.returncode != 0 and "is not the JSON this mode reads" in p.stderr, "wrong JSON refused clearly")
    check(perf_tables.num(2151.4) == "2151" and perf_tables.num(24.66) == "24.7" and perf_tables.num(1.234, "x")
          == "1.23x" and perf_tables.num(0.00351) == "0.00351" and perf_tables.num(16) == "16"
          and perf_tables.num(16.0) == "16.0", "number formatting")

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
