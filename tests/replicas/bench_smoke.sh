#!/usr/bin/env bash
# tools/bench/bench_replicas.sh works (not how fast): on the keystroke test model, one replica, then
# 2 replicas behind HAProxy by client affinity, then round-robin, a short trace, replica r1
# SIGKILLed mid-run (of the two): the three runs written, requests completed in each, none lost before its first token (HAProxy retried them
# on r0), the kill seen. SKIPPED (77) without haproxy.
#   bench_smoke.sh MODEL WORKDIR
set -euo pipefail
model=$1 work=$2
command -v haproxy >/dev/null || { echo "SKIPPED: haproxy is not installed (tools/dev/install-deps.sh)"; exit 77; }
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$work"; mkdir -p "$work"
files=$(python3 -c 'import os, sysconfig; print(os.path.join(sysconfig.get_paths()["stdlib"], "[a-d]*.py"))')
TPGEN_BENCH_PORT=${TPGEN_BENCH_PORT:-18700} bash "$root/tools/bench/bench_replicas.sh" --model "$model" \
  --trace "editors=3,pauses=20,context=400,step=128,typed=3,think=100,files=$files" --max-tokens 8 \
  --out-dir "$work" --kill-at 1.0 -- --backend cpu --threads 1 >"$work/out.txt" 2>&1 ||
  { cat "$work/out.txt"; echo "FAIL: bench_replicas.sh exited non-zero"; exit 1; }
python3 - "$work" <<'PY'
import glob, json, os, sys
work = sys.argv[1]
bad = 0
for mode in ("single", "client", "roundrobin"):
    d = json.load(open(os.path.join(work, mode + "-1.json")))
    log = open(os.path.join(work, "replicas-%s-1.log" % mode)).read()
    killed = "n/a" if mode == "single" else ("replica 1 (port " in log and "exited with status 137" in log)
    good = d["completed"] > 0 and d["failed_before_answer"] == 0 and killed is not False and d["config"]["label"] == {"single": "1 replica"}.get(mode, "2 replicas, " + mode)
    print("%s: %s: %d sent, %d completed, %d cancelled, %d failed (%d before an answer began), r1 killed: %s"
          % ("ok" if good else "FAIL", mode, d["requests"], d["completed"], d["cancelled"], d["failed"],
             d["failed_before_answer"], killed))
    bad += not good
sys.exit(1 if bad else 0)
PY
