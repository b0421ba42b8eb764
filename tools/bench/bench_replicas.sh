#!/usr/bin/env bash
# Replicas behind HAProxy with client affinity against round-robin, in one run (issue 42; docs/SERVING.md
# "Replicas behind a load balancer"): the keystroke trace (tools/bench/completion_trace.py) played
# against one replica (the reference: every request finds its editor's prefix there), then N
# replicas (launcher/tpgen-replicas) balanced by --balance client, then by --balance roundrobin,
# the order rotating from run to run, each on freshly started replicas (empty prefix caches).
# Each editor of the trace names itself (X-Tpgen-Client, the "user" field); the prefix-cache hit
# rate is read from the replicas' own /metrics, summed (bench_serving.py --metrics-url).
#
#   tools/bench/bench_replicas.sh --model DIR [-n N] [--runs R] [--trace SPEC] [--max-tokens M]
#       [--out-dir DIR] [--record docs/bench/FILE.jsonl] [--kill-at S] [-- tpgen serve flags]
#
#   --trace SPEC     completion-trace keys (default editors=8,pauses=12): bench_serving.py --dataset
#                    completion-trace:SPEC
#   --runs R         R runs of each mode (default 1), the order rotating: run 1 single, client,
#                    roundrobin; run 2 client, roundrobin, single; ...
#   --kill-at S      also SIGKILL replica r1 S seconds into each run: a request whose answer had not
#                    begun must not be lost (HAProxy retries it: the report's failed_before_answer),
#                    one already streaming from r1 is cut (the rest of its failed count)
#   --record FILE    rows "run R, 1 replica" and "run R, N replicas, client|roundrobin" in table
#                    replicas/keystroke of FILE
#                    (tools/bench/perf_record.py), one --record-run for the whole command
# Ports: the balancer 127.0.0.1:18600, replicas 18601... (TPGEN_BENCH_PORT moves both).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
die() { echo "bench_replicas: error: $*" >&2; exit 2; }
model="" n=2 runs=1 trace="editors=8,pauses=12" max_tokens=48 out="" record="" kill_at=""
self_cmd="tools/bench/bench_replicas.sh $*" # recorded with the rows (--record)
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=${2:?--model needs a value}; shift 2 ;;
    -n) n=${2:?-n needs a value}; shift 2 ;;
    --runs) runs=${2:?--runs needs a value}; shift 2 ;;
    --trace) trace=${2:?--trace needs a value}; shift 2 ;;
    --max-tokens) max_tokens=${2:?--max-tokens needs a value}; shift 2 ;;
    --out-dir) out=${2:?--out-dir needs a value}; shift 2 ;;
    --record) record=${2:?--record needs a value}; shift 2 ;;
    --kill-at) kill_at=${2:?--kill-at needs a value}; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d;s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown flag $1 (tpgen serve's flags go after --)" ;;
  esac
done
[ -n "$model" ] || die "give --model DIR"
[[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 2 ] || die "-n expects an integer >= 2, got \"$n\""
[[ "$runs" =~ ^[0-9]+$ ]] && [ "$runs" -ge 1 ] || die "--runs expects an integer >= 1, got \"$runs\""
[ -z "$kill_at" ] || [[ "$kill_at" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--kill-at expects seconds, got \"$kill_at\""
command -v haproxy >/dev/null || die "haproxy is not installed (bash tools/dev/install-deps.sh)"
[ -n "$out" ] || out=$(mktemp -d)
mkdir -p "$out"
port=${TPGEN_BENCH_PORT:-18600}
run_name="replicas-$(date -u +%Y%m%dT%H%M%SZ)"
rep_pid=""
cleanup() { [ -z "$rep_pid" ] || { kill -TERM "$rep_pid" 2>/dev/null; wait "$rep_pid" 2>/dev/null || true; }; }
trap cleanup EXIT

one() { # MODE RUN: fresh replicas, the trace, the replicas stopped (MODE single: one replica)
  local mode=$1 run=$2 log="$out/replicas-$1-$2.log" metrics=() i k=$n balance=$1 label="$n replicas, $1"
  shift 2
  [ "$mode" != single ] || { k=1 balance=client label="1 replica"; }
  "$root/launcher/tpgen-replicas" -n "$k" --bind "127.0.0.1:$port" --first-port $((port + 1)) \
      --cfg-flag --balance --cfg-flag "$balance" -- --model "$model" "$@" 2>"$log" &
  rep_pid=$!
  for _ in $(seq 600); do # the replicas load, then HAProxy has them all
    grep -q "serving $k replicas on" "$log" && break
    kill -0 "$rep_pid" 2>/dev/null || { cat "$log" >&2; die "tpgen-replicas exited before serving ($log)"; }
    sleep 0.2
  done
  grep -q "serving $k replicas on" "$log" || die "replicas not serving after 120 s ($log)"
  for ((i = 0; i < k; i++)); do metrics+=(--metrics-url "http://127.0.0.1:$((port + 1 + i))"); done
  local rec=()
  [ -z "$record" ] || rec=(--record "$record" --record-as replicas/keystroke --record-row "run $run"
                           --record-run "$run_name" --record-command "$self_cmd")
  if [ -n "$kill_at" ] && [ "$k" -gt 1 ]; then # replica r1 (port + 2) dies mid-run
    ( sleep "$kill_at"; pkill -KILL -f -- "--port $((port + 2))( |$)" || true ) &
  fi
  # bench_serving.py exits 1 when a request failed: with --kill-at, the streams cut with r1 do (the
  # report counts them, and those lost before an answer began apart)
  rm -f "$out/$mode-$run.json"
  python3 "$here/bench_serving.py" --url "http://127.0.0.1:$port" "${metrics[@]}" \
      --dataset "completion-trace:$trace" --max-tokens "$max_tokens" --label "$label" --no-progress \
      --out "$out/$mode-$run.json" "${rec[@]}" ||
    { [ -n "$kill_at" ] && [ -s "$out/$mode-$run.json" ]; } || die "bench_serving.py failed ($mode, run $run)"
  kill -TERM "$rep_pid" 2>/dev/null || true
  wait "$rep_pid" 2>/dev/null || true
  rep_pid=""
}

modes=(single client roundrobin)
for ((r = 1; r <= runs; r++)); do
  for ((j = 0; j < 3; j++)); do one "${modes[$(((r - 1 + j) % 3))]}" "$r" "$@"; done
done
echo "bench_replicas: runs in $out" >&2
