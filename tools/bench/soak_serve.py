#!/usr/bin/env python3
"""Soak test of `tpgen serve` (issue 9 part 5): load on loopback, bounded in count and time.

usage: soak_serve.py --tpgen BIN [--mpiexec mpirun] [--np 2] [--requests 2000] [--clients 64]
                     [--model DIR] [--tokenizer DIR] [--work DIR] [--time-limit S] [--seed N]
                     [--conn-timeout 2] [--max-connections CLIENTS+8] [--waves N] [--warmup N]

One server (`mpirun -np NP tpgen serve`, CPU backend, the tiny test model with the CodeGen
tokenizer), then:
  1. the request templates (greedy and seeded sampling, n 1 or 2, prompts as text or ids of at
     most 24 tokens, some sharing a 16-token prefix, some a 64-token one (4 KV blocks) + 1..8 ids,
     max_tokens 4..100, 4..49 after a long prefix) each run alone, one after another: the
     references (the greedy ones also checked against `tpgen generate`);
  2. warm-up: WARMUP requests of the mixture below (default a quarter of REQUESTS, 200 to 1000),
     checked the same way; then the RSS of every rank is taken;
  3. REQUESTS requests from CLIENTS concurrent clients, each a template drawn at random: ~10%
     disconnect (two thirds mid-stream after the first event, the rest while a non-streamed
     answer is made), ~5% malformed (12 kinds, each with its expected status), ~5% slow (the
     request sent byte by byte, 2 ms apart), ~5% cancelled in prefill (the long prefix + 24..40
     ids of their own, streamed, the socket closed as soon as the headers are in: before the
     first token; --max-batch-tokens 48 makes prefills take several steps), the rest normal,
     half of them streamed. Meanwhile
     WAVES waves (default one per 500 requests) of --max-connections stalled connections (half a
     request line, then silence; one turned away at the connection limit tries again for 10 s)
     take every connection slot that frees up: the server must close each after --conn-timeout
     so that the clients get through (without the timeout they starve);
  4. checks: every well-formed request answered, equal (ids, text, finish_reason of every
     choice; streamed or not) to the same request alone; every malformed one its status and an
     OpenAI error object; each staller closed by the server within conn-timeout + 5 s; at the
     end no request running or waiting, kv_blocks_free + kv_blocks_cached == kv_blocks_total, prefix
     cache hits, requests_cancelled_total between the prefill cancels and those + the disconnects
     (a disconnect may come after its answer), no 5xx answer, rank 0's open fds
     back to their count before the first request, RSS of every rank within +5% of the
     warm-up figure; then SIGTERM to rank 0: every rank exits 0.
Prints one line per check ("ok: ..." / "FAIL: ...") and a summary line "soak: ..." with the
figures; exits 1 on any failure. A client whose connection is reset before any answer (the
server at --max-connections closes new connections at once) retries after 50-200 ms, until
its request's deadline (30 s); the retries are counted.
"""
import argparse
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
import serve_harness as sh  # noqa: E402
check, ok, FAILS = sh.check, sh.ok, sh.FAILS


# ---- the server ----

class Server(sh.Server):
    def __init__(self, args, model):
        super().__init__(args.tpgen, ["--model", model, "--backend", "cpu", "--threads", "1",
                                      "--conn-timeout", str(args.conn_timeout),
                                      "--max-connections", str(args.max_connections), "--max-queue", "1024",
                                      "--drain-timeout", "10", "--max-batch-tokens", "48"],
                         args.np, args.mpiexec if args.np > 1 else None, timeout=90)
        try:
            self.pids = self.rank_pids()
        except sh.ServerError:
            self.kill()
            raise

    def rss_kb(self):
        return {r: sh.rss_kb(pid) for r, pid in self.pids.items()}

    def fds(self, rank=0):
        return sh.open_fds(self.pids[rank])


# ---- requests ----

def tokenize(srv, text):
    return json.loads(srv.request("POST", "/tokenize", {"prompt": text}, timeout=30)[1])["tokens"]


def long_prefix(vocab):
    """The 64 ids (4 KV blocks at the default --block-size) that long-prefix prompts start with."""
    rng = random.Random(64)
    return [rng.randrange(3, vocab) for _ in range(64)]


