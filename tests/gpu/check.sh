#!/usr/bin/env bash
# One prepared run for a machine with one GPU (an H200 is the target): build, GPU tests, HF
# parity at TP = 1 and TP = 2 (two ranks sharing the GPU through --comm mpi), compute-sanitizer
# (memcheck and racecheck on the GPU op tests, memcheck on a short TP = 2 generate), then the
# decode benchmark of a random CodeGen-16B-shaped F16 model next to the measured copy bandwidth.
# SANITIZE=0 skips the compute-sanitizer stages.
# Finishes within 8 minutes: every stage runs under `timeout`, sized from what is left of a
# 460 s budget (BUDGET=seconds to change it), with time kept back for the benchmark. The
# summary table is printed last; everything is also written to $OUT (or build/check) when set.
#
# usage: tests/gpu/check.sh            (from anywhere; works in the repository root)
set -uo pipefail
cd "$(dirname "$0")/../.."
T0=$(date +%s)
BUDGET=${BUDGET:-460}
BUILD=${BUILD:-build}
RES=${OUT:-$BUILD/check}
mkdir -p "$RES"
LOG="$RES/check.log"
: > "$LOG"
declare -a SUMMARY=()

elapsed() { echo $(( $(date +%s) - T0 )); }
# stage NAME CAP_SECONDS RESERVE_SECONDS CMD...: runs CMD under timeout min(CAP, left - RESERVE)
stage() {
    local name=$1 cap=$2 reserve=$3; shift 3
    local left=$(( BUDGET - $(elapsed) - reserve ))
    local t=$(( cap < left ? cap : left ))
    if (( t < 10 )); then
        SUMMARY+=("$(printf '%-28s SKIPPED (out of time budget)' "$name")")
        echo "=== $name: skipped, out of time" | tee -a "$LOG"
        return 124
    fi
    echo "=== $name (timeout ${t}s, at $(elapsed)s)" | tee -a "$LOG"
    local s=$(date +%s)
    timeout --kill-after=5 "$t" "$@" 2>&1 | tee -a "$LOG"
    local rc=${PIPESTATUS[0]}
    local d=$(( $(date +%s) - s ))
    local what=ok
    if (( rc == 124 || rc == 137 )); then what="TIMED OUT"; elif (( rc != 0 )); then what="FAILED (rc $rc)"; fi
    SUMMARY+=("$(printf '%-28s %-16s %4ds' "$name" "$what" "$d")")
    return $rc
}

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv 2>&1 | tee -a "$LOG" || true
JOBS=$(( $(nproc) < 16 ? $(nproc) : 16 ))

# Preflight: what the build needs, said plainly if missing. NCCL may come only as the Python
# wheel nvidia-nccl-cu13 (headers and library under site-packages): point CMake at it.
export PATH="$PATH:/usr/local/cuda/bin"
MISSING=()
for tool in cmake nvcc mpirun pkg-config python3; do command -v "$tool" > /dev/null || MISSING+=("$tool"); done
for pc in openblas libpcre2-8; do pkg-config --exists "$pc" 2> /dev/null || MISSING+=("$pc (pkg-config)"); done
CMAKE_EXTRA=()
if [ ! -e /usr/local/cuda/include/nccl.h ] && [ ! -e /usr/include/nccl.h ]; then
    NCCL_DIR=$(python3 -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2> /dev/null || true)
    if [ -n "$NCCL_DIR" ] && [ -e "$NCCL_DIR/include/nccl.h" ]; then
        NCCL_SO=$(ls "$NCCL_DIR"/lib/libnccl.so* 2> /dev/null | head -1)
        CMAKE_EXTRA+=("-DNCCL_INCLUDE=$NCCL_DIR/include" "-DNCCL_LIB=$NCCL_SO")
        export LD_LIBRARY_PATH="$NCCL_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        echo "NCCL from the Python wheel: $NCCL_DIR" | tee -a "$LOG"
    else
        MISSING+=("nccl.h (NCCL)")
    fi
