#!/usr/bin/env python3
"""Append benchmark runs to docs/bench/*.jsonl, the data docs/PERFORMANCE.md's tables are made from.

Library (the bench tools' --record FILE.jsonl): `record(path, section, table, cells, command=...)`
appends one JSON object per table cell, each carrying its run's provenance (date, commit, CPU model,
flags and tier, load, command, notes), so that any line alone says what was measured where.

Command line, for `tpgen bench --json` and `tpgen bench-comm --json`, which have no Python wrapper:

    mpirun -np 1 build/bin/tpgen bench ... --json > bench.json
    python3 tools/bench/perf_record.py --record docs/bench/cpu-floor.jsonl --from-tpgen-bench bench.json \
        --command "mpirun -np 1 build/bin/tpgen bench ... --json"
    python3 tools/bench/perf_record.py --record docs/bench/allreduce.jsonl --from-bench-comm comm.json --command "..."

A record (one line; tools/bench/perf_tables.py checks these fields and renders the tables):
  section, table   which question and which of its tables (docs/PERFORMANCE.md names them)
  run              one id per run: every cell of one run shares it ("SECTION/TABLE@DATE", or
                   "SECTION/TABLE@NAME" for a run of several commands given one run_name)
  row, metric      the table's row label and column label; row_header names the row column
  value, unit      the figure (a number, or null with text); text overrides how the cell prints
  ratio, reference optional: the figure against another measured in the same run
                   (reference: {"row": ..., "value": ...}), printed as "value (ratio x)"
  runs             optional: every run's value behind a median
  command, commit, date (UTC, ISO 8601), cpu {model, cpus, flags}, tier, load, notes
Stdlib only: the bench tools run with the system python3 too.
"""
import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROG = "perf_record.py"
# the /proc/cpuinfo flags that pick tpgen's CPU kernels (docs/KERNELS.md)
CPU_FLAGS = ["avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
             "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"]
# the tiers the tables are split by, most capable first: (tier, flags that must all be present)
TIERS = [("amx", ["amx_tile", "amx_bf16", "amx_int8"]), ("avx512-bf16", ["avx512f", "avx512_bf16"]),
         ("avx512-vnni", ["avx512f", "avx512_vnni"]), ("avx512", ["avx512f"]), ("avx2", ["avx2", "fma"]),
         ("baseline", [])]
FIELDS = ("section", "table", "run", "row", "metric", "value", "unit", "command", "commit", "date", "cpu", "tier")


def cpu_info(path="/proc/cpuinfo"):
    """(model name, family and model numbers, the CPU_FLAGS present, CPUs online) of this machine. A VM may
    name its CPU only "AMD EPYC": the family says which generation (AMD 25: Zen 3/4, 26: Zen 5; Intel 6)."""
    name, flags, fam = "unknown", set(), {}
    try:
        with open(path) as f:
            for line in f:
                k, _, v = line.partition(":")
                k = k.strip()
                if k == "model name" and name == "unknown":
                    name = v.strip()
                elif k == "flags" and not flags:
                    flags = set(v.split())
                elif k in ("cpu family", "model") and k not in fam and v.strip().isdigit():
                    fam[k] = int(v)
    except OSError as e:
        print(f"{PROG}: note: cannot read {path}: {e}", file=sys.stderr)
    info = {"model": name, "cpus": os.cpu_count(), "flags": [f for f in CPU_FLAGS if f in flags]}
    if "cpu family" in fam:
        info["family"], info["model_number"] = fam["cpu family"], fam.get("model")
    return info


def tier_of(flags):
    """The CPU tier a list of /proc/cpuinfo flags belongs to (TIERS)."""
    have = set(flags)
    return next(t for t, need in TIERS if all(f in have for f in need))


def git_commit():
    """tpgen's commit, short, "+dirty" when the tree has changes (not counting docs/bench/, where
    the records go: a run of several commands writes there between them); "unknown" outside git."""
    try:
        c = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True,
                           check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":(exclude)docs/bench"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return c + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def record(path, section, table, cells, command, notes=None, date=None, commit=None, cpu=None, load=None,
           row_header="", run_name=None):
    """Append one line per cell to PATH (made, with its folder, if missing). A cell is a dict with row,
    metric, value, unit and optionally text, ratio, reference, runs. run_name joins the cells of
    several commands (e.g. one per model or TP degree) into one run, one table. Returns the lines."""
    if not cells:
        raise ValueError(f"{PROG}: no cells to record for {section}/{table}")
    cpu = cpu or cpu_info()
    date = date or now_utc()
    if load is None:
        load = f"{os.getloadavg()[0]:.1f}"
    base = {"section": section, "table": table, "run": f"{section}/{table}@{run_name or date}",
            "row_header": row_header,
            "command": command, "commit": commit or git_commit(), "date": date, "cpu": cpu,
            "tier": tier_of(cpu["flags"]), "load": load}
    if notes:
        base["notes"] = notes
    lines = []
    for c in cells:
        for k in ("row", "metric", "value", "unit"):
            if k not in c:
                raise ValueError(f"{PROG}: cell {c!r} of {section}/{table} has no {k!r}")
        rec = dict(base)
        rec.update(c)
        lines.append(json.dumps(rec, ensure_ascii=False, sort_keys=False))
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    with open(path, "a") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{PROG}: appended {len(lines)} records of {section}/{table} to {path}", file=sys.stderr)
    return lines


