#!/usr/bin/env python3
"""Bounded failure of `tpgen serve`: a rank SIGKILLed ends the whole job.

usage: kill_serve.py TPGEN MPIEXEC MODEL NP VICTIM busy|idle [TERM]
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
import subprocess
import sys
import threading
import time

TPGEN, MPIEXEC, MODEL, NP, VICTIM, MODE = sys.argv[1:7]
SIG = {"TERM": signal.SIGTERM, "USR1": signal.SIGUSR1}.get(sys.argv[7]) if len(sys.argv) > 7 else None
TERM = SIG is not None
NP, VICTIM = int(NP), int(VICTIM)


RANKS = {}


def fail(msg, p=None, lines=()):
    print("FAIL:", msg)
    print("--- launcher output\n" + "".join(lines)[-4000:])
    if p and p.poll() is None:
        p.kill()
    for pid in RANKS.values():  # none left behind
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    sys.exit(1)


def ppid_of(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"PPid:\s+(\d+)", f.read()).group(1))


def rank_pids(job):
    """{rank: pid} of the tpgen processes of this job (children of mpirun, or of the mpirun the
    wrapper started)."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            ppid = ppid_of(int(d))
            if ppid != job and (ppid <= 1 or ppid_of(ppid) != job):
                continue
            with open("/proc/%s/environ" % d, "rb") as f:
                for kv in f.read().split(b"\0"):
                    if kv.startswith(b"OMPI_COMM_WORLD_RANK="):
                        out[int(kv.split(b"=")[1])] = int(d)
        except (OSError, AttributeError):
            pass
    return out


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")  # a zombie waiting to be reaped counts as gone
    except OSError:
        return False


def main():
    flags = ["serve", "--model", MODEL, "--port", "0", "--backend", "cpu", "--threads", "1", "--drain-timeout", "20",
             "--max-batch", "4"]  # 16 sequences of 120 tokens in flight: a drain takes seconds
    env = dict(os.environ)
    if MPIEXEC.endswith("tpgen-mpirun"):  # the wrapper: TPGEN_BIN names the binary
        cmd = [MPIEXEC, "-np", str(NP)] + flags
        env["TPGEN_BIN"] = TPGEN
    else:
        cmd = [MPIEXEC, "--oversubscribe", "--allow-run-as-root", "-np", str(NP), TPGEN] + flags
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    lines, ready = [], threading.Event()
    port = [0]

    def read():
        for line in p.stderr:
            lines.append(line)
            m = re.match(r"^tpgen: serving \S+ on http://[^:]+:(\d+)$", line.rstrip("\n"))
            if m:
                port[0] = int(m.group(1))
                ready.set()
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if not ready.wait(60):
        fail("no ready line in 60 s", p, lines)
    ranks = rank_pids(p.pid)
    RANKS.update(ranks)
    if sorted(ranks) != list(range(NP)):
        fail("cannot find the %d rank processes: %s" % (NP, ranks), p, lines)

    def metrics():
        c = http.client.HTTPConnection("127.0.0.1", port[0], timeout=5)
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
        return {k: float(v) for k, v in (l.rsplit(" ", 1) for l in text.splitlines() if l and l[0] != "#")}

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
                c = http.client.HTTPConnection("127.0.0.1", port[0], timeout=60)
                c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
                r = c.getresponse()
                d = r.read()
                if TERM:
                    answers.append((r.status, d, t0 < t_sig[0]))
                    return
            except (OSError, http.client.HTTPException) as e:
                if TERM:
                    answers.append((None, repr(e), t0 < t_sig[0]))
                return
    if MODE == "busy":
        for i in range(4):
            threading.Thread(target=client, args=(i,), daemon=True).start()
        # TERM: all 4 requests taken by the engine (its prompt-token counter: len(prompt) * n
        # per request), and still running; kill: 4 sequences running
        taken = 4 * len(prompt) * n_choices if TERM else 0
        deadline = time.time() + 20
        while time.time() < deadline:
            m = metrics()
            if m["tpgen_requests_running"] >= 4 and m["tpgen_prompt_tokens_total"] >= taken:
                break
            time.sleep(0.01)
        else:
            fail("requests never in flight (the engine took %d of %d prompt tokens)"
                 % (m["tpgen_prompt_tokens_total"], taken), p, lines)
        what = "with %d sequences running, %d waiting" % (m["tpgen_requests_running"], m["tpgen_requests_waiting"])
    else:
        time.sleep(2)
        m = metrics()
        if m["tpgen_requests_running"] or m["tpgen_requests_waiting"]:
            fail("not idle: %s" % m, p, lines)
        what = "idle"

    if TERM:
        t_sig[0] = time.time()
        os.kill(p.pid, SIG)
        stop.set()
        t0 = time.time()
        try:
            rc = p.wait(60)
        except subprocess.TimeoutExpired:
            fail("mpirun still runs 60 s after SIGTERM", p, lines)
        reader.join(5)
        secs = time.time() - t0
        time.sleep(0.5)
        # every request was in flight (taken by the engine before the signal): answered in full
        full = [a for a in answers if a[0] == 200 and a[2] and all(
            c["finish_reason"] == "length" for c in json.loads(a[1])["choices"])]
        bad = [a for a in answers if a not in full]
        if rc != 0 or bad or len(full) != 4:
            fail("SIG%s to %s %s: status %s after %.1f s; %d requests in flight answered in full; not answered: %s"
                 % (sys.argv[7], os.path.basename(MPIEXEC), what, rc, secs, len(full), bad[:3]), p, lines)
        left = [pid for pid in ranks.values() if alive(pid)]
        if left:
            fail("ranks still alive after mpirun exited: %s" % left, p, lines)
        print("ok: SIG%s to %s %s: the requests in flight drained (%d answered in full), the launcher and every "
              "rank exited 0 after %.1f s" % (sys.argv[7], os.path.basename(MPIEXEC), what, len(full), secs))
        return 0

    os.kill(ranks[VICTIM], signal.SIGKILL)
    t0 = time.time()
    rc = None
    while time.time() - t0 < 10:
        rc = p.poll()
        if rc is not None:
            break
        time.sleep(0.05)
    stop.set()
    if rc is None:
        fail("the launcher still runs 10 s after rank %d was killed (%s)" % (VICTIM, what), p, lines)
    left = [r for r, pid in ranks.items() if r != VICTIM and alive(pid)]
    while left and time.time() - t0 < 10:
        time.sleep(0.05)
        left = [r for r, pid in ranks.items() if r != VICTIM and alive(pid)]
    secs = time.time() - t0
    reader.join(5)
    if left:
        for r in left:
            os.kill(ranks[r], signal.SIGKILL)
        fail("ranks %s still alive 10 s after rank %d was killed (%s)" % (left, VICTIM, what), p, lines)
    if rc == 0:
        fail("the launcher exited 0 after rank %d was killed" % VICTIM, p, lines)
    named = [l for l in lines if re.search(r"rank %d\b" % VICTIM, l)]
    if not named:
        fail("the output does not name the lost rank %d" % VICTIM, p, lines)
    print("ok: serve at TP %d, rank %d SIGKILLed %s: every rank gone and status %d after %.1f s; lost rank named: %s"
          % (NP, VICTIM, what, rc, secs, named[0].strip()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