fi
if (( ${#MISSING[@]} )); then
    echo "preflight: missing ${MISSING[*]}; the configure step below will say which it needs" | tee -a "$LOG"
    SUMMARY+=("$(printf '%-28s missing: %s' "preflight" "${MISSING[*]}")")
fi

stage "configure" 60 150 cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTPGEN_CUDA=ON "${CMAKE_EXTRA[@]}"
if ! stage "build (-j$JOBS)" 240 150 cmake --build "$BUILD" -j"$JOBS"; then
    printf '%s\n' "${SUMMARY[@]}"
    echo "build failed: nothing else to run" | tee -a "$LOG"
    exit 1
fi
stage "ctest -L '^gpu$'" 150 150 ctest --test-dir "$BUILD" -L '^gpu$' --output-on-failure --timeout 140 # not gpu_emu
stage "parity TP=1 bf16 --comm mpi" 100 120 tests/gpu/parity.sh --np 1 --dtype bf16 --comm mpi --build "$BUILD" --timeout 60
stage "parity TP=2 bf16 --comm mpi" 130 110 tests/gpu/parity.sh --np 2 --dtype bf16 --comm mpi --build "$BUILD" --timeout 60
if (( $(elapsed) < 280 )); then
    stage "parity TP=1 f16 --comm mpi" 80 110 tests/gpu/parity.sh --np 1 --dtype f16 --comm mpi --build "$BUILD" --timeout 60
fi

# compute-sanitizer: memcheck and racecheck on the op tests (fixed seed), memcheck on a short
# TP = 2 generate (two ranks on the GPU, --comm mpi). Each prints an "ERROR SUMMARY" /
# "RACECHECK SUMMARY" line per process; --error-exitcode makes any finding fail the stage.
declare -a SAN=()
SANITIZER=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2> /dev/null || true)
san_stage() { # san_stage NAME CAP RESERVE CMD...: runs CMD, records the sanitizer's summary lines
    local name=$1 from
    from=$(wc -l < "$LOG")
    stage "$@"
    local rc=$?
    local found
    found=$(tail -n +"$((from + 1))" "$LOG" | grep -E '(ERROR|RACECHECK) SUMMARY' | sed 's/^=* *//' | sort | uniq -c |
            awk '{$1=$1" x"; print}' | paste -sd ';' -)
    local what=ok
    if (( rc == 124 || rc == 137 )); then what="TIMED OUT"; elif (( rc != 0 )); then what="FAILED (rc $rc)"; fi
    SAN+=("$(printf '%-40s %-14s %s' "$name" "$what" "${found:-(no summary line)}")")
}
if [ "${SANITIZE:-1}" != 0 ] && [ -n "$SANITIZER" ]; then
    MPI_ROOT=()
    mpirun --version 2>&1 | grep -q "Open MPI" && MPI_ROOT=(--oversubscribe --allow-run-as-root)
    san_stage "memcheck: test_cuda_ops" 90 100 "$SANITIZER" --tool memcheck --error-exitcode 3 \
        "$BUILD/tests/test_cuda_ops" 1234
    san_stage "racecheck: test_cuda_ops" 90 100 "$SANITIZER" --tool racecheck --error-exitcode 3 \
        "$BUILD/tests/test_cuda_ops" 1234
    san_stage "memcheck: TP=2 generate (--comm mpi)" 60 95 mpirun "${MPI_ROOT[@]}" -np 2 "$SANITIZER" --tool memcheck \
        --error-exitcode 3 "$BUILD/bin/tpgen" generate --model tests/data/heads24-f16-sharded --prompt-ids 1,2,3,4,5 \
        --max-new-tokens 4 --backend cuda --dtype bf16 --comm mpi --no-cuda-graphs
elif [ "${SANITIZE:-1}" != 0 ]; then
    SAN+=("compute-sanitizer not found: not run")
fi

stage "copy bandwidth (1 GiB D2D)" 30 90 "$BUILD/bin/bw_copy" --json > /dev/null
BW_JSON=$(grep '^{"device"' "$LOG" | tail -1)
stage "bench codegen-16B f16" 160 5 "$BUILD/bin/tpgen" bench --config configs/codegen-16B.json --random-weights \
    --backend cuda --dtype f16 --batch 1,8,32 --context 512 --steps 32 --json
grep '^{"batch"' "$LOG" > "$RES/bench.jsonl" || true
grep '^{"prefill_tokens"' "$LOG" > "$RES/prefill.jsonl" || true
# the MPI communicator's staged all-reduce of device buffers, 2 ranks sharing the GPU, sums checked
stage "bench-comm TP=2 cuda mpi" 30 5 mpirun --oversubscribe --allow-run-as-root -np 2 "$BUILD/bin/tpgen" \
    bench-comm --backend cuda --comm mpi --sizes 8:16M --iters 5 --json
grep '^{"op": "allreduce"' "$LOG" > "$RES/bench_comm.jsonl" || true
echo "$BW_JSON" > "$RES/bw_copy.json"

echo
echo "=== summary ($(elapsed)s of ${BUDGET}s)"
printf '%s\n' "${SUMMARY[@]}"
if (( ${#SAN[@]} )); then
    echo
    echo "compute-sanitizer (tool: target, result, summary lines per process)"
    printf '%s\n' "${SAN[@]}"
fi
python3 - "$RES/bw_copy.json" "$RES/bench.jsonl" <<'PY' | tee "$RES/table.txt"
import json, sys
try:
    bw = json.loads(open(sys.argv[1]).read().strip() or "{}")
except ValueError:
    bw = {}
rows = []
for line in open(sys.argv[2]):
    try:
        rows.append(json.loads(line))
    except ValueError:
        pass
copy = bw.get("gb_per_s", 0.0)
print()
print("decode, CodeGen-16B shape, random F16 weights, context 512, 1 GPU (%s)" % bw.get("device", "?"))
print("copy bandwidth (cudaMemcpy D2D 1 GiB, read+write, median of 10): %.0f GB/s" % copy)
print("%6s %14s %10s %9s %9s %10s" % ("batch", "ms/token/seq", "tokens/s", "GB/s", "% copy", "% 4.8TB/s"))
for r in rows:
    g = r.get("gb_per_s", 0.0)
    print("%6d %14.3f %10.1f %9.0f %8.1f%% %9.1f%%" % (r["batch"], r["ms_per_step"], r["tokens_per_s"], g,
          100.0 * g / copy if copy else 0.0, 100.0 * g / 4800.0))
if not rows:
    print("(no benchmark rows: see check.log)")
print("(ms/token/seq = one decode step: each sequence of the batch gets one token; GB/s = (weights + KV read) / step)")
PY
if printf '%s\n' "${SUMMARY[@]}" | grep -q -E 'FAILED|TIMED OUT'; then exit 1; fi
exit 0
