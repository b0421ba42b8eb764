#!/usr/bin/env python3
"""tools/bench/perf_record.py and tools/bench/perf_tables.py (ctest perf_tables_unit): a recorded run renders as
its table with provenance; the latest run per CPU tier wins, one table per tier; --check fails on a
table edited by hand and passes after --write; bad records and bad markers are refused naming the
file and line; the parsers of `tpgen bench --json` and `bench-comm --json` output; every
tools/bench_*.py offers --record, and the ct2, speculation and baselines tools record their figures;
links to docs/PERFORMANCE.md's sections resolve. Stdlib only."""
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
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
    ci = os.path.join(d, "cpuinfo")
    open(ci, "w").write("processor\t: 0\ncpu family\t: 26\nmodel\t\t: 2\nmodel name\t: AMD EPYC\n"
                        "flags\t\t: fpu avx avx2 fma avx512f\n\nprocessor\t: 1\ncpu family\t: 26\nmodel\t\t: 2\n")
    info = perf_record.cpu_info(ci)
    check(info["model"] == "AMD EPYC" and info["family"] == 26 and info["model_number"] == 2
          and info["flags"] == ["avx", "avx2", "fma", "avx512f"], "cpu_info reads the family and model numbers: %s" % info)
    zen5 = dict(AVX2, model="AMD EPYC", family=26, model_number=2)
    perf_record.record(os.path.join(d, "fam.jsonl"), "fam", "t", cells(5.0, 9.0), "bench fam",
                       date="2026-03-01T00:00:00Z", commit="ddd", cpu=zen5, load="1.0")
    md0 = os.path.join(d, "F.md")
    open(md0, "w").write("<!-- perf_tables fam/t -->\n<!-- /perf_tables -->\n")
    rc, out, err = run(["--write", md0, "--results", d])
    check(rc == 0 and "AMD EPYC (family 26 model 2), 2 CPUs" in open(md0).read(),
          "the provenance names the family where it was recorded (%s)" % (err or open(md0).read()[:300]))
    os.remove(os.path.join(d, "fam.jsonl"))

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
    check(rc == 2 and "no *.jsonl under" in err, "an empty results folder is refused")

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
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "bench", "perf_record.py"), "--record", out,
                        "--from-bench-comm", src, "--command", "bench-comm --json"], capture_output=True, text=True)
    check(p.returncode == 0 and len(open(out).read().splitlines()) == 3, "perf_record.py --from-bench-comm appends")
    open(src, "w").write('{"op": "allreduce"}\n')
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "bench", "perf_record.py"), "--record", out,
                        "--from-bench-comm", src, "--command", "x"], capture_output=True, text=True)
    check(p.returncode != 0 and "is not the JSON this mode reads" in p.stderr, "wrong JSON refused clearly")
    check(perf_tables.num(2151.4) == "2151" and perf_tables.num(24.66) == "24.7" and perf_tables.num(1.234, "x")
          == "1.23x" and perf_tables.num(0.00351) == "0.00351" and perf_tables.num(16) == "16"
          and perf_tables.num(16.0) == "16.0", "number formatting")

# the bench tools' --record: each tool has it; those that can be driven without running a benchmark
# write the records their docs/PERFORMANCE.md tables are rendered from
import glob  # noqa: E402
import types  # noqa: E402
for tool in sorted(glob.glob(os.path.join(ROOT, "tools", "bench", "bench_*.py"))):
    if tool.endswith("bench_hf.py"):  # the HF half of bench_vs_hf.py (one JSON line to it), which records
        continue
    p = subprocess.run([sys.executable, tool, "--help"], capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and "--record" in p.stdout, f"{os.path.basename(tool)} --help offers --record")
