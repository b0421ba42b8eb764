#!/usr/bin/env python3
"""Prompt scoring (echo + logprobs) in the scheduler's steps, end to end on `tpgen serve`.

usage: scoring_test.py TPGEN MPIEXEC NP MODEL WORKDIR PART
PART "values": MODEL (no tokenizer: top_logprobs keys are "token_id:N") at TP NP: the prompt
  log-probabilities and top alternatives of echo + logprobs == `tpgen score --logprobs`, for several
  prompts with n=2 and max_tokens 0 (prompts of 100, 17, 2 and 1 tokens: several chunks, one, none),
  for a prompt whose steps fetch full logits (its own sample row at temperature 1, and a concurrent
  stream with a presence penalty), and streamed == non-streamed.
PART "fairness": a random model made here (tools/fixtures/make.py random, 4 layers, E=256) at TP 1:
  a stream decodes while a 16-prompt echo + logprobs request (2,400 prompt tokens, max_tokens 0)
  is scored; the stream's longest gap between tokens must stay under a quarter of the scoring
  request's latency (scored in one blocking pass, the gap is the whole latency: ratio ~1; in the
  steps it is one step's: ratio ~1/80). Relative timings only: one retry, as a loaded machine may
  stall any process once (the blocking pass stalls the stream every time). Then the interleaved
  scores == the same request scored alone.
PART "kv": MODEL with a KV cache of 2 blocks of 16 tokens (--kv-cache-tokens 32): echo + logprobs
  with max_tokens 0 on 33 prompt tokens (32 fed: exactly 2 blocks) is served, its scores ==
  `tpgen score`; on 34 (3 blocks) a prompt 400 naming the limit comes at once; the same with
  max_tokens (20 prompt tokens + 13 -> 32 fed: served; + 14: 400). Then no busy engine: rank 0
  uses < 30% of a core over 2 s idle, every KV block is free, SIGTERM exits 0.
"""
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_test as st  # noqa: E402  (the Server class, launch, check)
from serve_test import Server, check, launch, ok  # noqa: E402
from serve_harness import cpu_seconds  # noqa: E402  (serve_test put tests/common on the path)

TPGEN, MPIEXEC, NP, MODEL, WORK, PART = sys.argv[1:7]
st.TPGEN, st.MPIEXEC, st.NP = TPGEN, MPIEXEC, int(NP)
TOL = 1e-4  # the serve test's bound for echo logprobs vs `tpgen score` (f32, float rounding only)


def post(srv, body, timeout=60):
    """POST /v1/completions: (status, parsed body, seconds)."""
    t = time.monotonic()
    c = http.client.HTTPConnection(srv.host, srv.port, timeout=timeout)
    c.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    text = r.read().decode()
    c.close()
    return r.status, json.loads(text), time.monotonic() - t


