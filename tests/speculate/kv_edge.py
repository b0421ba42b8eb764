#!/usr/bin/env python3
"""Drafts never go past the KV a request holds: exact counts at the KV block boundaries.

usage: kv_edge.py TPGEN MPIEXEC MODEL
A request holds KV for T = prompt + max_tokens - 1 positions (engine/sched/generate.c:
tp_request_tokens), in ceil(T / block) blocks. The scheduler cuts a step's drafts so the last
one is fed at position T - 1 at most. One draft more is fed at position T: when T is a multiple
of the block size that position lies in a block the request does not hold (block table entry -1:
the write lands before the KV arena); otherwise in the slack of its last block. The greedy
output does not change either way (the draft past T is never verified: the request ends at
max_tokens first), so this test asserts the exact draft and accept counts.

With --block-size 8 and --max-new-tokens 10, prompts of 14..16 and 22..24 tokens (a code prompt
of the trained model, cut) put T on a block boundary and one either side. Runs:
  base: TP 1, no --speculate; then ngram:4 at TP 1 and ngram:8:2 at TP 2.
Each --speculate run must print base's ids, and per prompt "speculative": {"drafted": D,
"accepted": A} equal to what the rule gives (simulate() below: the proposer of
engine/sched/speculate.h, spelled out from its contract, fed with base's output, the cap
min(K, T - len) per step, and the verification of greedy decoding: a draft is accepted when it is
the token greedy decoding makes). The test fails if no step had its drafts cut by the KV end
on a boundary prompt (it would show nothing).
"""
import json
import os
import subprocess
import sys
import tempfile

TPGEN, MPIEXEC, MODEL = sys.argv[1:4]
BLOCK, NEW = 8, 10
TEXT = ("for i in range(10):\n    print(i)\nfor j in range(10):\n    print(j)\nfor k in range(10):\n"
        "    print(k)\nfor n in range(10):\n")
FAILS = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        FAILS.append(what)


def generate(tmp, np, args):
    cmd = [MPIEXEC, "--oversubscribe", "--allow-run-as-root", "-np", str(np), TPGEN, "generate", "--model", MODEL,
           "--json", "--backend", "cpu", "--threads", "1", "--block-size", str(BLOCK)] + args
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=180)
    if r.returncode != 0:
        sys.exit("FAIL: exit status %d from %s\n%s" % (r.returncode, " ".join(cmd), r.stderr[-3000:]))
    return [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]


def propose(hist, k, n):
    """Up to k drafts: the tokens after the most recent earlier occurrence of the last n tokens
    (n falling back to 1), continued periodically past the end of the sequence."""
    L = len(hist)
    if k <= 0 or L < 2:
        return []
    for m in range(min(n, L - 1), 0, -1):
        pat = hist[L - m:]
        for i in range(L - m - 1, -1, -1):
            if hist[i:i + m] == pat:
                d = []
                for j in range(k):
                    d.append(hist[i + m + j] if i + m + j < L else d[i + m + j - L])
                return d
    return []


def simulate(prompt, out, k, n):
    """(drafted, accepted, cut): the counts greedy decoding with drafts gives for a request
    whose greedy output is out; cut: steps whose drafts the KV end cut, with the position the
    first cut draft would have had."""
    T = len(prompt) + NEW - 1
    hist, drafted, accepted, cut = list(prompt) + [out[0]], 0, 0, []  # the prefill step: no drafts
    i = 1
    while i < len(out):
        cap = min(k, T - len(hist))
        d = propose(hist, cap, n) if cap > 0 else []
        if len(propose(hist, k, n)) > max(cap, 0):
            cut.append(len(hist) + max(cap, 0))
        drafted += len(d)
        for j in range(len(d) + 1):
            tok = out[i]
            hist.append(tok)
            i += 1
            ok = j < len(d) and d[j] == tok
            accepted += ok
            if i >= len(out) or not ok:
                break
    return drafted, accepted, cut


def main():
    with tempfile.TemporaryDirectory() as tmp:
        ids = generate(tmp, 1, ["--prompt", TEXT, "--max-new-tokens", "1"])[0]["prompt_ids"]
        lens = [L for T0 in (3 * BLOCK, 4 * BLOCK) for L in (T0 - NEW, T0 - NEW + 1, T0 - NEW + 2)]
        if len(ids) < max(lens):
            sys.exit("FAIL: the prompt has %d tokens, the test needs %d" % (len(ids), max(lens)))
        prompts = [ids[:L] for L in lens]
        pf = os.path.join(tmp, "prompts.txt")
        with open(pf, "w") as f:
            f.write("".join(",".join(map(str, p)) + "\n" for p in prompts))
        common = ["--prompts-file", pf, "--max-new-tokens", str(NEW)]
        base = generate(tmp, 1, common)
        check(len(base) == len(prompts) and all(len(b["ids"]) == NEW and b["finish_reason"] == "length"
                                                for b in base), "base: %d results of %d tokens" % (len(base), NEW))
        edge_cuts = 0
        for np, k, n in ((1, 4, 3), (2, 8, 2)):
            spec = generate(tmp, np, common + ["--speculate", "ngram:%d:%d" % (k, n)])
            name = "TP %d ngram:%d:%d" % (np, k, n)
            check(len(spec) == len(prompts), "%s: %d results" % (name, len(spec)))
            for p, b, s in zip(prompts, base, spec):
                T = len(p) + NEW - 1
                where = "%s, prompt %d + max_tokens %d - 1 = %d (%s block boundary)" % (
                    name, len(p), NEW, T, "on a" if T % BLOCK == 0 else "%+d from a" % (
                        T % BLOCK if T % BLOCK < BLOCK // 2 else T % BLOCK - BLOCK))
                check(s["ids"] == b["ids"], "%s: ids as without --speculate" % where)
                d, a, cut = simulate(p, b["ids"], k, n)
                got = s.get("speculative", {})
                check(got.get("drafted") == d and got.get("accepted") == a,
                      "%s: drafted %s accepted %s, the rule gives %d and %d (drafts cut by the KV end at "
                      "positions %s)" % (where, got.get("drafted"), got.get("accepted"), d, a, cut))
                edge_cuts += sum(1 for c in cut if T % BLOCK == 0 and c == T)
        check(edge_cuts > 0, "%d steps had drafts cut exactly at a block boundary (the test shows something)"
              % edge_cuts)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
