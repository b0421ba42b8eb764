#!/usr/bin/env python3
"""launcher/tpgen-mpirun serve: no early stop is lost (issue 41 item 9), with a stand-in mpirun.

usage: wrapper_early_stop.py WRAPPER WORKDIR [RUNS]
RUNS (default 300) wrappers, 12 at a time, each sent one SIGINT (every third a TERM or HUP) in
its first 0-30 ms, while bash is still starting (where the old wrapper forked `$(nproc)`,
`$(id -u)`, ...: bash drops a SIGINT that comes while it waits for a foreground child that did
not die of it, so the stop was never counted, nothing was forwarded, and the server never
drained: about 1 in 100). Each must end within 5 s: stopped before mpirun started (exit 0, or
killed by the signal before the trap's line), or mpirun got one SIGUSR1 and the wrapper exited 0.
"""
import os
import random
import signal
import subprocess
import sys
import time

WRAPPER, WORK = sys.argv[1:3]
RUNS = int(sys.argv[3]) if len(sys.argv) > 3 else 300
os.makedirs(os.path.join(WORK, "bin"), exist_ok=True)
FAKE = os.path.join(WORK, "bin", "mpirun")
with open(FAKE, "w") as f:  # takes USR1 after its start (as a real mpirun), then waits for it
    f.write("""#!/usr/bin/env bash
echo started >> "$FAKE_LOG"
trap 'echo usr1 >> "$FAKE_LOG"; exit 0' USR1
trap 'echo term >> "$FAKE_LOG"; exit 143' TERM
for ((i = 0; i < 400; i++)); do sleep 0.05; done
echo timeout >> "$FAKE_LOG"
""")
os.chmod(FAKE, 0o755)
seed = int(os.environ.get("SEED", time.time()))
rng = random.Random(seed)
print("seed %d, %d runs" % (seed, RUNS), flush=True)
env0 = dict(os.environ, PATH=os.path.join(WORK, "bin") + ":" + os.environ["PATH"], TPGEN_BIN="/bin/true")
fails = []
start = time.time()
for base in range(0, RUNS, 12):
    batch = []
    for i in range(base, min(base + 12, RUNS)):
        log = os.path.join(WORK, "log%d" % i)
        if os.path.exists(log):
            os.remove(log)
        s = signal.SIGINT if i % 3 else rng.choice([signal.SIGTERM, signal.SIGHUP])
        d = rng.uniform(0, 0.03)
        p = subprocess.Popen(["bash", WRAPPER, "-np", "1", "serve"], env=dict(env0, FAKE_LOG=log),
                             stderr=subprocess.DEVNULL, start_new_session=True)
        batch.append((i, p, s, d, log, time.time()))
    for i, p, s, d, log, t0 in sorted(batch, key=lambda b: b[3]):
        time.sleep(max(0.0, t0 + d - time.time()))
        try:
            p.send_signal(s)
        except ProcessLookupError:
            pass
    for i, p, s, d, log, t0 in batch:
        try:
            rc = p.wait(max(0.1, t0 + 5 - time.time()))
        except subprocess.TimeoutExpired:
            rc = "hang"
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        got = open(log).read().split() if os.path.exists(log) else []
        what = "run %d: %s after %.1f ms: wrapper %s, mpirun %s" % (i, s.name, d * 1000, rc, got)
        ok = rc in (0, -s) if not got else rc == 0 and got.count("usr1") == 1 and got[-1] == "usr1"
        if not ok:
            fails.append(what)
            print("FAIL: " + what, flush=True)
print("%d early stops in %.1f s" % (RUNS, time.time() - start), flush=True)
if fails:
    sys.exit("FAIL: %d of %d early stops lost or mishandled (seed %d)" % (len(fails), RUNS, seed))
print("PASS", flush=True)
