#!/usr/bin/env python3
"""Ctrl-C in the terminal of `launcher/tpgen-mpirun -np 2 serve ...`: SIGINT to the whole
foreground process group, faithfully made here by starting the wrapper in a session (and process
group) of its own, as a shell starts a job, and signalling that group with killpg.

usage: stop_group.py TPGEN WRAPPER MODEL CASE
The load: K streamed requests of 8 choices of 120 tokens, --max-batch 1 (the sequences run one
after another), K chosen from a timed warm-up request of the same size so that the K take about
6 s on this machine (2 to 64 of them): a drain of seconds however fast or loaded the machine.
The signal goes once every request has its response head (the server admitted it, so the
drain owes it an answer).
  drain:   SIGINT to the group: every stream finishes in full (finish_reason "length" for all 8
           choices, then [DONE]), tokens still arrive more than 1.5 s after the signal (Open MPI
           kills the ranks 1 s after mpirun hears it, so a test that ends sooner shows nothing),
           the wrapper exits 0 (mpirun's status: 0 only when every rank exits 0) and no rank is
           left;
  timeout: the same with --drain-timeout 1: each stream ends with a finish_reason for all its
           choices, some "abort", and [DONE]; exit 0, no rank left;
  force:   --drain-timeout 120, SIGINT to the group twice, 0.2 s apart: the second forces (the
           wrapper SIGTERMs mpirun): the job ends within 10 s of it, non-zero, no rank left, the
           streams cut short.
Only 127.0.0.1, port 0.
"""
import http.client
import json
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import serve_harness as sh  # noqa: E402

TPGEN, WRAPPER, MODEL, CASE = sys.argv[1:5]
DRAIN = {"drain": "120", "timeout": "1", "force": "120"}[CASE]
N = 8  # choices per request
check, FAILS = sh.check_ok, sh.FAILS


def main():
    srv = sh.Server(TPGEN, ["--model", MODEL, "--backend", "cpu", "--threads", "1", "--max-batch", "1",
                            "--drain-timeout", DRAIN], np=2, mpiexec=WRAPPER, new_session=True)
    try:
        ranks = srv.rank_pids()
        run(srv, ranks)
    finally:
        if srv.p.poll() is None:
            srv.kill()
    if FAILS:
        print("--- wrapper and server stderr\n" + srv.stderr()[-4000:])
    return 1 if FAILS else 0


def run(srv, ranks):
    body = {"prompt": [1, 2, 3], "max_tokens": 120, "n": N, "ignore_eos": True, "temperature": 0,
            "return_token_ids": True}
    t = time.time()
    st, _, text = srv.complete(body, timeout=120)
    t_req = time.time() - t
    if not check(st == 200, "warm-up request: %d %s" % (st, "" if st == 200 else text[:200])):
        return
    # about 6 s of work in all: the drain must outlast Open MPI's 1-2 s kill and the forced stop's
    # ~2 s, also on a quiet machine where one request takes 0.08 s (12 requests were too few there)
    k = min(64, max(2, int(6.0 / t_req) + 1))
    print("a request of %d x 120 tokens takes %.2f s here: %d of them" % (N, t_req, k), flush=True)
    res = [None] * k  # (finish reasons by choice, saw [DONE], arrival time of the last token, error)
    admitted = [threading.Event() for _ in range(k)]

    def stream(i):
        fins, done, last = {}, False, None
        try:
            c = http.client.HTTPConnection(srv.host, srv.port, timeout=150)
            c.request("POST", "/v1/completions", json.dumps(dict(body, prompt=[1, 2, 3 + i], stream=True)),
                      {"Content-Type": "application/json"})
            r = c.getresponse()
            admitted[i].set()
            if r.status != 200:
                res[i] = (fins, done, last, "status %d: %s" % (r.status, r.read()[:200]))
                return
            for data in sh.sse_data(r):
                if data == "[DONE]":
                    done = True
                    break
                for ch in json.loads(data)["choices"]:
                    if ch["text"] or ch.get("token_ids"):
                        last = time.time()
                    if ch["finish_reason"]:
                        fins[ch["index"]] = ch["finish_reason"]
            c.close()
            res[i] = (fins, done, last, None)
        except (OSError, http.client.HTTPException, ValueError, KeyError) as e:
            admitted[i].set()
            res[i] = (fins, done, last, repr(e))

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(k)]
    for t in threads:
        t.start()
    deadline = time.time() + 30
    got = all(e.wait(max(0, deadline - time.time())) for e in admitted)
    # the gauges follow the engine's next step
    held, m = srv.wait_metrics(lambda m: m["tpgen_requests_running"] + m["tpgen_requests_waiting"] > 0, 10)
    if not check(got and held,
                 "%d requests admitted and streaming before the signal (%s running, %s waiting)"
                 % (k, m["tpgen_requests_running"], m["tpgen_requests_waiting"])):
        print("the clients so far: %s" % res)
        return
    t_sig = time.time()
    srv.send_signal(signal.SIGINT, "group")
    if CASE == "force":
        time.sleep(0.2)
        t_sig = time.time()
        srv.send_signal(signal.SIGINT, "group")
    end = srv.wait(150 if CASE != "force" else 10)
    for t in threads:
        t.join(30)
    secs = time.time() - t_sig
    lasts = [r[2] - t_sig for r in res if r and r[2]]
    if CASE in ("drain", "timeout"):
        check(end.rc == 0 and not end.left, "SIGINT to the group (%s): the wrapper exits 0, no rank left: %s"
              % (CASE, end))
        check("tpgen: draining" in srv.stderr(), "the server drained")
    if CASE == "drain":
        full = [r for r in res if r and r[1] and r[0] == {c: "length" for c in range(N)} and not r[3]]
        check(len(full) == k, "the %d streams finished in full (8 choices each, length, [DONE]): %s" % (k, res))
        check(lasts and max(lasts) > 1.5, "tokens still came %.1f s after the signal (> 1.5 s, else the test "
              "shows nothing)" % max(lasts or [0]))
        if not FAILS:
            print("ok: Ctrl-C (SIGINT to the process group) drained %d sequences in %.1f s; wrapper exit %s"
                  % (k * N, secs, end.rc))
    elif CASE == "timeout":
        fins = [f for r in res if r for f in r[0].values()]
        check(all(r and r[1] and not r[3] and len(r[0]) == N for r in res) and "abort" in fins
              and set(fins) <= {"abort", "length"},
              "each stream ends with a finish_reason for its 8 choices (some abort) and [DONE]: %s" % res)
    else:
        check(end.rc not in (0, None) and not end.left, "a second SIGINT forces: the job ends, non-zero, no rank "
              "left: %s" % end)
        check(end.rc is not None and end.secs < 10, "forced within 10 s of the second signal (%.1f s)" % end.secs)
        check(any(not (r and r[1] and len(r[0]) == N) for r in res), "the forced stop cut the streams: %s" % res)
        check("forced stop" in srv.stderr(), "the wrapper says it forced the stop")


if __name__ == "__main__":
    sys.exit(main())
