#!/usr/bin/env python3
"""Render docs/PERFORMANCE.md's tables from the benchmark records in docs/bench/*.jsonl.

    python3 tools/bench/perf_tables.py --check docs/PERFORMANCE.md     # exit 1 if a table differs (ctest)
    python3 tools/bench/perf_tables.py --write docs/PERFORMANCE.md     # regenerate them in place
    python3 tools/bench/perf_tables.py --history SECTION[/TABLE]       # every recorded run, newest first
    python3 tools/bench/perf_tables.py --list                          # the sections, tables, runs and tiers

A table's place in the Markdown is a pair of comments; everything between them is generated:

    <!-- perf_tables SECTION/TABLE -->
    ...
    <!-- /perf_tables -->

`rows="REGEX"` after SECTION/TABLE keeps only the rows whose label matches REGEX (re.search); the
line under the table then says how many of the run's rows it shows.

For each CPU tier with a run of SECTION/TABLE (tools/bench/perf_record.py TIERS), the latest run (by date)
becomes a table: its rows and columns in the order the run recorded them, and a line under it with
the run's date, commit, CPU, flags, load and notes, then its command(s). Older runs stay in the data
(--history shows them). Records are written by the bench tools' --record (tools/bench/perf_record.py, which
lists the fields). Stdlib only.
"""
import argparse
import difflib
import glob
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROG = "perf_tables.py"
REQUIRED = {"section": str, "table": str, "run": str, "row": str, "metric": str, "unit": str, "command": str,
            "commit": str, "date": str, "cpu": dict, "tier": str}
TIER_ORDER = ["amx", "avx512-bf16", "avx512-vnni", "avx512", "avx2", "baseline"]
BEGIN = re.compile(r'^<!-- perf_tables ([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)(?: rows="([^"]+)")? -->$')
END = "<!-- /perf_tables -->"


class DataError(Exception):
    pass


def load(results_dir):
    """Every record of results_dir/*.jsonl, in file order, each with its source 'file:line'."""
    files = sorted(glob.glob(os.path.join(results_dir, "*.jsonl")))
    if not files:
        raise DataError(f"no *.jsonl under {results_dir}")
    recs = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                where = f"{os.path.relpath(path, ROOT)}:{n}"
                if not line.strip():
                    continue
                try:
                    r = json.loads(line)
                except json.JSONDecodeError as e:
                    raise DataError(f"{where}: not JSON ({e})")
                if not isinstance(r, dict):
                    raise DataError(f"{where}: a record must be a JSON object, got {type(r).__name__}")
                for k, t in REQUIRED.items():
                    if not isinstance(r.get(k), t):
                        raise DataError(f"{where}: field {k!r} must be a {t.__name__}, got {r.get(k)!r}")
                v = r.get("value")
                if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                    raise DataError(f"{where}: field 'value' must be a number or null, got {v!r}")
                if v is None and not isinstance(r.get("text"), str):
                    raise DataError(f"{where}: a null 'value' needs a 'text' to print")
                if r["tier"] not in TIER_ORDER:
                    raise DataError(f"{where}: tier {r['tier']!r} is not one of {', '.join(TIER_ORDER)}")
                r["_where"] = where
                recs.append(r)
    return recs


def num(v, unit=""):
    """A figure as the tables print it: 3 significant digits up to 100, whole numbers above."""
    a = abs(v)
    if isinstance(v, int):  # counts
        return str(v) + ("x" if unit == "x" else "%" if unit == "%" else "")
    s = f"{v:.0f}" if a >= 100 else f"{v:.1f}" if a >= 10 else f"{v:.2f}" if a >= 1 or a == 0 else f"{v:.3g}"
    return s + ("x" if unit == "x" else "%" if unit == "%" else "")


def cell(r):
    if "text" in r:
        return r["text"]
    s = num(r["value"], r["unit"])
    if isinstance(r.get("ratio"), (int, float)):
        s += f" ({r['ratio']:.2f}x)"
    return s


def runs_of(recs, key):
    """{run id: [records]} of SECTION/TABLE key, each run's records in file order."""
    out = {}
    for r in recs:
        if f"{r['section']}/{r['table']}" == key:
            out.setdefault(r["run"], []).append(r)
    return out


def check_run(run, rs):
    """One run: one tier (a run of several commands, joined by perf_record's run_name, may span
    dates and commits); each cell once."""
    first = rs[0]
    for r in rs:
        for k in ("tier",):
            if r[k] != first[k]:
                raise DataError(f"{r['_where']}: run {run!r} has {k} {r[k]!r} here and {first[k]!r} at "
                                f"{first['_where']}")
    seen = {}
    for r in rs:
        cellkey = (r["row"], r["metric"])
        if cellkey in seen:
            raise DataError(f"{r['_where']}: run {run!r} records row {r['row']!r}, metric {r['metric']!r} "
                            f"twice (first at {seen[cellkey]})")
        seen[cellkey] = r["_where"]


