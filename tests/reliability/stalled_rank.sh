#!/usr/bin/env bash
# The MPI watchdog (--comm-timeout, comm/comm_mpi.c): a rank that stops answering mid-request
# ends the job. `tpgen serve` at TP 2 under mpirun; rank 1 is stopped (SIGSTOP: alive, its
# sockets open, so neither Open MPI nor the launcher notices, as when a node's network dies);
# then a request: rank 0 waits in the step's all-reduce. With --comm-timeout 1, within 10 s:
# mpirun has exited non-zero, rank 0 printed the watchdog's line naming the collective (the step's all-reduce or gather) and
# --comm-timeout, and no rank is left. Without the watchdog the request never returns.
# usage: stalled_rank.sh TPGEN MPIEXEC MODEL
set -euo pipefail
tpgen=$1 mpiexec=$2 model=$3
log=$(mktemp)
trap 'rm -f "$log"' EXIT
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$mpiexec" --oversubscribe --allow-run-as-root -np 2 "$tpgen" serve --model "$model" --backend cpu --threads 1 \
  --host 127.0.0.1 --port "$port" --comm-timeout 1 >"$log" 2>&1 &
launcher=$!
ranks() { # the pids of this job's ranks ("RANK PID" lines)
  local p r
  for p in $(pgrep -P "$launcher" 2>/dev/null || true); do
    r=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
    [ -n "$r" ] && echo "$r $p"
  done
  return 0
}
fail() { echo "FAIL: $*"; cat "$log"; kill -KILL $(ranks | cut -d' ' -f2) "$launcher" 2>/dev/null || true; exit 1; }
for ((i = 0; i < 300; i++)); do grep -q "^tpgen: serving" "$log" && break; sleep 0.1; done
grep -q "^tpgen: serving" "$log" || fail "no ready line in 30 s"
rank1=$(ranks | awk '$1 == 1 { print $2 }')
[ -n "$rank1" ] || fail "rank 1 not found among mpirun's children"
kill -STOP "$rank1"
t0=$(date +%s)
curl -s -m 15 "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt": [1, 2, 3], "max_tokens": 4}' >/dev/null || true
for ((i = 0; i < 100; i++)); do kill -0 "$launcher" 2>/dev/null || break; sleep 0.1; done
kill -0 "$launcher" 2>/dev/null && fail "mpirun still runs $(($(date +%s) - t0)) s after the request to a stalled rank"
rc=0 && wait "$launcher" || rc=$?
[ "$rc" != 0 ] || fail "mpirun exited 0"
grep -q "MPI watchdog: [a-z-]* #[0-9]* (.*) has not completed .*(--comm-timeout 1 s)" "$log" ||
  fail "no watchdog line naming the collective and --comm-timeout"
left=$(ranks)
[ -z "$left" ] || fail "ranks left: $left"
kill -KILL "$rank1" 2>/dev/null || true
echo "stalled rank 1: mpirun exited $rc within $(($(date +%s) - t0)) s; $(grep -o "MPI watchdog: .*" "$log" | head -1)"
echo "1 passed, 0 failed"
