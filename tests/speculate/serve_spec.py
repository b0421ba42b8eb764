#!/usr/bin/env python3
"""`tpgen serve --speculate` end to end (stdlib HTTP only), at TP=NP:

 1. greedy completions (ids prompts, several requests at once: some find drafts, some do not,
    n=2 choices, some end early on max_tokens) equal `tpgen generate`'s without --speculate;
 2. usage.speculative = {drafted, accepted} on every response, accepted <= drafted, and some
    drafts accepted; a streamed request's usage chunk carries it too;
 3. /metrics: tpgen_spec_draft_tokens_total and tpgen_spec_accepted_tokens_total are the sums
    of the responses' counts; every KV block is free again after the requests (none leaks on
    rejected drafts).

usage: serve_spec.py TPGEN MPIEXEC NP MODEL
"""
import json
import os
import subprocess
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import serve_harness as sh  # noqa: E402

TPGEN, MPIEXEC, NP, MODEL = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
check, FAILS = sh.check, sh.FAILS


def launch(args):
    return sh.command(TPGEN, args + ["--backend", "cpu", "--threads", "1"], NP, MPIEXEC)


PROMPTS = [[1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3], [5, 17, 900, 4, 77, 500], [7], [40, 41, 42, 40, 41]]
MAX = [40, 40, 13, 25]

# the reference: `tpgen generate`, greedy, no speculation
ref = {}
for i, (p, m) in enumerate(zip(PROMPTS, MAX)):
    out = subprocess.run(launch(["generate", "--model", MODEL, "--prompt-ids", ",".join(map(str, p)),
                                 "--max-new-tokens", str(m), "--ignore-eos", "--json"]),
                         capture_output=True, text=True, timeout=120)
    check(out.returncode == 0, "generate failed: " + out.stderr)
    ref[i] = json.loads(out.stdout.splitlines()[-1])["ids"]

srv = sh.Server(TPGEN, ["--model", MODEL, "--speculate", "ngram:5", "--backend", "cpu", "--threads", "1"], NP,
                MPIEXEC)

try:
    results = {}

    def complete(i):
        body = {"prompt": PROMPTS[i], "max_tokens": MAX[i], "temperature": 0, "n": 2, "ignore_eos": True,
                "return_token_ids": True}
        results[i] = srv.request("POST", "/v1/completions", body, timeout=120)[:2]

    threads = [threading.Thread(target=complete, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    drafted = accepted = 0
    for i in range(len(PROMPTS)):
        st, text = results[i]
        if not check(st == 200, "request %d: status %d %s" % (i, st, text)):
            continue
        r = json.loads(text)
        for c in r["choices"]:
            check(c["token_ids"] == ref[i], "request %d choice %d: ids %s, generate gave %s" % (i, c["index"],
                                                                                             c["token_ids"], ref[i]))
        sp = r["usage"].get("speculative")
        if check(sp is not None, "request %d: no usage.speculative: %s" % (i, r["usage"])):
            check(0 <= sp["accepted"] <= sp["drafted"], "request %d: counts %s" % (i, sp))
            drafted += sp["drafted"]
            accepted += sp["accepted"]
    check(accepted > 0, "no draft accepted (%d drafted): the test shows nothing" % drafted)
    # streamed, with the usage chunk
    _, events, _ = srv.stream({"prompt": PROMPTS[0], "max_tokens": 20, "temperature": 0, "ignore_eos": True,
                               "stream_options": {"include_usage": True}})
    usage = [e["usage"] for e in events if e.get("usage")]
    if check(len(usage) == 1 and "speculative" in usage[0], "stream: usage chunk with speculative: %s" % usage):
        drafted += usage[0]["speculative"]["drafted"]
        accepted += usage[0]["speculative"]["accepted"]
    # the gauges are updated after the engine's step
    _, m = srv.wait_metrics(lambda m: m.get("tpgen_kv_blocks_free", 0) + m.get("tpgen_kv_blocks_cached", 0) == m.get("tpgen_kv_blocks_total")
                            and m.get("tpgen_requests_running") == 0, 5, 0.1)
    check(m.get("tpgen_spec_draft_tokens_total") == drafted,
          "metrics drafted %s, responses %d" % (m.get("tpgen_spec_draft_tokens_total"), drafted))
    check(m.get("tpgen_spec_accepted_tokens_total") == accepted,
          "metrics accepted %s, responses %d" % (m.get("tpgen_spec_accepted_tokens_total"), accepted))
    check(m.get("tpgen_kv_blocks_free", 0) + m.get("tpgen_kv_blocks_cached", 0) == m.get("tpgen_kv_blocks_total"),
          "KV blocks free %s of %s after the requests" % (m.get("tpgen_kv_blocks_free"), m.get("tpgen_kv_blocks_total")))
    print("drafts: %d accepted of %d" % (accepted, drafted))
finally:
    end = srv.stop(to="launcher", timeout=60)
    check(end.rc is not None, "server did not stop in 60 s after SIGTERM")
for f in FAILS:
    print("FAIL: " + f)
if not FAILS:
    print("ok: serve --speculate at TP=%d: greedy as generate, usage and metrics counts agree, no KV block leaked" % NP)
sys.exit(1 if FAILS else 0)