def render_run(rs, rows_re=None):
    """One run as a Markdown table and its provenance line (with its commands); rows_re keeps the rows
    whose label it matches."""
    rows, metrics = [], []
    all_rows, first_run = list(dict.fromkeys(r["row"] for r in rs)), rs[0]["run"]
    if rows_re:
        rs = [r for r in rs if re.search(rows_re, r["row"])]
        if not rs:
            raise DataError(f"rows={rows_re!r} matches none of the rows of run {first_run}: {', '.join(all_rows)}")
    for r in rs:
        if r["row"] not in rows:
            rows.append(r["row"])
        if r["metric"] not in metrics:
            metrics.append(r["metric"])
    cells = {(r["row"], r["metric"]): r for r in rs}
    first = rs[0]
    numeric = {m: any(r["metric"] == m and r.get("value") is not None for r in rs) for m in metrics}
    out = ["| " + " | ".join([first.get("row_header", "")] + metrics) + " |",
           "| --- |" + "".join(" ---: |" if numeric[m] else " --- |" for m in metrics)]
    for row in rows:
        out.append("| " + " | ".join([row] + [cell(cells[(row, m)]) if (row, m) in cells else "" for m in metrics])
                   + " |")
    cpu = first["cpu"]
    flags = " ".join(cpu.get("flags", [])) or "none of the vector flags"
    commits = ", ".join(dict.fromkeys(r["commit"] for r in rs))
    fam = f" (family {cpu['family']} model {cpu.get('model_number')})" if "family" in cpu else ""
    prov = (f"Run {run_date(rs).replace('T', ' ')}, tpgen {commits}; {cpu.get('model', 'unknown CPU')}{fam}, "
            f"{cpu.get('cpus', '?')} CPUs, flags `{flags}` (tier {first['tier']})")
    if first.get("load"):
        prov += f"; load average {first['load']}"
    prov += "."
    if len(rows) < len(all_rows):
        prov += (f" Rows shown: {len(rows)} of {len(all_rows)} (`python3 tools/bench/perf_tables.py --history "
                 f"{first['section']}/{first['table']}` has them all).")
    if first.get("notes"):
        prov += " " + first["notes"]
    cmds = []
    for r in rs:
        if r["command"] and r["command"] not in cmds:
            cmds.append(r["command"])
    if cmds:
        prov += " Command: " + "; ".join(f"`{c}`" for c in cmds) + "."
    out += ["", prov]
    return out


def run_date(rs):
    """A run's date: its latest record's (a run of several commands ends with its last)."""
    return max(r["date"] for r in rs)


def latest_per_tier(recs, key):
    runs = runs_of(recs, key)
    if not runs:
        raise DataError(f"no records of {key} in docs/bench/")
    for run, rs in runs.items():
        check_run(run, rs)
    best = {}
    for run, rs in runs.items():
        t = rs[0]["tier"]
        if t not in best or (run_date(rs), run) > (run_date(best[t]), best[t][0]["run"]):
            best[t] = rs
    return [best[t] for t in TIER_ORDER if t in best]


def render(recs, key, rows_re=None):
    out = []
    for i, rs in enumerate(latest_per_tier(recs, key)):
        if i:
            out.append("")
        out += render_run(rs, rows_re)
    return out


def regenerate(text, recs, where):
    """text with every perf_tables block rendered afresh; errors name where's line."""
    lines, out, i = text.split("\n"), [], 0
    found = 0
    while i < len(lines):
        out.append(lines[i])
        m = BEGIN.match(lines[i].strip())
        if not m:
            if lines[i].strip().startswith("<!-- perf_tables") or lines[i].strip() == END:
                raise DataError(f"{where}:{i + 1}: a stray or malformed perf_tables comment: {lines[i]!r}")
            i += 1
            continue
        j = next((k for k in range(i + 1, len(lines)) if lines[k].strip() == END), None)
        if j is None:
            raise DataError(f"{where}:{i + 1}: {m.group(1)} has no closing {END}")
        try:
            out += render(recs, m.group(1), m.group(2))
        except DataError as e:
            raise DataError(f"{where}:{i + 1}: {e}")
        out.append(END)
        found += 1
        i = j + 1
    if not found:
        raise DataError(f"{where}: no <!-- perf_tables SECTION/TABLE --> blocks")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--check", metavar="MD")
    g.add_argument("--write", metavar="MD")
    g.add_argument("--history", metavar="SECTION[/TABLE]")
    g.add_argument("--list", action="store_true")
    ap.add_argument("--results", default=os.path.join(ROOT, "docs", "bench"), help="folder of *.jsonl (default docs/bench/)")
    a = ap.parse_args(argv)
    try:
        recs = load(a.results)
        if a.list:
            keys = {}
            for r in recs:
                keys.setdefault(f"{r['section']}/{r['table']}", {}).setdefault(r["run"], r["tier"])
            for k, runs in keys.items():
                tiers = sorted(set(runs.values()), key=TIER_ORDER.index)
                print(f"{k}: {len(runs)} run(s), tier(s) {', '.join(tiers)}")
            return 0
        if a.history:
            keys = sorted({f"{r['section']}/{r['table']}" for r in recs
                           if f"{r['section']}/{r['table']}" == a.history or r["section"] == a.history})
            if not keys:
                raise DataError(f"no records of {a.history}")
            for k in keys:
                runs = runs_of(recs, k)
                for run in sorted(runs, key=lambda x: (run_date(runs[x]), x), reverse=True):
                    check_run(run, runs[run])
                    print(f"### {run}\n")
                    print("\n".join(render_run(runs[run])) + "\n")
            return 0
        path = a.check or a.write
        with open(path, encoding="utf-8") as f:
            text = f.read()
        new = regenerate(text, recs, os.path.relpath(path))
    except (DataError, OSError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    if a.write:
        if new != text:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
            print(f"{PROG}: rewrote the tables of {path}", file=sys.stderr)
        return 0
    if new != text:
        diff = difflib.unified_diff(text.split("\n"), new.split("\n"), f"{path} (as committed)",
                                    f"{path} (rendered from docs/bench/)", lineterm="", n=1)
        sys.stdout.write("\n".join(diff) + "\n")
        print(f"{PROG}: {path}'s tables differ from what docs/bench/ renders: run "
              f"`python3 tools/bench/perf_tables.py --write {path}` (after recording the new run)", file=sys.stderr)
        return 1
    print(f"{PROG}: {path}: every table equals its rendering from docs/bench/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
