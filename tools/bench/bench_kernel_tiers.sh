#!/usr/bin/env bash
# Per CPU kernel tier, forced with TPGEN_CPU_ISA, and for the choice measured at load (issue 35):
# ms per decode step at batch 1, 8 and 32 and ms for a 512-token prefill (batch 8: where the f32
# rows kernel and the GEMVs of 2-16 tokens run), for f32, bf16 and int8 on
# the CodeGen-350M shape with random weights (tpgen bench --random-weights, docs/BENCHMARKING.md),
# the median of RUNS runs that alternate the configurations (run r visits them in an order
# rotated by r, so drift on the machine spreads over all of them). Also the process wall time of
# a minimal bench (load + 1 step) forced, measuring with an empty cache, and reading the cache:
# the load-time cost of the measurement. Run on a quiet machine; nothing else should run.
#
# usage: tools/bench/bench_kernel_tiers.sh [--threads N] [--runs R] [--context C] [--steps S]
#                                    [--prefill P] [--build DIR] [--out DIR]
#                                    [--model DIR (instead of the 350M config; a smoke test)]
# Writes OUT/raw.jsonl (one line per run: config and tpgen's JSON rows) and prints the table
# (also OUT/table.md). The tiers are the TPGEN_CPU_ISA values this CPU runs (kernels/cpu/cpu_isa.h).
set -euo pipefail

threads=$(nproc)
runs=5
context=96
steps=16
prefill=512
build=build
out=bench-kernel-tiers
model_args=(--config configs/codegen-350M.json --random-weights)
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --context) context=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --prefill) prefill=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --model) model_args=(--model "$2"); shift 2 ;;
    *) echo "bench_kernel_tiers.sh: unknown argument $1 (see the usage at the top of this file)" >&2; exit 2 ;;
  esac
done
tpgen=$build/bin/tpgen
[ -x "$tpgen" ] || { echo "bench_kernel_tiers.sh: no $tpgen (build first, or --build DIR)" >&2; exit 2; }
mkdir -p "$out"
raw=$out/raw.jsonl
: > "$raw"
cache=$(mktemp -d)/cpu-kernels.tsv # the measured configuration's cache: fresh for this script
trap 'rm -rf "$(dirname "$cache")"' EXIT

# The tiers this CPU runs (cpu_isa.c: avx512 = F + BW + VL; avxvnni = AVX2 + AVX-VNNI; amx = AVX-512 +
# AMX-TILE + AMX-INT8).
flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
has() { for f in "$@"; do [[ " $flags " == *" $f "* ]] || return 1; done; }
tiers=(c)
has avx2 fma && tiers+=(avx2)
has avx2 fma avx_vnni && tiers+=(avxvnni)
has avx2 fma avx512f avx512bw avx512vl && tiers+=(avx512)
has avx2 fma avx512f avx512bw avx512vl amx_tile amx_int8 && tiers+=(amx)
tiers+=(measured)
dtypes=(f32 bf16 int8)
configs=()
for d in "${dtypes[@]}"; do for t in "${tiers[@]}"; do configs+=("$d:$t"); done; done
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), threads $threads, tiers ${tiers[*]}, $runs runs" >&2

run_one() { # dtype tier -> one JSON line appended to raw
  local d=$1 t=$2 dflags=() env=(env -u TPGEN_CPU_ISA -u TPGEN_INT8_ISA TPGEN_KERNEL_CACHE="$cache")
  case $d in bf16) dflags=(--dtype bf16) ;; int8) dflags=(--weights int8) ;; esac
  [ "$t" = measured ] || env+=(TPGEN_CPU_ISA="$t")
  local rows
  rows=$("${env[@]}" "$tpgen" bench "${model_args[@]}" --backend cpu --threads "$threads" "${dflags[@]}" \
         --batch 1,8,32 --context "$context" --steps "$steps" --prefill "$prefill" --prefill-runs 1 --json 2>/dev/null |
         grep '^{' | paste -sd, -)
  echo "{\"dtype\": \"$d\", \"tier\": \"$t\", \"rows\": [$rows]}" >> "$raw"
}

# the measured configuration measures once (its first run, at load), then reads the cache
n=${#configs[@]}
for ((r = 0; r < runs; r++)); do
  for ((i = 0; i < n; i++)); do
    c=${configs[$(((i + r) % n))]}
    echo "run $((r + 1))/$runs: ${c%%:*} ${c##*:}" >&2
    run_one "${c%%:*}" "${c##*:}"
  done
done

# load-time cost of the measurement: wall seconds of a minimal bench (load + 1 step, no prefill)
load_time() { # env assignments...
  local t0 t1
  t0=$(date +%s.%N)
  env -u TPGEN_CPU_ISA "$@" "$tpgen" bench "${model_args[@]}" --backend cpu --threads "$threads" --weights int8 \
      --batch 1 --context 8 --steps 1 --prefill 0 >/dev/null 2>&1
  t1=$(date +%s.%N)
  awk "BEGIN { printf \"%.3f\", $t1 - $t0 }"
}
loads=()
for ((r = 0; r < 3; r++)); do
  rm -f "$cache"
  loads+=("{\"forced\": $(load_time TPGEN_CPU_ISA="${tiers[-2]}" TPGEN_KERNEL_CACHE="$cache"), \"measuring\": $(
    load_time TPGEN_KERNEL_CACHE="$cache"), \"cached\": $(load_time TPGEN_KERNEL_CACHE="$cache")}")
done
echo "{\"load_int8_s\": [$(IFS=,; echo "${loads[*]}")]}" >> "$raw"

python3 - "$raw" "$out/table.md" "$prefill" <<'EOF'
import json, statistics, sys
raw, table, prefill = sys.argv[1], sys.argv[2], int(sys.argv[3])
res, loads = {}, []
for line in open(raw):
    j = json.loads(line)
    if "load_int8_s" in j:
        loads = j["load_int8_s"]
        continue
    k = (j["dtype"], j["tier"])
    r = res.setdefault(k, {"b1": [], "b8": [], "b32": [], "pf": [], "kern": set()})
    for row in j["rows"]:
        if row["kind"] == "decode" and row["batch"] in (1, 8, 32):
            r["b%d" % row["batch"]].append(row["ms_per_step"])
            r["kern"].add("b%d %s" % (row["batch"], row["kernels"]["matmul"]))
        elif row["kind"] == "prefill" and row["prefill_tokens"] == prefill:
            r["pf"].append(row["ms"])
            r["kern"].add("pf " + row["kernels"]["matmul"])
med = lambda v: "%.2f" % statistics.median(v) if v else "-"
lines = ["| dtype | TPGEN_CPU_ISA | decode b1 ms | decode b8 ms | decode b32 ms | prefill %d ms | runs | matmul kernels |"
         % prefill, "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
for (d, t), r in res.items():
    lines.append("| %s | %s | %s | %s | %s | %s | %d | %s |" % (d, t if t != "measured" else "(unset: measured)",
                 med(r["b1"]), med(r["b8"]), med(r["b32"]), med(r["pf"]), len(r["b1"]), ", ".join(sorted(r["kern"]))))
if loads:
    lines.append("")
    lines.append("int8 load + 1 step, wall s (median of %d): forced %.2f, measuring (empty cache) %.2f, cached %.2f"
                 % (len(loads), statistics.median(l["forced"] for l in loads),
                    statistics.median(l["measuring"] for l in loads), statistics.median(l["cached"] for l in loads)))
open(table, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
