#!/usr/bin/env bash
# Decode under contention: `tpgen bench` ms/step (int8 weights, batch 1 by default) with the
# machine quiet and with BUSY CPU-bound background processes, for OpenMP wait policies:
#   spin:    GOMP_SPINCOUNT=300000, libgomp's default (what tpgen ran with before util/threads.h)
#   short:   GOMP_SPINCOUNT=$SHORT (10000 unless set), a short spin before sleeping
#   passive: tpgen's default now (OMP_WAIT_POLICY=PASSIVE, set by tpgen at start)
# The cases alternate within each run (their order reversed every other run), so drifts hit all
# alike; medians of RUNS.
#
#   bash tools/bench/bench_contention.sh MODEL_DIR      (an HF CodeGen checkpoint; tools/fixtures/make.py random)
#   bash tools/bench/bench_contention.sh CONFIG.json    (random weights of that shape: configs/*.json)
#   env: TPGEN=build/bin/tpgen RUNS=5 BUSY=2 FLAGS="--weights int8 --batch 1" THREADS=(all cores)
#        POLICIES="spin short passive" SHORT=10000
#
# The background load is BUSY shell loops (`while :; do :; done`), started and ended by PID here.
set -euo pipefail
model=${1:?usage: bench_contention.sh MODEL_DIR | CONFIG.json}
short=${SHORT:-10000}
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
for pol in "${policies[@]}"; do
  q=$(tr ' ' '\n' <<< "${res[$pol.quiet]}" | grep . | median)
  b=$(tr ' ' '\n' <<< "${res[$pol.busy]}" | grep . | median)
  awk -v p="$pol" -v s="$short" -v q="$q" -v b="$b" 'BEGIN { printf "| %s | %.2f | %.2f | %.2fx |\n",
      p == "spin" ? "spin (GOMP_SPINCOUNT=300000, the old default)" : p == "short" ? "short spin (GOMP_SPINCOUNT=" s ")" : "passive (tpgen default now)", q, b, b / q }'
done