def stream(srv, body, on_event=None):
    """A streamed completion: the parsed events, on_event() called as each arrives."""
    c = http.client.HTTPConnection(srv.host, srv.port, timeout=120)
    c.request("POST", "/v1/completions", body=json.dumps(dict(body, stream=True)),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    events = []
    for line in r:
        line = line.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        events.append(json.loads(line[6:]))
        if on_event:
            on_event()
    c.close()
    return events


def score_ref(ids, k):
    """`tpgen score --logprobs k` of ids: (logprobs, top) with top[i] = {"token_id:N": lp}."""
    out = subprocess.run(launch(["score", "--model", MODEL, "--ids", ",".join(map(str, ids)), "--logprobs", str(k),
                                 "--json"]), capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        sys.exit("FAIL: tpgen score: " + out.stderr)
    sc = json.loads(out.stdout.splitlines()[-1])
    top = [None] + [{"token_id:%d" % i: lp for i, lp in t} for t in sc["top_logprobs"][1:]]
    return sc["logprobs"], top


def close(a, b):
    return a is not None and b is not None and abs(a - b) < TOL


def same_scores(lp, ids, ref, what):
    """The prompt part of a choice's logprobs (echo) against `tpgen score`."""
    n = len(ids)
    ref_lps, ref_top = ref
    got_lps, got_top = lp["token_logprobs"][:n], lp["top_logprobs"][:n]
    check(len(lp["token_logprobs"]) >= n and got_lps[0] is None and got_top[0] is None,
          "%s: %d prompt positions, the first null: %s" % (what, n, got_lps[:2]))
    bad = [i for i in range(1, n) if not close(got_lps[i], ref_lps[i])]
    check(not bad, "%s: prompt logprobs == tpgen score, differ at %s: %s vs %s" %
          (what, bad[:5], [got_lps[i] for i in bad[:3]], [ref_lps[i] for i in bad[:3]]))
    bad = [i for i in range(1, n) if set(got_top[i] or {}) != set(ref_top[i]) or
           not all(close(got_top[i][t], ref_top[i][t]) for t in ref_top[i])]
    check(not bad, "%s: top_logprobs == tpgen score's, differ at %s: %s vs %s" %
          (what, bad[:5], [got_top[i] for i in bad[:2]], [ref_top[i] for i in bad[:2]]))


def all_free(srv):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        m = srv.metrics()
        if m["tpgen_kv_blocks_free"] + m["tpgen_kv_blocks_cached"] == m["tpgen_kv_blocks_total"] and m["tpgen_requests_running"] == m["tpgen_requests_waiting"] == 0:
            return True
        time.sleep(0.1)
    return False


def stop(srv):
    os.kill(srv.rank_pids()[0], signal.SIGTERM)
    check(srv.p.wait(60) == 0, "exit 0 after SIGTERM")


def part_values():
    rng = random.Random(5)
    P = [[rng.randrange(1000) for _ in range(100)], [rng.randrange(1000) for _ in range(17)], [3, 9], [7]]
    refs = [score_ref(p, 3) if len(p) > 1 else ([None], [None]) for p in P]
    srv = Server(MODEL)

    # several prompts, n=2, scoring only: each prompt scored once, its choices all echo it
    status, body, _ = post(srv, {"prompt": P, "n": 2, "echo": True, "logprobs": 3, "max_tokens": 0})
    ch = sorted(body.get("choices", []), key=lambda c: c["index"])
    if check(status == 200 and len(ch) == 8, "4 prompts x n=2, max_tokens 0: %d %s" % (status, str(body)[:300])):
        for i, c in enumerate(ch):
            p = P[i // 2]
            check(len(c["logprobs"]["token_logprobs"]) == len(p) and c["finish_reason"] == "length",
                  "choice %d: %d positions (prompt %d), finish %s" % (i, len(c["logprobs"]["token_logprobs"]), len(p),
                                                                     c["finish_reason"]))
            same_scores(c["logprobs"], p, refs[i // 2], "choice %d (prompt of %d)" % (i, len(p)))
    ok("several prompts, n=2, max_tokens 0: prompt scores == tpgen score (100 tokens in chunks, 17, 2, 1)")

    # steps with full logits: a concurrent stream with a presence penalty, and the request's own
    # sample row at temperature 1 without top_k (the last prompt chunk shares its step)
    started = threading.Event()
    th = threading.Thread(target=stream, args=(srv, {"prompt": [1, 2, 3], "max_tokens": 100, "temperature": 0.9,
                                                     "presence_penalty": 0.5, "ignore_eos": True}, started.set))
    th.start()
    started.wait(30)
    status, body, _ = post(srv, {"prompt": P[0], "echo": True, "logprobs": 3, "max_tokens": 4, "temperature": 1.0,
                                 "seed": 3, "ignore_eos": True})
    th.join(120)
    if check(status == 200, "full-logits steps: %d %s" % (status, str(body)[:300])):
        c = body["choices"][0]
        check(len(c["logprobs"]["token_logprobs"]) == len(P[0]) + 4, "prompt + 4 generated positions")
        same_scores(c["logprobs"], P[0], refs[0], "full-logits steps")
    ok("prompt scores in steps that fetch full logits (own sample row, concurrent penalized stream) == tpgen score")

    # against a path that does not score (`tpgen score` runs on the same scheduler code): the
    # greedy tokens' logprobs and top alternatives, from the sampling rows, == the scores of
    # the prompt extended by those tokens
    status, body, _ = post(srv, {"prompt": P[1], "max_tokens": 8, "temperature": 0, "logprobs": 3,
                                 "ignore_eos": True, "return_token_ids": True})
    g = body["choices"][0]
    ext = P[1] + g["token_ids"]
    status2, body2, _ = post(srv, {"prompt": ext, "echo": True, "logprobs": 3, "max_tokens": 0})
    if check(status == status2 == 200 and len(ext) == len(P[1]) + 8, "greedy 8 tokens, then their scores"):
        lp = body2["choices"][0]["logprobs"]
        n = len(P[1])
        check(all(close(a, b) for a, b in zip(lp["token_logprobs"][n:], g["logprobs"]["token_logprobs"])) and
              len(lp["token_logprobs"]) == len(ext),
              "scores of the generated positions == their sampled logprobs: %s vs %s" %
              (lp["token_logprobs"][n:], g["logprobs"]["token_logprobs"]))
        check(all(set(a) == set(b) and all(close(a[t], b[t]) for t in b)
                  for a, b in zip(lp["top_logprobs"][n:], g["logprobs"]["top_logprobs"])),
              "top alternatives of the generated positions == the sampler's")
    ok("scores of prompt + greedy tokens == the greedy tokens' own logprobs and top alternatives")

    # streamed == non-streamed: the echo first, then the tokens, values identical
    req = {"prompt": [P[1], P[2]], "n": 2, "echo": True, "logprobs": 2, "max_tokens": 5, "temperature": 0,
           "ignore_eos": True}
    status, body, _ = post(srv, req)
    whole = {c["index"]: c["logprobs"]["token_logprobs"] for c in body["choices"]}
    parts = {}
    for e in stream(srv, req):
        for c in e["choices"]:
            parts.setdefault(c["index"], []).append(c["logprobs"]["token_logprobs"])
    check(sorted(parts) == sorted(whole) == [0, 1, 2, 3], "4 streamed choices: %s" % sorted(parts))
    for i in whole:
        n = len((P[1], P[2])[i // 2])
        chunks = parts.get(i, [[]])
        check(len(chunks[0]) >= n and sum(chunks, []) == whole[i],
              "choice %d: the echo (%d positions) first, streamed == non-streamed" % (i, n))
    ok("streamed echo + logprobs == non-streamed, echo first")

    check(all_free(srv), "every KV block free, nothing running")
    stop(srv)


def random_model():
    """A random model big enough that scoring takes many steps' time (numpy only)."""
    d = os.path.join(WORK, "random-e256-l4")
    if os.path.exists(os.path.join(d, "model.safetensors")):
        return d
    cfg = os.path.join(WORK, "random-e256-l4.json")
    with open(cfg, "w") as f:
        json.dump({"activation_function": "gelu_new", "architectures": ["CodeGenForCausalLM"], "bos_token_id": 1,
                   "eos_token_id": 1000, "layer_norm_epsilon": 1e-05, "model_type": "codegen", "n_ctx": 256,
                   "n_embd": 256, "n_head": 8, "n_inner": None, "n_layer": 4, "n_positions": 256, "rotary_dim": 16,
                   "tie_word_embeddings": False, "vocab_size": 1001}, f)
    tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "fixtures", "make.py")
    subprocess.run([sys.executable, tool, "random", cfg, d, "--dtype", "f32", "--seed", "1"], check=True,
                   stdout=subprocess.DEVNULL)
    return d


def part_fairness():
    srv = Server(random_model())
    rng = random.Random(11)
    prompts = [[rng.randrange(1, 1000) for _ in range(150)] for _ in range(16)]
    score_req = {"prompt": prompts, "echo": True, "logprobs": 1, "max_tokens": 0}
    for attempt in (1, 2):
        times = []
        th = threading.Thread(target=stream, args=(srv, {"prompt": [1, 2, 3, 4], "max_tokens": 250, "temperature": 0,
                                                         "ignore_eos": True}, lambda: times.append(time.monotonic())))
        th.start()
        deadline = time.monotonic() + 60
        while len(times) < 3 and time.monotonic() < deadline:
            time.sleep(0.001)
        t0 = time.monotonic()
        status, body, _ = post(srv, score_req, timeout=300)
        t1 = time.monotonic()
        th.join(300)
        if not check(status == 200, "scoring request: %d %s" % (status, str(body)[:300])):
            break
        before = [t for t in times if t < t0]
        during = [t for t in times if t0 <= t <= t1]
        after = [t for t in times if t > t1]
        if not check(before and after, "the stream ran before and after the scoring (%d, %d, %d tokens)" %
                     (len(before), len(during), len(after))):
            break
        seq = [before[-1]] + during + [after[0]]
        max_gap = max(b - a for a, b in zip(seq, seq[1:]))
        ratio = max_gap / (t1 - t0)
        print("attempt %d: scoring took %.3f s, the stream got %d tokens meanwhile, its longest gap %.3f s "
              "(ratio %.3f)" % (attempt, t1 - t0, len(during), max_gap, ratio), flush=True)
        if ratio < 0.25:
            break
    check(ratio < 0.25, "the stream's longest gap (%.3f s) is under a quarter of the scoring latency (%.3f s): "
          "scoring runs in chunks between its tokens" % (max_gap, t1 - t0))
    ok("a stream keeps its pace while 16 prompts are scored (longest gap / scoring latency = %.3f)" % ratio)

    # the interleaved scores == the same request alone (the steps' composition changes no value)
    status2, alone, _ = post(srv, score_req, timeout=300)
    got = {c["index"]: c["logprobs"]["token_logprobs"] for c in body["choices"]}
    ref = {c["index"]: c["logprobs"]["token_logprobs"] for c in alone["choices"]}
    check(status2 == 200 and sorted(got) == sorted(ref) == list(range(16)), "16 choices both times")
    bad = [i for i in ref if len(got[i]) != 150 or not all(close(a, b) for a, b in zip(got[i][1:], ref[i][1:]))]
    check(not bad, "interleaved scores == scored alone, prompts differ: %s" % bad)
    ok("scores interleaved with a stream == scored alone")
    check(all_free(srv), "every KV block free, nothing running")
    stop(srv)


def part_kv():
    srv = Server(MODEL, ["--kv-cache-tokens", "32", "--block-size", "16"])
    m = srv.metrics()
    check(m["tpgen_kv_blocks_total"] == 2, "the KV cache has 2 blocks: %s" % m["tpgen_kv_blocks_total"])
    rng = random.Random(3)
    p33 = [rng.randrange(1000) for _ in range(33)]
    cases = [  # prompt, max_tokens, served
        (p33, 0, True),             # 32 tokens fed (the last one predicts nothing scored): 2 blocks
        (p33 + [5], 0, False),      # 33 fed: 3 blocks
        (p33[:20], 13, True),       # 20 + 13 - 1 = 32
        (p33[:20], 14, False),      # 33
    ]
    for prompt, max_tokens, served in cases:
        what = "echo + logprobs, %d prompt tokens, max_tokens %d" % (len(prompt), max_tokens)
        try:
            status, body, secs = post(srv, {"prompt": prompt, "echo": True, "logprobs": 2, "max_tokens": max_tokens},
                                      timeout=30)
        except OSError as e:
            check(False, "%s: no answer in 30 s (%s)" % (what, e))
            continue
        if served:
            if check(status == 200, "%s: served, got %d %s" % (what, status, str(body)[:300])):
                same_scores(body["choices"][0]["logprobs"], prompt, score_ref(prompt, 2), what)
        else:
            err = body.get("error", {})
            msg = err.get("message", "")
            check(status == 400 and err.get("param") == ("max_tokens" if max_tokens else "prompt") and
                  "2 blocks" in msg and "--kv-cache-tokens" in msg and secs < 5,
                  "%s: 400 at once (%.2f s) naming the limit: %d %s" % (what, secs, status, msg))
    ok("KV cache of 2 blocks: echo + logprobs needing 2 served, needing 3 a 400 at once (max_tokens 0 and > 0)")

    pid = srv.rank_pids()[0]
    c0, t = cpu_seconds(pid), time.monotonic()
    time.sleep(2)
    busy = (cpu_seconds(pid) - c0) / (time.monotonic() - t)
    check(busy < 0.3, "rank 0 idle after the requests: %.0f%% of a core" % (100 * busy))
    check(all_free(srv), "every KV block free, nothing running")
    stop(srv)


os.makedirs(WORK, exist_ok=True)
{"values": part_values, "fairness": part_fairness, "kv": part_kv}[PART]()
st.sh.exit_with_checks()
