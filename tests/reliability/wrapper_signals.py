#!/usr/bin/env python3
"""launcher/tpgen-mpirun serve's guarantee, with a stand-in mpirun (no MPI, no model; bounded).

usage: wrapper_signals.py WRAPPER WORKDIR
A stop (TERM, INT or HUP to the wrapper) at any moment ends in one of: the wrapper stopped before
mpirun started (exit 0, or killed by the signal while bash was still starting, before its first
line: then no mpirun exists), or mpirun got exactly one SIGUSR1 and the wrapper exited with
mpirun's status 0, within 3 s. A second stop forces: SIGTERM to mpirun, the wrapper exits 143.
The stand-in mpirun (on PATH) logs what it gets; it takes SIGUSR1 only after START_DELAY s (a
real mpirun's first milliseconds: the default action of SIGUSR1 there is to die), and a stop
before that must wait for it, not kill it (issue 34: the old wrapper sent it at once: status
138). Stops are sent at random moments over the start and while mpirun runs (seeded, printed).
"""
import os
import random
import signal
import subprocess
import sys
import time

WRAPPER, WORK = sys.argv[1:3]
os.makedirs(os.path.join(WORK, "bin"), exist_ok=True)
FAKE = os.path.join(WORK, "bin", "mpirun")
with open(FAKE, "w") as f:
    f.write("""#!/usr/bin/env bash
# stand-in mpirun (tests/reliability/wrapper_signals.py)
echo started >> "$FAKE_LOG"
sleep "$START_DELAY"
trap 'echo usr1 >> "$FAKE_LOG"; exit 0' USR1
trap 'echo term >> "$FAKE_LOG"; exit 143' TERM
echo ready >> "$FAKE_LOG"
for ((i = 0; i < 400; i++)); do sleep 0.05; done # 20 s at most: the test never waits that long
echo timeout >> "$FAKE_LOG"
""")
os.chmod(FAKE, 0o755)
fails = []
seed = int(os.environ.get("SEED", time.time()))
rng = random.Random(seed)
print("seed %d" % seed, flush=True)


def run(i, delays, sigs, start_delay):
    log = os.path.join(WORK, "log%d" % i)
    if os.path.exists(log):
        os.remove(log)
    env = dict(os.environ, PATH=os.path.join(WORK, "bin") + ":" + os.environ["PATH"], TPGEN_BIN="/bin/true",
               FAKE_LOG=log, START_DELAY=str(start_delay))
    p = subprocess.Popen(["bash", WRAPPER, "-np", "1", "serve"], env=env, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    for d, s in zip(delays, sigs):
        t0 = time.time()
        while d is None and time.time() - t0 < 5 and not (os.path.exists(log) and open(log).read()):
            time.sleep(0.01)  # None: once the stand-in has started
        time.sleep(d or 0)
        try:
            p.send_signal(s)
        except ProcessLookupError:
            pass
    try:
        rc = p.wait(3 + start_delay)
    except subprocess.TimeoutExpired:
        rc = "hang"
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    time.sleep(0.1)  # a stand-in orphaned by the wrapper would still log
    got = open(log).read().split() if os.path.exists(log) else []
    return rc, got


def expect(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL: " + what, flush=True)


# one stop at a random moment: over the wrapper's start and mpirun's, and while it runs
sigs = [signal.SIGHUP, signal.SIGTERM, signal.SIGINT]
for i in range(40):
    d, s = rng.uniform(0, 0.6), rng.choice(sigs)
    rc, got = run(i, [d], [s], 0.3)
    what = "stop %s after %.3f s: wrapper %s, mpirun %s" % (s.name, d, rc, got)
    if not got:  # mpirun never started
        expect(rc in (0, -s), what + " (stopped before mpirun: exit 0, or the signal's default before line 1)")
    else:
        expect(rc == 0 and got[-1] == "usr1" and got.count("usr1") == 1, what + " (want one USR1, exit 0)")
print("one stop at random moments: %d runs" % 40, flush=True)

# a second stop forces: SIGTERM to mpirun (before its handler, too: it dies of it), exit 143
rc, got = run(200, [None, 0.05], [signal.SIGTERM, signal.SIGTERM], 1.0)
expect(rc == 143 and "usr1" not in got and "timeout" not in got,
       "two stops before mpirun takes USR1: forced (SIGTERM, exit 143): wrapper %s, mpirun %s" % (rc, got))
print("second stop forces", flush=True)
if fails:
    sys.exit("FAIL: %d of the wrapper's checks (seed %d)" % (len(fails), seed))
print("PASS", flush=True)