def make_templates(rng, n, srv, vocab):
    """Well-formed requests: a prompt (text or ids, at most 24 tokens), greedy or seeded
    sampling, n 1 or 2. Text prompts whose tokens fall outside the tiny model's vocabulary are
    drawn again. Every other ids prompt starts with the same 16 ids (one KV block at the default
    --block-size): prefix-cache hits across templates, besides each template's repeats; one in 8
    starts with long_prefix: 64 ids, + 1..8."""
    words = "a b c d e f g h l o x y".split()
    shared = [rng.randrange(3, vocab) for _ in range(16)]
    out = []
    for i in range(n):
        if i % 8 == 7:
            prompt = shared + [rng.randrange(3, vocab) for _ in range(rng.randrange(1, 9))]
        elif i % 8 == 5:
            prompt = long_prefix(vocab) + [rng.randrange(3, vocab) for _ in range(rng.randrange(1, 9))]
        elif i % 4 == 3:
            prompt = [rng.randrange(3, vocab) for _ in range(rng.randrange(1, 24))]
        else:
            while True:
                prompt = " ".join(rng.choice(words) for _ in range(rng.randrange(1, 20)))
                ids = tokenize(srv, prompt)
                if 0 < len(ids) <= 24 and max(ids) < vocab:
                    break
        room = 101 if len(prompt) <= 24 else 50  # the tiny model's 128 positions
        q = {"prompt": prompt, "max_tokens": rng.randrange(4, room), "ignore_eos": True, "return_token_ids": True}
        if i % 2:
            q.update(temperature=0.8, seed=1000 + i, n=1 + (i % 3 == 1))
            q.update({"top_k": 20} if i % 5 else {"top_p": 0.9})
        else:
            q.update(temperature=0)
        out.append(q)
    return out


# (raw HTTP request bytes, expected status, what the error must mention or None)
def malformed_cases(name):
    def post(path, body, ctype="application/json"):
        b = body.encode() if isinstance(body, str) else body
        return (b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                % (path.encode(), ctype.encode(), len(b))) + b
    return [
        (post("/v1/completions", "{not json"), 400, None),
        (post("/v1/completions", '{"prompt": "a", "max_tokens": "ten"}'), 400, "max_tokens"),
        (post("/v1/completions", '{"prompt": [1, 1001]}'), 400, "1001"),
        (post("/v1/completions", '{"prompt": [1, 3000000000]}'), 400, "3000000000"),
        (post("/v1/completions", json.dumps({"prompt": [1] * 100, "max_tokens": 60})), 400, "128"),
        (post("/v1/completions", '{"prompt": "a", "temperature": -1}'), 400, "temperature"),
        (post("/v1/completions", '{"prompt": "a", "n": 99}'), 400, "n"),
        (post("/v1/completions", json.dumps({"prompt": "a", "model": "not-" + name})), 404, "model_not_found"),
        (post("/v1/completions", b"\xff\xfe\x00garbage"), 400, None),
        (post("/v1/nowhere", "{}"), 404, None),
        (b"GET /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 405, None),
        (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n"
         b"Connection: close\r\n\r\n0\r\n\r\n", 400, None),
    ]


Reset = sh.ConnectionLost  # the connection closed before any answer (the server's connection limit): retry
raw_exchange = sh.raw_exchange


def completion_bytes(q, stream):
    body = json.dumps(dict(q, stream=stream)).encode()
    return (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)) + body


def read_answer(r, stream):
    """-> sorted [(index, text, token_ids, finish_reason)] of a completion response."""
    if r.status != 200:
        raise RuntimeError("status %d: %s" % (r.status, r.read()[:300]))
    if not stream:
        d = json.loads(r.read())
        return sorted((c["index"], c["text"], c["token_ids"], c["finish_reason"]) for c in d["choices"])
    acc = {}
    done = False
    for line in r:
        line = line.rstrip(b"\r\n")
        if not line:
            continue
        if not line.startswith(b"data: "):
            raise RuntimeError("not an SSE line: %r" % line[:100])
        if line == b"data: [DONE]":
            done = True
            break
        ev = json.loads(line[6:])
        if "error" in ev:
            raise RuntimeError("error event: %s" % ev)
        for c in ev["choices"]:
            a = acc.setdefault(c["index"], ["", [], None])
            a[0] += c["text"]
            a[1] += c.get("token_ids") or []
            if c.get("finish_reason"):
                a[2] = c["finish_reason"]
    if not done:
        raise RuntimeError("stream ended without [DONE]")
    return sorted((i, a[0], a[1], a[2]) for i, a in acc.items())


class Stats:
    def __init__(self):
        self.mu = threading.Lock()
        self.count = {}
        self.retries = 0
        self.lat = []
        self.wellformed = 0

    def add(self, kind, secs=None):
        with self.mu:
            self.count[kind] = self.count.get(kind, 0) + 1
            if secs is not None:
                self.lat.append(secs)


