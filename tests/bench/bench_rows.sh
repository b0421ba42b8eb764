#!/usr/bin/env bash
# tpgen bench on the tiny fixture (n_positions 128, CPU backend):
#   --json at TP 2 with --prefill 16,64,500: decode rows for --batch 1,3 with the read floor
#     (read_gb_per_s > 0, pct_read = 100 gb_per_s / read_gb_per_s) beside the copy figure, then
#     prefill rows for 16, 64 and 128 (500 is capped at n_positions), whose FLOPs per rank match
#     the formula computed here from config.json and the shard, tokens/s = tokens / time, and
#     pct_gemm = GFLOP/s over the GEMM probe's;
#   plain output at TP 2: the decode table has the %read-bw and %copy-bw columns, and the prefill
#     table its rows;
#   --prefill 0 at TP 1: decode rows only, with the read floor.
# usage: bench_rows.sh TPGEN MPIEXEC FIXTURE
set -euo pipefail
tpgen=$1 mpiexec=$2 fixture=$3
run() { local np=$1; shift; timeout 60 "$mpiexec" --oversubscribe --allow-run-as-root -np "$np" "$tpgen" bench \
        --model "$fixture" --batch 1,3 --context 16 --steps 4 --prefill-runs 2 --backend cpu --threads 1 "$@" 2>/dev/null; }
np=2
out=$(run $np --prefill 16,64,500 --json)
python3 - "$out" "$np" "$fixture/config.json" <<'PY'
import json, math, sys
out, tp, cfg = sys.argv[1], int(sys.argv[2]), json.load(open(sys.argv[3]))
rows = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
dec = [r for r in rows if r.get("kind") == "decode"]
pre = [r for r in rows if r.get("kind") == "prefill"]
assert len(dec) + len(pre) == len(rows), rows
assert [r["batch"] for r in dec] == [1, 3], dec
for r in dec:
    assert r["tp"] == tp and r["read_gb_per_s"] > 0 and r["copy_gb_per_s"] > 0 and r["gb_per_s"] > 0, r
    # gb_per_s is printed to 3 decimals: on a slow (loaded) run its rounding alone moves the ratio
    assert abs(r["pct_read"] - 100 * r["gb_per_s"] / r["read_gb_per_s"]) < 0.01 * r["pct_read"] + 0.01 + 0.06 / r["read_gb_per_s"], r
    assert abs(r["pct_copy"] - 100 * r["gb_per_s"] / r["copy_gb_per_s"]) < 0.01 * r["pct_copy"] + 0.01, r
    bytes_ = r["weight_bytes"] + r["kv_bytes"]
    assert abs(r["read_floor_ms"] - bytes_ / (r["read_gb_per_s"] * 1e9) * 1e3) < 1e-3 * r["read_floor_ms"] + 1e-4, r
assert [r["prefill_tokens"] for r in pre] == [16, 64, 128], pre
E, H, L, V = cfg["n_embd"], cfg["n_head"], cfg["n_layer"], cfg["vocab_size"]
I = cfg["n_inner"] or 4 * E
HD, Il, Vloc = E // tp, I // tp, math.ceil(V / tp)  # the tiny shapes divide evenly
for r in pre:
    n = r["prefill_tokens"]
    flops = L * (2 * n * E * (4 * HD + 2 * Il) + 4 * HD * n * (n + 1) / 2) + 2 * E * Vloc
    assert abs(r["gflop_per_rank"] - flops / 1e9) < 1e-3 * flops / 1e9 + 1e-4, (r, flops)
    assert r["tp"] == tp and r["ms"] > 0 and r["runs"] == 2 and r["chunk"] == 512, r
    assert abs(r["tokens_per_s"] - n / (r["ms"] / 1e3)) < 1e-2 * r["tokens_per_s"], r
    assert r["gemm_gflop_per_s"] > 0 and r["gemm_shape"] == [128, Il, E], r
    assert abs(r["pct_gemm"] - 100 * r["gflop_per_s"] / r["gemm_gflop_per_s"]) < 0.01 * r["pct_gemm"] + 0.01, r
print("bench --json TP=%d: decode rows with the read floor, prefill rows 16, 64, 128: ok" % tp)
PY
out=$(run 2)
echo "$out" | grep -Eq '^read bandwidth \(read-only sum of [0-9]+ MiB, 1 threads, best of 7\): [0-9.]+ GB/s per rank$' \
  || { echo "FAIL: no read bandwidth line in:"; echo "$out"; exit 1; }
echo "$out" | grep -Eq '^ +batch +context +ms/step +tokens/s +MB/rank/step +GB/s/rank +%read-bw +%copy-bw$' \
  || { echo "FAIL: decode header lacks %read-bw / %copy-bw:"; echo "$out"; exit 1; }
[ "$(echo "$out" | grep -Ec '^ +[13] +16 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+% +[0-9.]+%$')" = 2 ] \
  || { echo "FAIL: decode rows:"; echo "$out"; exit 1; }
echo "$out" | grep -Eq '^GEMM \(backend matmul, T=128 N=128 K=64, median of 5\): [0-9.]+ GFLOP/s per rank$' \
  || { echo "FAIL: no GEMM line:"; echo "$out"; exit 1; }
[ "$(echo "$out" | grep -Ec '^ +128 +512 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+% +([0-9.]+%|n/a)$')" = 1 ] \
  || { echo "FAIL: prefill row for 128 tokens (defaults 128,512,2048 capped at 128):"; echo "$out"; exit 1; }
echo "bench plain TP=2: read and copy columns, GEMM line, prefill row: ok"
out=$(run 1 --prefill 0 --json)
python3 -c 'import json,sys; r=[json.loads(l) for l in sys.argv[1].splitlines() if l.startswith("{")]; assert [x["kind"] for x in r]==["decode"]*2 and all(x["tp"]==1 and x["read_gb_per_s"]>0 and x["pct_read"]>0 for x in r), r' "$out"
echo "bench --prefill 0: decode rows only: ok"
