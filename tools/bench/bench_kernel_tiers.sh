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
#                                    [--prefill P] [--build DIR] [--out DIR] [--dtypes f32,bf16,int8]
#                                    [--config FILE] [--no-load-times] [--check] [--record FILE.jsonl]
#                                    [--tiers avx2,avx512,... (of those this CPU runs)] [--batch 1,8,32]
#                                    [--model DIR (instead of the 350M config; a smoke test)]
# --check (issue 43): for each dtype, at batch 1 and 8, the measured choice's median against the
# fastest forced tier's; exits 1 when one is more than 5% slower (OUT/check.md says which).
# --record appends the check's cells to FILE (tools/bench/perf_record.py; docs/bench/cpu-tiers.jsonl).
# Writes OUT/raw.jsonl (one line per run: config and tpgen's JSON rows) and prints the table
# (also OUT/table.md). The tiers are the TPGEN_CPU_ISA values this CPU runs (kernels/cpu/cpu_isa.h).
set -euo pipefail
cmdline="bash tools/bench/bench_kernel_tiers.sh $*" # for --record, before the parsing shifts them away

threads=$(nproc)
runs=5
context=96
steps=16
prefill=512
build=build
out=bench-kernel-tiers
model_args=(--config configs/codegen-350M.json --random-weights)
dtypes=(f32 bf16 int8)
check=0
record=
load_times=1
only_tiers=
batch=1,8,32
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
    --config) model_args=(--config "$2" --random-weights); shift 2 ;;
    --dtypes) IFS=, read -r -a dtypes <<< "$2"; shift 2 ;;
    --check) check=1; shift ;;
    --record) record=$2; shift 2 ;;
    --no-load-times) load_times=0; shift ;;
    --tiers) only_tiers=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
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
if [ -n "$only_tiers" ]; then
  keep=()
  for t in "${tiers[@]}"; do [[ ",$only_tiers," == *",$t,"* ]] && keep+=("$t"); done
  tiers=("${keep[@]}")
fi
tiers+=(measured)
configs=()
for d in "${dtypes[@]}"; do for t in "${tiers[@]}"; do configs+=("$d:$t"); done; done
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), threads $threads, tiers ${tiers[*]}, $runs runs" >&2

run_one() { # dtype tier -> one JSON line appended to raw
  local d=$1 t=$2 dflags=() env=(env -u TPGEN_CPU_ISA -u TPGEN_INT8_ISA TPGEN_KERNEL_CACHE="$cache")
  case $d in bf16) dflags=(--dtype bf16) ;; int8) dflags=(--weights int8) ;; int4) dflags=(--weights int4) ;; esac
  [ "$t" = measured ] || env+=(TPGEN_CPU_ISA="$t")
  local rows
  rows=$("${env[@]}" "$tpgen" bench "${model_args[@]}" --backend cpu --threads "$threads" "${dflags[@]}" \
         --batch "$batch" --context "$context" --steps "$steps" --prefill "$prefill" --prefill-runs 1 --json 2>/dev/null |
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
for ((r = 0; r < 3 * load_times; r++)); do
  rm -f "$cache"
  loads+=("{\"forced\": $(load_time TPGEN_CPU_ISA="${tiers[-2]}" TPGEN_KERNEL_CACHE="$cache"), \"measuring\": $(
    load_time TPGEN_KERNEL_CACHE="$cache"), \"cached\": $(load_time TPGEN_KERNEL_CACHE="$cache")}")
done
[ ${#loads[@]} -eq 0 ] || echo "{\"load_int8_s\": [$(IFS=,; echo "${loads[*]}")]}" >> "$raw"

python3 - "$raw" "$out/table.md" "$prefill" "$check" "$record" "$cmdline" "$threads" "$runs" "$context" \
  "${model_args[*]}" <<'EOF'
import json, os, statistics, sys
raw, table, prefill = sys.argv[1], sys.argv[2], int(sys.argv[3])
check, record, cmdline, threads, runs, context, model = sys.argv[4] == "1", sys.argv[5], sys.argv[6], *sys.argv[7:]
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

# --check: the measured choice against the fastest forced tier, per dtype, batch 1 and 8
verdict, cells, failed = [], [], False
for d in dict.fromkeys(d for d, _ in res):
    for b in ("b1", "b8"):
        forced = {t: statistics.median(r[b]) for (dd, t), r in res.items() if dd == d and t != "measured" and r[b]}
        meas = res.get((d, "measured"), {}).get(b)
        if not forced or not meas:
            continue
        best = min(forced, key=forced.get)
        m = statistics.median(meas)
        ratio = m / forced[best]
        ok = ratio <= 1.05
        failed |= not ok
        verdict.append("%s batch %s: measured %.2f ms, fastest forced %s %.2f ms: %.3fx %s"
                       % (d, b[1:], m, best, forced[best], ratio, "ok" if ok else "FAIL (over 1.05x)"))
        cells.append({"row": "%s, batch %s" % (d, b[1:]), "metric": "measured vs fastest forced", "value": round(m, 2),
                      "unit": "ms", "ratio": round(ratio, 3), "reference": {"row": best, "value": round(forced[best], 2)},
                      "runs": sorted(meas), "text": "%.2f vs %s %.2f (%.3fx)" % (m, best, forced[best], ratio)})
if check:
    open(os.path.join(os.path.dirname(table), "check.md"), "w").write("\n".join(verdict) + "\n")
    print("\n".join(["", "default (measured) vs the fastest forced tier:"] + verdict))
if record and cells:
    sys.path.insert(0, os.path.join(os.getcwd(), "tools", "bench"))
    import perf_record
    perf_record.record(record, "cpu-tiers", "default-vs-forced", cells, command=cmdline,
                       row_header="dtype, batch",
                       notes="%s, %s threads, TP 1; decode at context %s; medians of %s runs alternating every "
                             "configuration; 'measured' = TPGEN_CPU_ISA unset, each shape's kernel chosen at load."
                             % (model, threads, context, runs))
sys.exit(1 if check and failed else 0)
EOF
