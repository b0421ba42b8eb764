#!/usr/bin/env python3
"""Bounded failure of `tpgen serve`: a rank SIGKILLed ends the whole job.

usage: kill_serve.py TPGEN MPIEXEC MODEL NP VICTIM busy|idle [TERM|USR1|HUP]
  VICTIM: the MPI rank to kill with SIGKILL (0: the server and scheduler; others: workers).
  busy: clients keep requests in flight (running sequences in /metrics) when the kill lands;
  idle: no request has come for 2 s (the workers wait for the next step in bcast_idle).
  TERM: instead of a kill, SIGTERM to mpirun itself with requests in flight: they must all be
    answered in full (drained), and every rank and mpirun exit 0. Each client sends one request,
    and the signal waits until /metrics shows the engine took all of them (its prompt-token
    counter, which counts a request once the engine has it) and sequences still run: a request
    still on its way when the drain starts would get the drain's 503, and was never in flight.
Passes when, within 10 s of the kill, the launcher has exited non-zero, every other rank
process is gone, and the launcher's output names the lost rank. Only 127.0.0.1, port 0.
"""
import http.client
import json
import os
import re
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import serve_harness as sh  # noqa: E402

TPGEN, MPIEXEC, MODEL, NP, VICTIM, MODE = sys.argv[1:7]
SIG = {"TERM": signal.SIGTERM, "USR1": signal.SIGUSR1, "HUP": signal.SIGHUP}.get(sys.argv[7]) if len(sys.argv) > 7 else None
TERM = SIG is not None
NP, VICTIM = int(NP), int(VICTIM)


RANKS = {}


def fail(msg, srv=None):
    print("FAIL:", msg)
    if srv:
        print("--- launcher output\n" + srv.stderr()[-4000:])
        if srv.p.poll() is None:
            srv.p.kill()
    for pid in RANKS.values():  # none left behind
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    sys.exit(1)


def main():
    flags = ["--model", MODEL, "--port", "0", "--backend", "cpu", "--threads", "1", "--drain-timeout", "20",
             "--max-batch", "4"]  # 16 sequences of 120 tokens in flight: a drain takes seconds
    try:  # the wrapper gets TPGEN_BIN from the harness
        srv = sh.Server(TPGEN, flags, NP, MPIEXEC)
    except sh.ServerError as e:
        fail(str(e))
    try:
        ranks = srv.rank_pids()
    except sh.ServerError as e:
        fail(str(e), srv)
    RANKS.update(ranks)

    stop = threading.Event()
    answers = []  # (status or None, body or error, sent before the signal)
    t_sig = [float("inf")]

    prompt, n_choices = [1, 2, 3], 4

    def client(i):  # long requests, one after another until the job ends (TERM: one)
        body = json.dumps({"prompt": prompt[:2] + [prompt[2] + i], "max_tokens": 120, "n": n_choices,
                           "ignore_eos": True, "temperature": 0})
        while not stop.is_set():
            t0 = time.time()
            try:
                st, d, _ = srv.request("POST", "/v1/completions", raw=body, timeout=60)
                if TERM:
                    answers.append((st, d, t0 < t_sig[0]))
                    return
            except (OSError, http.client.HTTPException) as e:
                if TERM:
                    answers.append((None, repr(e), t0 < t_sig[0]))
                return
    if MODE == "busy":
        for i in range(4):
            threading.Thread(target=client, args=(i,), daemon=True).start()
        # TERM: all 4 requests taken by the engine -- admitted (its prompt-token counter: len(prompt)
        # per sequence) or waiting for a batch slot -- and sequences still running: true from the
        # moment the last one is in until the last round ends (waiting for "admitted" alone left
        # only the last round, which a loaded machine's polls missed); kill: 4 sequences running
        taken = 4 * len(prompt) * n_choices if TERM else 0
        held, m = srv.wait_metrics(lambda m: m["tpgen_requests_running"] >= (1 if TERM else 4) and
                                   m["tpgen_prompt_tokens_total"] + len(prompt) * m["tpgen_requests_waiting"] >= taken,
                                   20)
        if not held:
            fail("requests never in flight (the engine took %d of %d prompt tokens)"
                 % (m["tpgen_prompt_tokens_total"], taken), srv)
        what = "with %d sequences running, %d waiting" % (m["tpgen_requests_running"], m["tpgen_requests_waiting"])
    else:
        time.sleep(2)
        m = srv.metrics(timeout=5)
        if m["tpgen_requests_running"] or m["tpgen_requests_waiting"]:
            fail("not idle: %s" % m, srv)
        what = "idle"

    if TERM:
        t_sig[0] = time.time()
        srv.send_signal(SIG, "launcher")
        stop.set()
        end = srv.wait(60)
        if end.rc is None:
            fail("mpirun still runs 60 s after SIGTERM", srv)
        rc, secs = end.rc, end.secs
        time.sleep(0.5)
        # every request was in flight (taken by the engine before the signal): answered in full
        full = [a for a in answers if a[0] == 200 and a[2] and all(
            c["finish_reason"] == "length" for c in json.loads(a[1])["choices"])]
        bad = [a for a in answers if a not in full]
        if rc != 0 or bad or len(full) != 4:
            fail("SIG%s to %s %s: status %s after %.1f s; %d requests in flight answered in full; not answered: %s"
                 % (sys.argv[7], os.path.basename(MPIEXEC), what, rc, secs, len(full), bad[:3]), srv)
        if end.left:
            fail("ranks still alive after mpirun exited: %s" % end.left, srv)
        print("ok: SIG%s to %s %s: the requests in flight drained (%d answered in full), the launcher and every "
              "rank exited 0 after %.1f s" % (sys.argv[7], os.path.basename(MPIEXEC), what, len(full), secs))
        return 0

    os.kill(ranks[VICTIM], signal.SIGKILL)
    t0 = time.time()
    rc = None
    while time.time() - t0 < 10:
        rc = srv.p.poll()
        if rc is not None:
            break
        time.sleep(0.05)
    stop.set()
    if rc is None:
        fail("the launcher still runs 10 s after rank %d was killed (%s)" % (VICTIM, what), srv)
    left = [r for r, pid in ranks.items() if r != VICTIM and sh.alive(pid)]
    while left and time.time() - t0 < 10:
        time.sleep(0.05)
        left = [r for r, pid in ranks.items() if r != VICTIM and sh.alive(pid)]
    secs = time.time() - t0
    srv.wait(5)  # reaped; its last output read
    if left:
        for r in left:
            os.kill(ranks[r], signal.SIGKILL)
        fail("ranks %s still alive 10 s after rank %d was killed (%s)" % (left, VICTIM, what), srv)
    if rc == 0:
        fail("the launcher exited 0 after rank %d was killed" % VICTIM, srv)
    named = [l for l in srv.lines if re.search(r"rank %d\b" % VICTIM, l)]
    if not named:
        fail("the output does not name the lost rank %d" % VICTIM, srv)
    print("ok: serve at TP %d, rank %d SIGKILLed %s: every rank gone and status %d after %.1f s; lost rank named: %s"
          % (NP, VICTIM, what, rc, secs, named[0].strip()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