import bench_vs_ct2  # noqa: E402
import bench_speculate  # noqa: E402
with tempfile.TemporaryDirectory() as d:
    f = os.path.join(d, "r.jsonl")
    names = bench_vs_ct2.TYPES
    table = [{"row": names["f32"][2], "type": "f32", "engine": "ct2", "values": [105.0, 3039.0]},
             {"row": names["f32"][3], "type": "f32", "engine": "tpgen", "values": [97.3, 3118.0]},
             {"row": names["bf16"][2], "type": "bf16", "engine": "ct2", "values": ["refused", "refused"]},
             {"row": names["bf16"][3], "type": "bf16", "engine": "tpgen", "values": [44.1, 2509.0]}]
    a = types.SimpleNamespace(record=f, prefill=512, runs=5, check_prompts=4, new_tokens=64)
    bench_vs_ct2.record(a, table, ["batch 1", "prefill 512 tokens"], {"ctranslate2": "4.8.5"}, 96, True,
                        [(1.0, 1, 1), (2.0, 1, 1)], 0, "Test CPU", ["avx2", "fma"],
                        kline=bench_vs_ct2.kernels_line({"f32": {"batch 1": {"matmul": "mm", "logits": "lg",
                                                                             "attention": "at"},
                                                                 "prefill 512 tokens": [None, {"matmul": "gm"}]}}))
    got = {(r["row"], r["metric"]): r for r in map(json.loads, open(f))}
    check(all(r["notes"].endswith(" tpgen kernels (matmul / logits / attention): f32: batch 1 `mm` / `lg` / `at`; "
                                  "prefill 512 tokens not reported or `gm` / `?` / `?` (varied across runs).")
              for r in got.values()), "bench_vs_ct2 --record: the kernels line in the notes")
    t = got[(names["f32"][3], "batch 1")]
    check(t["value"] == 97.3 and t["ratio"] == 1.08 and t["reference"]["row"] == names["f32"][2]
          and t["tier"] == "avx2" and t["section"] == "cpu-ct2", "bench_vs_ct2 --record: tpgen against CTranslate2")
    b = got[(names["bf16"][3], "batch 1")]
    check(b["reference"]["row"] == names["f32"][3] and b["ratio"] == round(97.3 / 44.1, 2),
          "bench_vs_ct2 --record: bf16 against tpgen f32")
    check(got[(names["bf16"][2], "batch 1")]["text"] == "refused", "bench_vs_ct2 --record: refused kept as text")
    rows = bench_speculate.record_rows({"batches": {1: {
        "none": {"steps": 5120, "tokens_per_step": 1.0, "forwarded_tokens": 9468, "accepted": 0, "drafted": 0,
                 "seconds": 62.96, "speedup": 1.0, "cpu_speedup": 1.0},
        "ngram:4": {"steps": 2026, "tokens_per_step": 2.53, "forwarded_tokens": 12032, "accepted": 3094,
                    "drafted": 5658, "seconds": 37.83, "speedup": 1.57, "cpu_speedup": 1.6}}}})
    check([r for r, _ in rows] == ["1, none", "1, ngram:4"] and ("accepted / drafted", "3094 / 5658 (55%)", "")
          in rows[1][1], "bench_speculate --record rows")

import bench_baselines  # noqa: E402
with tempfile.TemporaryDirectory() as d:
    f = os.path.join(d, "r.jsonl")
    sysm = lambda ttft, tpot, tps: {"ttft_ms": {"p50": ttft}, "tpot_ms": {"p50": tpot}, "output_token_throughput": tps}
    res = {"date_utc": "2026-12-01T11:58:00Z", "num_prompts": 8, "checks": {"b_ids_equal_a": 8},
           "systems": {"b": sysm(1743.0, 216.6, 3.81), "d": sysm(1144.0, 88.4, 8.23)},
           "context_sweep": [{"context": 64, "kv_mb": 11.2, "b": {"gap_ms": 129.0, "forward_ms": 110.0,
                                                                  "overhead_step_ms": 19.0}, "d": {"gap_ms": 77.0}}]}
    a = types.SimpleNamespace(record=f, max_tokens=32, threads=1, context_tokens=8)
    bench_baselines.record(a, res, ["b", "d"], ["b", "d"], [(2.4, 0, 0), (3.0, 0, 0)])
    got = {(r["table"], r["row"], r["metric"]): r["value"] for r in map(json.loads, open(f))}
    check(got[("systems", bench_baselines.NAMES["b"], "TPOT / (d)")] == 2.45
          and got[("context", "64", "(b) ms/token")] == 129.0 and got[("context", "64", "KV per step (MB)")] == 11,
          "bench_baselines --record: both tables")

# links into docs/PERFORMANCE.md's sections (its own and other docs') name a heading it has (GitHub's slugs)
import re  # noqa: E402
perf = open(os.path.join(ROOT, "docs", "PERFORMANCE.md"), encoding="utf-8").read()
slug = lambda h: re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
anchors = {slug(m) for m in re.findall(r"^#+ (.*)$", perf, re.M)}
links = [("docs/PERFORMANCE.md", x) for x in re.findall(r"\]\(#([^)]+)\)", perf)]
for doc in glob.glob(os.path.join(ROOT, "docs", "*.md")) + [os.path.join(ROOT, "README.md")]:
    links += [(os.path.relpath(doc, ROOT), x) for x in re.findall(r"PERFORMANCE\.md#([\w-]+)", open(doc).read())]
bad = [f"{d}: #{x}" for d, x in links if x not in anchors]
check(len(links) >= 10 and not bad, f"{len(links)} links to PERFORMANCE.md sections resolve; broken: {bad}")

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