def with_retries(fn, deadline, stats):
    while True:
        try:
            return fn()
        except Reset:
            if time.time() > deadline:
                raise RuntimeError("connection reset before any answer, retried until the 30 s deadline")
            with stats.mu:
                stats.retries += 1
            time.sleep(random.uniform(0.05, 0.2))


def run_wellformed(srv, q, ref, stream, slow, stats, tag):
    t0 = time.time()

    def once():
        r, s = raw_exchange(srv.host, srv.port, completion_bytes(q, stream), slow=slow)
        try:
            return read_answer(r, stream)
        finally:
            s.close()
    try:
        got = with_retries(once, t0 + 30, stats)
    except Exception as e:  # noqa: BLE001 (a failure of the server under test)
        return check(False, "%s: %s: %r" % (tag, type(e).__name__, e))
    stats.add("slow" if slow else "stream" if stream else "plain", time.time() - t0)
    return check(got == ref, "%s differs from the same request alone:\n  got %s\n  ref %s" % (tag, got, ref))


def run_disconnect(srv, q, stream, stats, tag):
    # long enough to be cut: 96 tokens after a prompt of <= 24 (text, or ids), fewer after a long prefix
    room = 96 if isinstance(q["prompt"], str) else min(96, 128 - len(q["prompt"]))
    q = dict(q, max_tokens=room, ignore_eos=True)

    def once():
        r, s = raw_exchange(srv.host, srv.port, completion_bytes(q, stream))
        return r, s
    if stream:
        try:
            r, s = with_retries(once, time.time() + 30, stats)
        except Exception as e:  # noqa: BLE001
            return check(False, "%s: %r" % (tag, e))
        try:
            check(r.status == 200 and r.readline().startswith(b"data: {"), "%s: the stream starts with an event" % tag)
        finally:
            s.shutdown(socket.SHUT_RDWR)
            s.close()
    else:  # the request sent, the client gone before the answer
        s = socket.create_connection((srv.host, srv.port), timeout=30)
        s.sendall(completion_bytes(q, False))
        time.sleep(random.uniform(0, 0.05))
        s.close()
    stats.add("disconnect")
    return True


def run_prefill_cancel(srv, rng, vocab, stats, tag):
    """The long prefix + 24..40 ids of its own, streamed: closed as soon as the headers are in (the
    job is queued then), before the first token of its 20; the server must cancel it."""
    q = {"prompt": long_prefix(vocab) + [rng.randrange(3, vocab) for _ in range(rng.randrange(24, 41))],
         "max_tokens": 20, "ignore_eos": True, "temperature": 0}
    try:
        r, s = with_retries(lambda: raw_exchange(srv.host, srv.port, completion_bytes(q, True)), time.time() + 30,
                            stats)
    except Exception as e:  # noqa: BLE001
        return check(False, "%s: %r" % (tag, e))
    status = r.status
    s.shutdown(socket.SHUT_RDWR)
    s.close()
    stats.add("prefill_cancel")
    return check(status == 200, "%s: status %d" % (tag, status))


def run_malformed(srv, case, stats, tag):
    data, want, needle = case
    try:
        r, s = with_retries(lambda: raw_exchange(srv.host, srv.port, data), time.time() + 30, stats)
        body = r.read()
        s.close()
    except Exception as e:  # noqa: BLE001
        return check(False, "%s: %r" % (tag, e))
    try:
        err = json.loads(body)["error"]
        shape = isinstance(err, dict) and isinstance(err.get("message"), str)
    except (ValueError, KeyError, TypeError):
        err, shape = None, False
    # libmicrohttpd answers a broken HTTP framing itself (HTML body): only the status is ours to check
    if b"Transfer-Encoding" in data:
        shape = True
    good = check(r.status == want and shape, "%s: status %d (want %d) and an error object: %r" % (tag, r.status, want,
                                                                                                  body[:200]))
    if good and needle:
        good = check(needle in json.dumps(err), "%s: the error names %r: %s" % (tag, needle, err))
    stats.add("malformed")
    return good


