#!/usr/bin/env python3
"""tests/common/serve_harness.py against real servers: the drivers trust what it reports.

usage: serve_harness_test.py TPGEN MPIEXEC WRAPPER MODEL
For tpgen serve started directly (TP 1), under MPIEXEC (TP 2) and under launcher/tpgen-mpirun
(TP 2, where the ranks are grandchildren of the launched process):
  - host, port, base URL and name are those of the ready line;
  - descendants() of the launcher: the same from the kernel's children lists and from the parent
    pids of every process;
  - rank_pids(): ranks 0..N-1, distinct pids, each running the tpgen binary, below the launcher,
    with OMPI_COMM_WORLD_RANK equal to its rank under MPI;
  - complete(): 200 and max_tokens ids; stream(): [DONE] and the same ids as events;
    raw_bytes() of GET /health: an HTTP/1.1 200 head; metrics() counts the two completions;
    wait_for_metric() holds at once for a true predicate and returns False for a false one within
    its timeout (bounded); cpu_seconds() of rank 0 grows over a request of 1600 tokens;
  - stop(): SIGTERM to rank 0 drains; every status 0, no rank left, all of them really gone.
And: a bad model is a ServerError at once (before the timeout) carrying tpgen's own message; a
ready timeout is a ServerError and leaves no process of it running.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_harness as sh  # noqa: E402

TPGEN, MPIEXEC, WRAPPER, MODEL = sys.argv[1:5]
check = sh.check_ok
FLAGS = ["--model", MODEL, "--backend", "cpu", "--threads", "1"]


def one(np, mpiexec, what):
    t0 = time.time()
    srv = sh.Server(TPGEN, FLAGS, np=np, mpiexec=mpiexec)
    try:
        ready = [l for l in srv.lines if l.startswith("tpgen: serving ")]
        check(len(ready) == 1 and ready[0].rstrip("\n") == "tpgen: serving %s on %s" % (srv.name, srv.base)
              and srv.base == "http://%s:%d" % (srv.host, srv.port) and srv.port > 0,
              "%s: name, host, port and base URL of the ready line: %s %s" % (what, srv.name, srv.base))
        ranks = srv.rank_pids()
        below = set(sh.descendants(srv.p.pid)) | {srv.p.pid}
        tree = [set(sh.descendants(srv.p.pid, via)) for via in ("children", "stat")]
        check(tree[0] == tree[1] == below - {srv.p.pid},
              "%s: the process tree is the same from the children lists and from the parent pids" % what)
        real = os.path.realpath(TPGEN)
        check(sorted(ranks) == list(range(np)) and len(set(ranks.values())) == np
              and all(sh.exe_of(p) == real and p in below for p in ranks.values()),
              "%s: rank pids %s: tpgen processes below the launcher %d" % (what, ranks, srv.p.pid))
        if mpiexec:
            envr = {r: sh.env_of(p).get(b"OMPI_COMM_WORLD_RANK") for r, p in ranks.items()}
            check(all(v == str(r).encode() for r, v in envr.items()), "%s: OMPI_COMM_WORLD_RANK of each: %s"
                  % (what, envr))
        else:
            check(ranks == {0: srv.p.pid}, "%s: the launched process is rank 0" % what)
        body = {"prompt": [1, 2, 3], "max_tokens": 24, "temperature": 0, "ignore_eos": True,
                "return_token_ids": True}
        st, js, _ = srv.complete(body)
        ids = js["choices"][0]["token_ids"] if st == 200 else None
        check(st == 200 and len(ids) == 24, "%s: complete(): %d, %s ids" % (what, st, len(ids or [])))
        st, events, done = srv.stream(body)
        sids = [t for e in events for c in e["choices"] for t in (c.get("token_ids") or [])]
        check(st == 200 and done and sids == ids, "%s: stream(): [DONE] %s, the same ids: %s" % (what, done, sids == ids))
        head = srv.raw_bytes(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        check(head.startswith(b"HTTP/1.1 200"), "%s: raw_bytes(GET /health): %r" % (what, head[:40]))
        held, m = srv.wait_for_metric('tpgen_requests_total{status="200"}', lambda v: v >= 2, 5)
        check(held and m["tpgen_generation_tokens_total"] == 48, "%s: metrics() count the 2 completions (%s tokens)"
              % (what, m.get("tpgen_generation_tokens_total")))
        cpu0 = sh.cpu_seconds(ranks[0])  # clock ticks of 10 ms: 1600 tokens take several
        st, _, _ = srv.complete({"prompt": [1, 2, 3], "max_tokens": 100, "n": 16, "ignore_eos": True})
        cpu1 = sh.cpu_seconds(ranks[0])
        check(st == 200 and cpu1 > cpu0, "%s: cpu_seconds() of rank 0 grew with the work: %.2f -> %.2f"
              % (what, cpu0, cpu1))
        t = time.time()
        held, _ = srv.wait_for_metric("tpgen_requests_running", lambda v: v > 1e9, 0.5)
        check(not held and time.time() - t < 3, "%s: wait_for_metric() of a false predicate: False within its "
              "timeout (%.1f s)" % (what, time.time() - t))
        end = srv.stop(timeout=60)
        check(end.clean and end.rc == 0 and set(end.ranks) == set(range(np)) and not end.left
              and not any(sh.alive(p) for p in ranks.values()),
              "%s: stop(): %s, every rank gone" % (what, end))
    finally:
        if srv.p.poll() is None:
            srv.kill()
    print("%s: %.1f s" % (what, time.time() - t0))


def failures():
    t = time.time()
    try:
        sh.Server(TPGEN, ["--model", "/nonexistent/model", "--backend", "cpu"], timeout=60)
        check(False, "a bad model must be a ServerError")
    except sh.ServerError as e:
        check("/nonexistent/model" in str(e) and time.time() - t < 30,
              "a bad model: ServerError at once (%.1f s), with tpgen's message: %s" % (time.time() - t,
                                                                                      str(e)[-200:]))
    before = set(sh.tpgen_pids(os.getpid(), TPGEN))
    try:
        sh.Server(TPGEN, FLAGS, np=2, mpiexec=MPIEXEC, timeout=0.01)
        check(False, "a ready timeout must be a ServerError")
    except sh.ServerError as e:
        time.sleep(0.5)
        left = set(sh.tpgen_pids(os.getpid(), TPGEN)) - before
        check("no ready line in 0.01 s" in str(e) and not left, "a ready timeout: ServerError, no rank left (%s)"
              % sorted(left))


sh.become_subreaper()  # ranks whose mpirun was killed stay below this process, where failures() looks
one(1, None, "TP 1 direct")
one(2, MPIEXEC, "TP 2 under %s" % os.path.basename(MPIEXEC))
one(2, WRAPPER, "TP 2 under tpgen-mpirun")
failures()
sys.exit(1 if sh.FAILS else 0)
