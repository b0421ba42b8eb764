#!/usr/bin/env bash
# tpgen bench-comm on N ranks (CPU backend, MPI communicator):
#   exact: every dtype (f32, f16, bf16) at every power-of-two size from 4 B to 1 MiB (the largest
#     spans several check chunks), #wrong 0 in every row, exit status 0; sizes double from MIN;
#     count = bytes / element size; algbw = bytes / time; busbw = algbw * 2(n-1)/n;
#   perturb R: TPGEN_BENCH_COMM_PERTURB=R adds 1 to one input of rank R, so every row must show
#     #wrong > 0, the job must exit non-zero and name the wrong elements on stderr.
# usage: comm.sh exact|perturb TPGEN MPIEXEC NP
set -euo pipefail
mode=$1 tpgen=$2 mpiexec=$3 np=$4
run() { timeout $((60 * ${TPGEN_TIMEOUT_SCALE:-1})) "$mpiexec" --oversubscribe --allow-run-as-root -np "$np" "$tpgen" bench-comm --sizes 4:1M \
        --iters 3 --warmup 1 --backend cpu --threads 1 "$@"; }
err=$(mktemp)
trap 'rm -f "$err"' EXIT
rc=0
if [ "$mode" = perturb ]; then
  out=$(TPGEN_BENCH_COMM_PERTURB=$((np - 1)) run --json 2>"$err") || rc=$?
else
  out=$(run --json 2>"$err") || rc=$?
fi
python3 - "$mode" "$np" "$rc" "$out" "$err" <<'PY'
import json, sys
mode, np_, rc, out, errf = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
err = open(errf).read()
rows = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
want = [(dt, 1 << k) for dt in ("f32", "f16", "bf16") for k in range(2, 21)]
got = [(r["dtype"], r["size_bytes"]) for r in rows]
# f16/bf16 at 4 bytes are 2 elements; f32 at 4 bytes is 1: every size holds whole elements
assert got == want, (got, want)
for r in rows:
    es = 4 if r["dtype"] == "f32" else 2
    assert r["op"] == "allreduce" and r["tp"] == np_ and r["comm"] == "mpi" and r["backend"] == "cpu", r
    assert r["count"] == r["size_bytes"] // es and r["iters"] == 3 and r["warmup"] == 1, r
    assert r["time_us"] > 0, r
    algbw = r["size_bytes"] / (r["time_us"] * 1e-6) / 1e9
    assert abs(r["algbw_gb_per_s"] - algbw) <= 1e-3 * algbw + 1e-4, (r, algbw)
    busbw = r["algbw_gb_per_s"] * 2 * (np_ - 1) / np_
    assert abs(r["busbw_gb_per_s"] - busbw) <= 1e-3 * busbw + 1e-4, (r, busbw)
if mode == "exact":
    bad = [r for r in rows if r["wrong"] != 0]
    assert not bad, ("sums not exact", bad)
    assert rc == 0, ("exit status", rc, err)
    print("bench-comm TP=%d: %d rows, all sums exact" % (np_, len(rows)))
else:
    clean = [r for r in rows if r["wrong"] == 0]
    assert not clean, ("a perturbed input went unnoticed", clean)
    assert rc != 0 and rc not in (124, 137), ("exit status", rc)
    assert "wrong element" in err, err
    print("bench-comm TP=%d with a perturbed input on rank %d: every row #wrong > 0, exit %d" % (np_, np_ - 1, rc))
PY