def staller(srv, conn_timeout, results, until):
    """Half a request line, then silence, until the server closes the connection: it must, after
    --conn-timeout. A connection closed at once (the server at --max-connections) is opened
    again, so the stallers take every slot that frees up until `until`."""
    while True:
        try:
            s = socket.create_connection((srv.host, srv.port), timeout=conn_timeout + 30)
            s.sendall(b"POST /v1/compl")
            closed, dt = sh.await_close(s, drain=True)
            s.close()
        except (ConnectionResetError, ConnectionRefusedError, BrokenPipeError):
            closed, dt = True, 0.0
        if closed and dt < conn_timeout / 2 and time.time() < until:
            time.sleep(0.02)  # turned away at the connection limit: again
            continue
        results.append((closed, dt))
        return


# ---- the soak ----

def run_load(args, srv, rng, templates, refs, cases, n_requests, waves, label):
    """n_requests of the mixture from args.clients clients, with `waves` waves of stallers;
    checks each answer. -> (Stats, seconds, staller results, [(requests made, rank 0 RSS kB)])"""
    stats = Stats()
    kinds = []
    for i in range(n_requests):
        x = rng.random()
        kinds.append("disconnect" if x < 0.10 else "malformed" if x < 0.15 else "slow" if x < 0.20 else
                     "prefill_cancel" if x < 0.25 else "stream" if x < 0.60 else "plain")
    stats.wellformed = sum(1 for k in kinds if k in ("plain", "stream", "slow"))
    plan = [(i, kinds[i], rng.randrange(len(templates))) for i in range(n_requests)]
    crng = random.Random(rng.random())  # the prefill cancels' suffixes (clients draw them in any order)
    nxt = [0]
    mu = threading.Lock()
    t_load = time.time()
    deadline = t_load + args.time_limit

    def client():
        while time.time() < deadline:
            with mu:
                if nxt[0] >= len(plan):
                    return
                i, kind, k = plan[nxt[0]]
                nxt[0] += 1
            tag = "%s %d (%s, template %d)" % (label, i, kind, k)
            if kind == "disconnect":
                run_disconnect(srv, templates[k], i % 3 != 0, stats, tag)
            elif kind == "malformed":
                run_malformed(srv, cases[i % len(cases)], stats, tag)
            elif kind == "prefill_cancel":
                run_prefill_cancel(srv, crng, args.vocab, stats, tag)
            else:
                run_wellformed(srv, templates[k], refs[k], kind == "stream" or (kind == "slow" and i % 2 == 1),
                               0.002 if kind == "slow" else 0, stats, tag)

    stall_res = []

    def stallers():  # waves of --max-connections stalled connections, spread over the load
        for w in range(waves):
            while nxt[0] < (w + 0.2) * len(plan) / waves and time.time() < deadline:
                time.sleep(0.01)
            ws = [threading.Thread(target=staller, args=(srv, args.conn_timeout, stall_res, time.time() + 10))
                  for _ in range(args.max_connections)]
            for t in ws:
                t.start()
            for t in ws:
                t.join(args.conn_timeout + 40)

    rss_series = []
    done = threading.Event()

    def sampler():
        step = max(1, len(plan) // 10)
        mark = 0
        while not done.wait(0.05):
            if nxt[0] >= mark:
                rss_series.append((nxt[0], srv.rss_kb()[0]))
                mark += step

    clients = [threading.Thread(target=client) for _ in range(args.clients)]
    aux = [threading.Thread(target=stallers), threading.Thread(target=sampler)]
    for t in aux + clients:
        t.start()
    for t in clients:
        t.join(max(1, deadline - time.time() + 60))
    aux[0].join(args.conn_timeout + 60)
    done.set()
    aux[1].join()
    t_load = time.time() - t_load
    check(nxt[0] == len(plan) and not any(t.is_alive() for t in clients),
          "%s: all %d requests made within the time limit (%.0f s): %d made" % (label, len(plan), args.time_limit,
                                                                              nxt[0]))
    n_answered = sum(stats.count.get(k, 0) for k in ("plain", "stream", "slow"))
    check(n_answered == stats.wellformed, "%s: %d of %d well-formed requests answered and equal to the request alone"
          % (label, n_answered, stats.wellformed))
    late = ["%.1f" % d for c, d in stall_res if c and d > args.conn_timeout + 5]
    check(len(stall_res) > 0 and all(c for c, _ in stall_res) and not late,
          "%s: %d stalled connections, each closed by the server within --conn-timeout %d + 5 s (closed: %d, "
          "late: %s)" % (label, len(stall_res), args.conn_timeout, sum(c for c, _ in stall_res), late))
    lat = sorted(stats.lat)
    p = (lambda f: lat[min(len(lat) - 1, int(f * len(lat)))]) if lat else (lambda f: float("nan"))
    print("%s: %d requests in %.1f s: %s, %d retries after a reset at the connection limit; latency of answered "
          "requests p50 %.2f s, p99 %.2f s, max %.2f s" % (label, len(plan), t_load, stats.count, stats.retries,
                                                          p(0.5), p(0.99), lat[-1] if lat else float("nan")),
          flush=True)
    return stats, t_load, stall_res, rss_series


def wait_fds(srv, want, secs):
    deadline = time.time() + secs
    n = srv.fds()
    while n > want and time.time() < deadline:
        time.sleep(0.2)
        n = srv.fds()
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tpgen", required=True)
    ap.add_argument("--mpiexec", default="mpirun")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--model", default=os.path.join(ROOT, "tests/data/tiny-f32"))
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "tests/data/tokenizer/codegen"))
    ap.add_argument("--work", default="/tmp/tpgen-soak")
    ap.add_argument("--time-limit", type=float, default=900, help="seconds for the whole load phase")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--conn-timeout", type=int, default=2)
    ap.add_argument("--max-connections", type=int, default=0, help="default: clients + 8")
    ap.add_argument("--waves", type=int, default=0, help="waves of stalled connections (default: one per 500 "
                    "requests, at least one)")
    ap.add_argument("--templates", type=int, default=32)
    ap.add_argument("--rss-limit", type=float, default=5.0, help="percent RSS growth allowed after the warm-up "
                    "(0: not checked, e.g. under ASan, whose quarantine keeps freed memory)")
    ap.add_argument("--warmup", type=int, default=0, help="requests of the warm-up, after which RSS is measured "
                    "(default: a quarter of --requests, 200 to 1000)")
    args = ap.parse_args()
    if not args.max_connections:
        args.max_connections = args.clients + 8
    if not args.warmup:  # RSS levels off after ~1000 requests (threads' stacks, malloc arenas)
        args.warmup = min(1000, max(200, args.requests // 4))
    if not args.waves:
        args.waves = max(1, args.requests // 500)
    rng = random.Random(args.seed)
    t_start = time.time()

    # the tiny model with the CodeGen tokenizer (text prompts), as the server tests make it
    model = sh.with_tokenizer(args.model, args.tokenizer, os.path.join(args.work, "model"), only_present=True)

    srv = Server(args, model)
    try:
        fd0 = srv.fds()
        m0 = srv.metrics()
        print("server: %d ranks, pids %s, port %d; rank 0 has %d open fds; %d KV blocks"
              % (args.np, srv.pids, srv.port, fd0, m0["tpgen_kv_blocks_total"]), flush=True)
        # 1. the references: each template alone, one after another
        with open(os.path.join(model, "config.json")) as f:
            vocab = args.vocab = json.load(f)["vocab_size"]
        templates = make_templates(rng, args.templates, srv, vocab)
        refs = []
        for i, q in enumerate(templates):
            r, s = raw_exchange(srv.host, srv.port, completion_bytes(q, False))
            refs.append(read_answer(r, False))
            s.close()
        fin = {f for ref in refs for c in ref for f in [c[3]]}
        check(all(len(ref) == q.get("n", 1) for ref, q in zip(refs, templates)) and fin == {"length"},
              "the references have n choices each, finished by length")
        ok("%d templates run alone (references)" % len(templates))
        # the greedy references against `tpgen generate` (one run, 100 tokens: a greedy answer of
        # k tokens is the first k of a longer one)
        greedy = [(q, ref) for q, ref in zip(templates, refs) if q["temperature"] == 0]
        path = os.path.join(args.work, "greedy-prompts.txt")
        with open(path, "w") as f:
            for q, _ in greedy:
                f.write(json.dumps(q["prompt"]) + "\n")
        cmd = sh.command(args.tpgen, ["generate", "--model", model, "--prompts-file", path, "--json",
                                      "--max-new-tokens", "100", "--ignore-eos", "--backend", "cpu", "--threads", "1"],
                         args.np, args.mpiexec if args.np > 1 else None)
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        gen = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]
        differ = [q["prompt"] for (q, ref), g in zip(greedy, gen) if ref[0][2] != g["ids"][:q["max_tokens"]]]
        if check(out.returncode == 0 and len(gen) == len(greedy) and not differ,
                 "the %d greedy references == `tpgen generate` (status %d, %d answers, differing: %s)"
                 % (len(greedy), out.returncode, len(gen), differ[:3])):
            ok("the %d greedy references == `tpgen generate` (ids)" % len(greedy))

        # 2. warm-up: the same mixture, WARMUP requests with one wave of stallers, so that rank
        # 0's allocator has seen as many threads at once as the soak will show it
        cases = malformed_cases(srv.name)
        warm, t_load, warm_stalls, _ = run_load(args, srv, rng, templates, refs, cases, args.warmup,
                                                     max(1, args.warmup // 500), "warm-up")
        _, m = srv.wait_idle(20)
        wait_fds(srv, fd0, 10)
        rss0 = srv.rss_kb()
        ok("warm-up: %d requests in %.1f s, %d stalled connections; RSS (kB) after it: %s"
           % (args.warmup, t_load, len(warm_stalls), rss0))

        # 3. the load
        stats, t_load, stall_res, rss_series = run_load(args, srv, rng, templates, refs, cases, args.requests,
                                                        args.waves, "request")
        n_answered = sum(stats.count.get(k, 0) for k in ("plain", "stream", "slow"))
        n_wf = stats.wellformed
        print("RSS of rank 0 (kB) during the load, by requests made: "
              + ", ".join("%d: %d" % x for x in rss_series), flush=True)

        # 4. the end state
        _, m = srv.wait_idle(20)
        check(m["tpgen_requests_running"] == 0 and m["tpgen_requests_waiting"] == 0,
              "nothing running or waiting at the end: %s running, %s waiting"
              % (m["tpgen_requests_running"], m["tpgen_requests_waiting"]))
        check(m["tpgen_kv_blocks_free"] + m["tpgen_kv_blocks_cached"] == m["tpgen_kv_blocks_total"] > 0, "every KV block free at the end: %s of %s"
              % (m["tpgen_kv_blocks_free"], m["tpgen_kv_blocks_total"]))
        cancelled = m["tpgen_requests_cancelled_total"]
        n_pc = warm.count.get("prefill_cancel", 0) + stats.count.get("prefill_cancel", 0)
        n_dc = warm.count.get("disconnect", 0) + stats.count.get("disconnect", 0)
        check(n_pc > 0 and n_pc <= cancelled <= n_pc + n_dc,
              "tpgen_requests_cancelled_total %d counts the %d prefill cancels (+ up to %d disconnects)"
              % (cancelled, n_pc, n_dc))
        check(m["tpgen_prefix_cache_hit_tokens_total"] > 0, "prefix cache hits: %d of %d prompt tokens"
              % (m["tpgen_prefix_cache_hit_tokens_total"], m["tpgen_prefix_cache_query_tokens_total"]))
        err = {k: v for k, v in m.items() if k.startswith('tpgen_requests_total{status="5')}
        check(not err, "no 5xx answer: %s" % err)
        fd1 = wait_fds(srv, fd0, 15)
        check(fd1 <= fd0, "rank 0's open fds back to their start: %d at start, %d at the end" % (fd0, fd1))
        rss1 = srv.rss_kb()
        growth = {r: 100.0 * (rss1[r] - rss0[r]) / rss0[r] for r in rss0}
        for r in sorted(growth):
            check(not args.rss_limit or growth[r] < args.rss_limit, "rank %d RSS after warm-up %d kB, at the end %d "
                  "kB: %+.1f%% (limit %s)" % (r, rss0[r], rss1[r], growth[r],
                                             "+%g%%" % args.rss_limit if args.rss_limit else "none"))

        # 5. SIGTERM to rank 0: drains, every rank exits 0
        end = srv.stop(timeout=60)
        check(end.clean, "SIGTERM to rank 0 after the soak: the job exits 0 (got %s)" % end)
        print("soak: %d requests (%s) from %d clients in %.1f s (load phase %.1f s); %d stalled connections "
              "closed; %d retries; cancelled %d (%d in prefill); prefix cache hit tokens %d; rank 0 fds %d -> %d; RSS kB %s -> %s; KV blocks free %d/%d; "
              "answers equal: %d/%d; %s"
              % (args.requests, stats.count, args.clients, time.time() - t_start, t_load, len(stall_res), stats.retries,
                 cancelled, n_pc, m["tpgen_prefix_cache_hit_tokens_total"], fd0, fd1, rss0, rss1, m["tpgen_kv_blocks_free"], m["tpgen_kv_blocks_total"],
                 n_answered, n_wf, "FAILED: %d checks" % len(FAILS) if FAILS else "all checks passed"), flush=True)
    finally:
        if srv.p.poll() is None:
            srv.kill()
    if FAILS:
        print("--- server stderr (last 40 lines)\n" + "".join(srv.lines[-40:]))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
