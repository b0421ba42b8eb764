#!/usr/bin/env bash
# Decode under contention: `tpgen bench` ms/step (int8 weights, batch 1 by default) with the
# machine quiet and with BUSY CPU-bound background processes, for OpenMP wait policies:
#   spin:    GOMP_SPINCOUNT=300000, libgomp's own default
#   short:   GOMP_SPINCOUNT=$SHORT (30000 unless set: tpgen's default, util/threads.h), a short spin
#   passive: OMP_WAIT_POLICY=PASSIVE (tpgen's default from 2026-12-01 to 12-07)
# The cases alternate within each run (their order reversed every other run), so drifts hit all
# alike; medians of RUNS.
#
#   bash tools/bench/bench_contention.sh MODEL_DIR      (an HF CodeGen checkpoint; tools/fixtures/make.py random)
#   bash tools/bench/bench_contention.sh CONFIG.json    (random weights of that shape: configs/*.json)
#   env: TPGEN=build/bin/tpgen RUNS=5 BUSY=2 FLAGS="--weights int8 --batch 1" THREADS=(all cores)
#        RECORD=docs/bench/cpu.jsonl (appends the table: section threading, table contention)
#        POLICIES="spin short passive" SHORT=30000
#
# The background load is BUSY shell loops (`while :; do :; done`), started and ended by PID here.
set -euo pipefail
model=${1:?usage: bench_contention.sh MODEL_DIR | CONFIG.json}
short=${SHORT:-30000}
tpgen=${TPGEN:-build/bin/tpgen}
runs=${RUNS:-5}
busy=${BUSY:-2}
flags=${FLAGS:---weights int8 --batch 1}
threads=${THREADS:-$(getconf _NPROCESSORS_ONLN)}
read -r -a policies <<< "${POLICIES:-spin short passive}"
for pol in "${policies[@]}"; do
  case $pol in spin|short|passive) ;; *) echo "bench_contention.sh: POLICIES: unknown $pol (spin, short, passive)" >&2; exit 2;; esac
done
[ -x "$tpgen" ] || { echo "bench_contention.sh: $tpgen is not executable (TPGEN=...)" >&2; exit 2; }
if [[ $model == *.json ]]; then
  [ -f "$model" ] || { echo "bench_contention.sh: no file $model" >&2; exit 2; }
  src=(--config "$model" --random-weights)
else
  [ -e "$model/config.json" ] || { echo "bench_contention.sh: $model has no config.json" >&2; exit 2; }
  src=(--model "$model")
fi
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
pids=()
stop_load() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; pids=(); }
trap stop_load EXIT
start_load() { for _ in $(seq "$busy"); do (while :; do :; done) & pids+=($!); done; sleep 1; }
step_ms() { # $1: spin|short|passive
  local env=(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT)
  [ "$1" = spin ] && env+=(GOMP_SPINCOUNT=300000)
  [ "$1" = short ] && env+=(GOMP_SPINCOUNT="$short")
  [ "$1" = passive ] && env+=(OMP_WAIT_POLICY=PASSIVE)
  # shellcheck disable=SC2086
  "${env[@]}" "$tpgen" bench "${src[@]}" --backend cpu --threads "$threads" --prefill 0 --json $flags \
    | sed -n 's/.*"ms_per_step": \([0-9.]*\).*/\1/p' | head -1
}
declare -A res
for r in $(seq "$runs"); do
  for load in quiet busy; do
    [ "$load" = busy ] && start_load
    order=("${policies[@]}")
    if [ $((r % 2)) = 0 ]; then order=(); for ((i = ${#policies[@]} - 1; i >= 0; i--)); do order+=("${policies[i]}"); done; fi
    for pol in "${order[@]}"; do
      ms=$(step_ms "$pol")
      [ -n "$ms" ] || { echo "bench_contention.sh: no ms_per_step from tpgen bench" >&2; exit 1; }
      res[$pol.$load]+="$ms "
      echo "run $r/$runs $load $pol: $ms ms/step (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    done
    stop_load
  done
done
echo "$(date -u +%F) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $threads threads, tpgen bench $flags," \
     "median of $runs alternating runs, $busy busy background processes; load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| OpenMP waiting | quiet ms/step | with $busy busy ms/step | busy / quiet |"
echo "| --- | ---: | ---: | ---: |"
rows=() # for RECORD: policy, medians, the runs
for pol in "${policies[@]}"; do
  q=$(tr ' ' '\n' <<< "${res[$pol.quiet]}" | grep . | median)
  b=$(tr ' ' '\n' <<< "${res[$pol.busy]}" | grep . | median)
  rows+=("$pol" "$q" "$b" "${res[$pol.quiet]}" "${res[$pol.busy]}")
  awk -v p="$pol" -v s="$short" -v q="$q" -v b="$b" 'BEGIN { printf "| %s | %.2f | %.2f | %.2fx |\n",
      p == "spin" ? "spin (GOMP_SPINCOUNT=300000, the libgomp default)" : p == "short" ? "short spin (GOMP_SPINCOUNT=" s (s == 30000 ? ", the tpgen default)" : ")") : "passive (OMP_WAIT_POLICY=PASSIVE)", q, b, b / q }'
done
[ -n "${RECORD:-}" ] || exit 0
python3 - "$(dirname "$0")" "$RECORD" "$short" "$busy" "$runs" "$threads" "$model" "$flags" "${rows[@]}" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import perf_record
here, path, short, busy, runs, threads, model, flags, *r = sys.argv[1:]
names = {"spin": "spin (GOMP_SPINCOUNT=300000, libgomp's default)",
         "short": f"short spin (GOMP_SPINCOUNT={short}" + (", tpgen's default)" if short == "30000" else ")"),
         "passive": "passive (OMP_WAIT_POLICY=PASSIVE)"}
rows = []
for i in range(0, len(r), 5):
    pol, q, b, qs, bs = r[i:i + 5]
    rows.append((names[pol], [("quiet ms/step", float(q), "ms"), (f"+ {busy} busy loops ms/step", float(b), "ms"),
                              ("runs (quiet; busy)", ", ".join(qs.split()) + "; " + ", ".join(bs.split()), "")]))
cmd = f"RUNS={runs} BUSY={busy} SHORT={short} FLAGS=\"{flags}\" bash tools/bench/bench_contention.sh {model}"
perf_record.record_rows(path, "threading", "contention", rows, cmd, row_header="OpenMP waiting",
                        notes=f"tpgen bench {flags}, {threads} threads, median of {runs} alternating runs; "
                              f"{busy} busy shell loops beside it in the busy columns.")
PY
