#!/usr/bin/env bash
# tools/bench/bench_context.py end to end on the tiny demo config: two variants of one build
# (TPGEN_CPU_ATTN=c and the default), two contexts, one run: the table has one row per variant and
# dtype, one column per context and the ratio, numbers, and the attention kernel the variant ran
# (dot-f32-c under TPGEN_CPU_ATTN=c); --record writes one cell per row and column. Bad
# --build / --env / --dtypes / --record are refused naming the flag, before anything runs;
# --attention-only gives the same table from tests/bench_attention. No timing is asserted.
# usage: bench_context_smoke.sh BUILD_DIR WORKDIR
set -euo pipefail
build=$1 work=$2
root="$(cd "$(dirname "$0")/../.." && pwd)"
rm -rf "$work"
mkdir -p "$work"
python3 "$root/tools/bench/bench_context.py" --build "cur=$build" --env "attn-c:TPGEN_CPU_ATTN=c" --env "default:X_UNUSED=1" \
  --config "$root/configs/tiny-demo.json" --dtypes f32 --contexts 8,24 --steps 2 --runs 1 --threads 1 \
  --out "$work/out.json" --record "$work/rec.jsonl" > "$work/table.md" 2> "$work/stderr.txt" || {
  cat "$work/stderr.txt"; echo "FAIL: bench_context.py exited non-zero"; exit 1; }
cat "$work/table.md"
python3 - "$work/table.md" "$work/rec.jsonl" <<'PY'
import json, sys
md = [l for l in open(sys.argv[1]).read().splitlines() if l.startswith("|")]
def need(c, m):
    if not c:
        sys.exit("FAIL: " + m)
need(md[0] == "| build | dtype | attention kernel | context 8 ms | context 24 ms | 24 / 8 |", "header " + md[0])
rows = [[c.strip() for c in l.strip("|").split("|")] for l in md[2:]]
need([r[0] for r in rows] == ["cur attn-c", "cur default"], f"rows {rows}")
need(rows[0][2] == "dot-f32-c", f"TPGEN_CPU_ATTN=c ran {rows[0][2]}")
for r in rows:
    float(r[3]), float(r[4]), float(r[5].rstrip("x"))
recs = [json.loads(l) for l in open(sys.argv[2])]
need(len(recs) == 6 and {r["section"] for r in recs} == {"cpu-attention"}, f"{len(recs)} records")
print("ok: bench_context.py table and records")
PY
# --attention-only: tests/bench_attention of the build, the same table
python3 "$root/tools/bench/bench_context.py" --build "cur=$build" --config "$root/configs/tiny-demo.json" --dtypes f32,bf16 \
  --contexts 8,24 --runs 1 --threads 1 --attention-only > "$work/attn.md" 2> "$work/attn.err" || {
  cat "$work/attn.err"; echo "FAIL: bench_context.py --attention-only exited non-zero"; exit 1; }
cat "$work/attn.md"
[ "$(grep -c '^| cur | \(f32\|bf16\) | dot-' "$work/attn.md")" = 2 ] || { echo "FAIL: --attention-only rows"; exit 1; }
bad() { # message args...
  local msg=$1; shift
  if out=$(python3 "$root/tools/bench/bench_context.py" "$@" 2>&1); then echo "FAIL: accepted $*"; exit 1; fi
  grep -qF -- "$msg" <<< "$out" || { echo "FAIL: $* said: $out (want: $msg)"; exit 1; }
  echo "ok: refused $*: $msg"
}
bad "--build 'nolabel': expected LABEL=DIR" --build nolabel
bad "no executable /nonexistent/bin/tpgen" --build x=/nonexistent
bad "--env 'x': expected LABEL:VAR=VALUE" --build "cur=$build" --env x
bad "--dtypes: 'f64' is not one of f32, bf16, int8" --build "cur=$build" --dtypes f64
bad "--record out.txt: give a .jsonl file" --build "cur=$build" --record out.txt