def add_argument(ap, what):
    """--record FILE.jsonl on a bench tool's parser; what: the SECTION/TABLE it records."""
    ap.add_argument("--record", metavar="FILE.jsonl", default=None,
                    help=f"append this run to docs/bench/ as {what} (tools/bench/perf_record.py; docs/PERFORMANCE.md)")


def parse_args(ap, prog):
    """ap.parse_args(), its --record (add_argument) checked: a .jsonl file, or prog exits naming it"""
    a = ap.parse_args()
    if a.record and not a.record.endswith(".jsonl"):
        sys.exit(f"{prog}: --record {a.record}: give a .jsonl file")
    return a


def command_line(script):
    """How a reader reruns this tool: python3 tools/NAME.py ARGS."""
    return f"python3 tools/{os.path.basename(script)} " + shlex.join(sys.argv[1:])


def record_rows(path, section, table, rows, command, row_header="", **kw):
    """record() from [(row label, [(metric, value, unit), ...]), ...]; a value that is not a number
    (None, "refused", "3094 / 5658") is kept as the cell's text."""
    if not path.endswith(".jsonl"):
        raise ValueError(f"{PROG}: --record {path}: give a .jsonl file (JSON lines, appended)")
    cells = []
    for row, vals in rows:
        for metric, v, unit in vals:
            num = isinstance(v, (int, float)) and not isinstance(v, bool)
            c = {"row": row, "metric": metric, "value": v if num else None, "unit": unit}
            if not num:
                c["text"] = "n/a" if v is None else str(v)
            cells.append(c)
    return record(path, section, table, cells, command, row_header=row_header, **kw)


def read_json_lines(f):
    """The objects of a JSON-lines stream (tpgen bench and bench-comm print one per row)."""
    return [json.loads(line) for line in f if line.strip()]


def tpgen_bench_cells(rows):
    """Cells of `tpgen bench --json` (one object per row): per decode batch, ms/step, tokens/s, GB/s read
    and its share of the read line measured in the same run; per prefill length, ms, tokens/s, share of
    the GEMM rate and attention's share."""
    cells = []
    for r in rows:
        if r.get("kind") == "decode":
            row, keys = f"decode, batch {r['batch']}, context {r['context']}", (
                ("ms_per_step", "ms/step", "ms"), ("tokens_per_s", "tokens/s", "tokens/s"),
                ("gb_per_s", "GB/s read", "GB/s"), ("pct_read", "% of read line", "%"))
        elif r.get("kind") == "prefill":
            row, keys = f"prefill, {r['prefill_tokens']} tokens", (
                ("ms", "ms/step", "ms"), ("tokens_per_s", "tokens/s", "tokens/s"),
                ("pct_gemm", "% of GEMM rate", "%"), ("pct_attention", "% attention", "%"))
        else:
            continue
        row += f", {r['weights'] if r.get('weights') not in (None, r.get('dtype')) else r['dtype']}, TP {r['tp']}"
        cells += [{"row": row, "metric": m, "value": r[k], "unit": u} for k, m, u in keys if k in r]
    return cells


def bench_comm_cells(rows):
    """Cells of `tpgen bench-comm --json` (one object per size): time, busbw and #wrong."""
    cells = []
    for r in rows:
        row = f"{r['op']} {r['dtype']} {r['size_bytes']} B, TP {r['tp']}, {r['comm']}"
        cells += [{"row": row, "metric": "time (us)", "value": r["time_us"], "unit": "us"},
                  {"row": row, "metric": "busbw (GB/s)", "value": r["busbw_gb_per_s"], "unit": "GB/s"},
                  {"row": row, "metric": "#wrong", "value": r["wrong"], "unit": ""}]
    return cells


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--record", required=True, help="docs/bench/FILE.jsonl to append to")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--from-tpgen-bench", metavar="JSON", help="a `tpgen bench --json` output ('-': stdin)")
    src.add_argument("--from-bench-comm", metavar="JSON", help="a `tpgen bench-comm --json` output ('-': stdin)")
    ap.add_argument("--command", required=True, help="the command that produced the JSON, as a reader reruns it")
    ap.add_argument("--section", help="default: cpu-floor (tpgen bench) or allreduce (bench-comm)")
    ap.add_argument("--table", default="latest")
    ap.add_argument("--notes")
    ap.add_argument("--run-name", help="join this command's rows to other commands' of the same run (one table)")
    a = ap.parse_args()
    path = a.from_tpgen_bench or a.from_bench_comm
    try:
        res = read_json_lines(sys.stdin if path == "-" else open(path))
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"{PROG}: error: cannot read {path} as JSON: {e}")
    try:
        if a.from_tpgen_bench:
            cells, section = tpgen_bench_cells(res), a.section or "cpu-floor"
        else:
            cells, section = bench_comm_cells(res), a.section or "allreduce"
    except (KeyError, TypeError) as e:
        sys.exit(f"{PROG}: error: {path} is not the JSON this mode reads (missing {e})")
    if not cells:
        sys.exit(f"{PROG}: error: {path} holds no rows to record")
    record(a.record, section, a.table, cells, a.command, notes=a.notes, row_header="row", run_name=a.run_name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
