#!/usr/bin/env python3
"""Tokenizer throughput: `tpgen tokenize` against HF's fast tokenizer (Rust `tokenizers`) on the
same few MB of real code, in the same run, single thread, median of several runs.

    python3 tools/bench/bench_tokenizer.py --tpgen build/bin/tpgen [--model tests/data/tokenizer/codegen]
                                     [--mb 4] [--runs 7] [--record docs/bench/cpu.jsonl]

The text is real source installed on this machine (Python standard library, C headers,
JavaScript), concatenated in a fixed order. Each tpgen run is a fresh process (`--time` reports
its load and encode times; the encode starts with an empty word cache); each HF run encodes with
a freshly built Tokenizer (so its word cache is cold too). The ids of both must be equal: the
benchmark is also a parity check on the whole text. Prints a Markdown table; --record appends
it to docs/bench/ as tokenizer/encode (tools/bench/perf_record.py), from which docs/PERFORMANCE.md's table
is rendered (tools/bench/perf_tables.py).
"""
import argparse
import glob
import os
import platform
import re
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")   # HF: one thread (encode of one text is serial anyway)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perf_record  # noqa: E402  (--record)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def corpus(mb):
    stdlib = sysconfig.get_paths()["stdlib"]
    site = sysconfig.get_paths()["purelib"]
    groups = [  # (share, files)
        (0.6, sorted(glob.glob(os.path.join(stdlib, "**", "*.py"), recursive=True))),
        (0.25, sorted(glob.glob("/usr/include/**/*.h", recursive=True))),
        (0.15, sorted(p for p in glob.glob(os.path.join(site, "**", "*.js"), recursive=True) +
                      glob.glob("/usr/share/javascript/**/*.js", recursive=True) if not p.endswith(".min.js"))),
    ]
    parts, sizes = [], {}
    for share, files in groups:
        budget, got = int(mb * 1e6 * share), 0
        for p in files:
            if got >= budget:
                break
            try:
                t = open(p, encoding="utf-8").read()
            except (OSError, UnicodeDecodeError):
                continue
            parts.append(t)
            got += len(t.encode("utf-8"))
        sizes[os.path.splitext(files[0])[1] if files else "?"] = got
    return "".join(parts), sizes


def hf_tokenizer(model):
    from tokenizers import Tokenizer
    if os.path.exists(os.path.join(model, "tokenizer.json")):
        return Tokenizer.from_file(os.path.join(model, "tokenizer.json"))
    import transformers
    return transformers.AutoTokenizer.from_pretrained(model).backend_tokenizer


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tpgen", required=True)
    ap.add_argument("--model", default=os.path.join(ROOT, "tests", "data", "tokenizer", "codegen"))
    ap.add_argument("--mb", type=float, default=4.0)
    ap.add_argument("--runs", type=int, default=7)
    perf_record.add_argument(ap, "tokenizer/encode")
    args = ap.parse_args()

    text, sizes = corpus(args.mb)
    data = text.encode("utf-8")
    mb = len(data) / 1e6
    with tempfile.NamedTemporaryFile(suffix=".txt", delete=False) as f:
        f.write(data)
        path = f.name
    print(f"text: {mb:.2f} MB of real code ({', '.join(f'{k}: {v / 1e6:.2f} MB' for k, v in sizes.items())})")

    # tpgen: a fresh process each run
    enc, load, wall, ids_tp = [], [], [], None
    out_path = path + ".ids"
    for _ in range(args.runs):
        with open(out_path, "wb") as out:
            t0 = time.perf_counter()
            p = subprocess.run([args.tpgen, "tokenize", "--model", args.model, "--file", path, "--time"],
                               stdout=out, stderr=subprocess.PIPE, text=True)
            wall.append(time.perf_counter() - t0)
        if p.returncode != 0:
            sys.exit(f"tpgen tokenize failed: {p.stderr}")
        m = re.search(r"load ([\d.]+) ms; encode (\d+) bytes -> (\d+) ids in ([\d.]+) ms", p.stderr)
        load.append(float(m.group(1)) / 1e3)
        enc.append(float(m.group(4)) / 1e3)
    ids_tp = open(out_path).read()
    os.unlink(out_path)
    # HF fast tokenizer: a fresh Tokenizer each run (cold word cache), encode timed alone
    hf_enc, hf_load, ids_hf = [], [], None
    for _ in range(args.runs):
        t0 = time.perf_counter()
        tok = hf_tokenizer(args.model)
        t1 = time.perf_counter()
        ids_hf = tok.encode(text, add_special_tokens=False).ids
        t2 = time.perf_counter()
        hf_load.append(t1 - t0)
        hf_enc.append(t2 - t1)
        del tok
    # HF on the same text cut into 50-line chunks (a prompt-sized input; in case one long string
    # is HF's slow case); ids joined must be equal too
    lines = text.split("\n")
    chunks = ["\n".join(lines[i:i + 50]) + ("\n" if i + 50 < len(lines) else "") for i in range(0, len(lines), 50)]
    assert "".join(chunks) == text
    hf_chunk, ids_chunks = [], None
    for _ in range(max(1, args.runs // 2)):
        tok = hf_tokenizer(args.model)
        t0 = time.perf_counter()
        ids_chunks = [i for c in chunks for i in tok.encode(c, add_special_tokens=False).ids]
        hf_chunk.append(time.perf_counter() - t0)
        del tok
    os.unlink(path)
    same = [int(x) for x in ids_tp.strip().split(",")] == ids_hf
    n_ids = len(ids_hf)

    med = statistics.median
    rows = [
        ("`tpgen tokenize` (C, this repo)", mb / med(enc), med(enc), med(load), med(wall)),
        ("HF `tokenizers` (Rust) `Tokenizer.encode`", mb / med(hf_enc), med(hf_enc), med(hf_load), None),
        (f"HF `tokenizers`, {len(chunks)} encodes of 50 lines", mb / med(hf_chunk), med(hf_chunk), med(hf_load), None),
    ]
    import tokenizers
    print(f"{n_ids} ids; tpgen ids == HF ids: {same}; HF's 50-line chunks: {len(ids_chunks)} ids "
          f"(chunk borders can split a word, so a few more ids)")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"tokenizers {tokenizers.__version__}; median of {args.runs} runs, single thread\n")
    print("| tokenizer | encode MB/s | encode time | load time | whole command (wall) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, rate, e, l, w in rows:
        print(f"| {name} | {rate:.1f} | {e * 1e3:.0f} ms | {l * 1e3:.0f} ms | "
              f"{'%.0f ms' % (w * 1e3) if w else 'n/a (in-process)'} |")
    print(f"\nspeed-up of the encode: {med(hf_enc) / med(enc):.2f}x")
    if args.record:
        perf_record.record_rows(args.record, "tokenizer", "encode", [
            (name, [("encode MB/s", rate, "MB/s"), ("encode time", f"{e * 1e3:.0f} ms", "ms"),
                    ("load time", f"{l * 1e3:.0f} ms", "ms"),
                    ("whole command (wall)", f"{w * 1e3:.0f} ms" if w else "n/a (in-process)", "ms")])
            for name, rate, e, l, w in rows], perf_record.command_line(__file__), row_header="tokenizer",
            notes=f"{mb:.2f} MB of real code, single thread, median of {args.runs}; tokenizers "
                  f"{tokenizers.__version__}; ids {'identical to' if same else 'DIFFERENT from'} HF's.")
    if not same:
        sys.exit("the ids differ from HF's")


if __name__ == "__main__":
    main()
