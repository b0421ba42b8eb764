#!/usr/bin/env bash
# tpgen-bench.sbatch under Slurm, CPU, TP 2 through srun --mpi=pmix: the job serves the tiny
# random model, runs a 2-rate sweep with tools/bench/bench_serving.py (8 random-id prompts, rates inf
# and 8) and leaves bench.json (2 objects, completed 8, failed 0), bench.png, bench.log and
# server.log (the ready line) in OUT_DIR; it exits 0, and no tpgen process of the job is left
# (the server drained on srun's SIGTERM). A model that does not load: the job fails, non-zero,
# and says the server did not print its ready line.
# usage: sbatch_bench.sh TPGEN FIXTURE TOKDIR WORKDIR   (SLURM_CONF: the test cluster)
source "$(dirname "$0")/lib.sh"
tpgen=$1 fixture=$2 tokdir=$3 work=$4
mkdir -p "$work"
model="$work/model"
make_model "$fixture" "$tokdir" "$model"
out="$work/out"
rm -rf "$out"
cd "$work"
TPGEN_BIN="$tpgen" TPGEN_BENCH_SERVING="$repo/tools/bench/bench_serving.py" \
  submit "$work/bench.out" "$repo/launcher/tpgen-bench.sbatch" "$model" "$out" \
  --dataset random:16:8 --vocab-size 1000 --num-prompts 8 --ignore-eos --sweep inf,8
[ "$rc" = 0 ] || { echo "FAIL: job $job exited $rc:"; cat "$work/bench.out" "$out"/*.log; exit 1; }
for f in bench.json bench.png bench.log server.log; do
  [ -s "$out/$f" ] || { echo "FAIL: job $job left no $out/$f"; cat "$work/bench.out"; exit 1; }
done
grep -q "^tpgen: serving model on http://127.0.0.1:" "$out/server.log" ||
  { echo "FAIL: no ready line in $out/server.log"; cat "$out/server.log"; exit 1; }
python3 - "$out/bench.json" <<'PY' || { cat "$work/bench.out"; exit 1; }
import json, sys
runs = json.load(open(sys.argv[1]))
keys = {"completed", "failed", "duration_s", "request_throughput", "input_token_throughput",
        "output_token_throughput", "ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "config"}
assert isinstance(runs, list) and len(runs) == 2, f"want 2 sweep points, got {runs!r:.200}"
for r, rate in zip(runs, ["inf", 8.0]):
    assert set(r) == keys, f"keys {sorted(r)}"
    assert r["completed"] == 8 and r["failed"] == 0, f"rate {rate}: completed {r['completed']} failed {r['failed']}"
    assert r["config"]["request_rate"] == rate, r["config"]
    assert abs(r["output_token_throughput"] * r["duration_s"] - 64) < 1e-6, "8 x 8 output tokens"
print("bench.json: 2 rates, 8 of 8 completed each")
PY
[ "$(head -c 4 "$out/bench.png" | od -An -c | tr -d ' ')" = "211PNG" ] || { echo "FAIL: bench.png is not a PNG"; exit 1; }
left=$(ranks_of "$job" "$tpgen")
[ -z "$left" ] || { echo "FAIL: tpgen processes of job $job left: $left"; exit 1; }

# a model directory that does not load: the job fails and says so
TPGEN_BIN="$tpgen" TPGEN_BENCH_SERVING="$repo/tools/bench/bench_serving.py" \
  submit "$work/bad.out" "$repo/launcher/tpgen-bench.sbatch" "$work/no-such-model" "$work/bad-out"
[ "$rc" != 0 ] || { echo "FAIL: job $job on a missing model exited 0"; cat "$work/bad.out"; exit 1; }
grep -q "the server did not print its ready line" "$work/bad.out" ||
  { echo "FAIL: job $job does not say the server never came up:"; cat "$work/bad.out"; exit 1; }
grep -q "no-such-model" "$work/bad.out" || { echo "FAIL: job $job does not name the model path:"; cat "$work/bad.out"; exit 1; }
echo "2 passed, 0 failed"
