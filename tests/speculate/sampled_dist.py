#!/usr/bin/env python3
"""Sampled generation with --speculate, end to end through `tpgen generate`:

 1. distributed as plain sampling: the same prompt as 1200 requests (each request draws from
    its own stream), 10 new tokens each, with and without --speculate; the histograms of the
    tokens at each position and of the (first, second) pairs pass a two-sample chi-square test
    (critical value at p = 1e-4, cells with few counts pooled);
 2. drafts were made and some accepted (else 1. shows nothing), accepted <= drafted per request;
 3. seeded runs reproducible: the --speculate run again, at TP=2, gives the same ids.

usage: sampled_dist.py TPGEN MPIEXEC MODEL
"""
import json
import math
import os
import subprocess
import sys
import tempfile
from collections import Counter

tpgen, mpiexec, model = sys.argv[1:4]
N, NEW = 1200, 10
FLAGS = ["--temperature", "1", "--top-k", "3", "--seed", "5"]
fails = []


def run(np, extra, prompts):
    cmd = [mpiexec, "--oversubscribe", "--allow-run-as-root", "-np", str(np), tpgen, "generate", "--model", model,
           "--prompts-file", prompts, "--max-new-tokens", str(NEW), "--ignore-eos", "--json", "--backend", "cpu",
           "--threads", "1"] + FLAGS + extra
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    if p.returncode != 0:
        print("FAIL: %s\n%s" % (" ".join(cmd), p.stderr))
        sys.exit(1)
    return [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]


def crit(df):  # chi-square critical value at p = 1e-4 (Wilson-Hilferty)
    a = 2.0 / (9.0 * df)
    return df * (1 - a + 3.719 * math.sqrt(a)) ** 3


def two_sample(a, b, what):
    """Two-sample chi-square of Counters a and b (equal totals); cells under 10 counts pooled."""
    keys = set(a) | set(b)
    big = [k for k in keys if a[k] + b[k] >= 10]
    rest = (sum(a[k] for k in keys if k not in big), sum(b[k] for k in keys if k not in big))
    cells = [(a[k], b[k]) for k in big] + ([rest] if sum(rest) else [])
    stat = sum((x - y) ** 2 / (x + y) for x, y in cells)
    df = len(cells) - 1
    if df < 1:
        return
    if stat >= crit(df):
        fails.append("%s: two-sample chi2 %.1f >= %.1f (df %d)" % (what, stat, crit(df), df))
    print("%s: chi2 %.1f, df %d, critical %.1f" % (what, stat, df, crit(df)))


with tempfile.TemporaryDirectory() as tmp:
    prompts = os.path.join(tmp, "prompts.txt")
    with open(prompts, "w") as f:
        f.write("[1, 2, 3, 1, 2, 3, 1, 2]\n" * N)
    plain = run(1, [], prompts)
    spec = run(1, ["--speculate", "ngram:3"], prompts)
    spec2 = run(2, ["--speculate", "ngram:3"], prompts)

if len(plain) != N or len(spec) != N or len(spec2) != N:
    fails.append("result lines: %d, %d, %d, expected %d" % (len(plain), len(spec), len(spec2), N))
drafted = sum(r["speculative"]["drafted"] for r in spec)
accepted = sum(r["speculative"]["accepted"] for r in spec)
bad = [r["speculative"] for r in spec if r["speculative"]["accepted"] > r["speculative"]["drafted"]]
if bad:
    fails.append("accepted > drafted: %s" % bad[:3])
if accepted == 0 or accepted == drafted:
    fails.append("%d of %d drafts accepted: the rule was not exercised both ways" % (accepted, drafted))
print("drafts: %d accepted of %d" % (accepted, drafted))
if [r["ids"] for r in spec] != [r["ids"] for r in spec2]:
    fails.append("seeded --speculate run differs at TP=2 from TP=1")
for pos in range(NEW):
    two_sample(Counter(r["ids"][pos] for r in plain), Counter(r["ids"][pos] for r in spec), "token %d" % pos)
for a in (3, 5, 7):  # pairs where drafts were verified (none before the third token)
    two_sample(Counter(tuple(r["ids"][a:a + 2]) for r in plain), Counter(tuple(r["ids"][a:a + 2]) for r in spec),
               "tokens %d-%d" % (a, a + 1))
for f in fails:
    print("FAIL: " + f)
if not fails:
    print("ok: --speculate samples as plain sampling (%d requests, %d of %d drafts accepted)" % (N, accepted, drafted))
sys.exit(1 if fails else 0)
