#!/usr/bin/env bash
# tools/bench/bench_vs_ct2.py end to end on a tiny random CodeGen (configs/tiny-demo.json): CTranslate2
# converts it, both engines run, f32 greedy ids must agree (the script's exit status), and the
# table has its shape: one column per batch plus the prefill, two rows per type in order,
# numbers, "refused" only for CTranslate2's bf16; under it the line of the kernels tpgen chose, per
# type and column, as in the JSON. No timing is asserted. SKIPs (77) without
# ctranslate2, torch or transformers (tools/fixtures/requirements-fixtures.txt + pip install ctranslate2).
# usage: ct2_smoke.sh TPGEN WORKDIR
set -euo pipefail
tpgen=$1 work=$2
root="$(cd "$(dirname "$0")/../.." && pwd)"
if ! miss=$(python3 -c 'import ctranslate2, torch, transformers' 2>&1); then
  echo "SKIP: bench_vs_ct2.py needs ctranslate2, torch and transformers: ${miss##*$'\n'}"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
python3 "$root/tools/bench/bench_vs_ct2.py" --tpgen "$tpgen" --model "$work/model" --config "$root/configs/tiny-demo.json" \
  --threads 1 --batch 1,2 --prompt-len 16 --new-tokens 8 --prefill 32 --runs 1 --out "$work/out.json" \
  > "$work/table.md" 2> "$work/stderr.txt" || rc=$?
if [ "${rc:-0}" -ne 0 ]; then
  cat "$work/stderr.txt" "$work/table.md"
  echo "FAIL: bench_vs_ct2.py exited $rc"
  exit 1
fi
cat "$work/table.md"
# the converter ran through tools/bench/ct2_compat.py and said which dtype keyword it passed
if ! grep -q "^bench_vs_ct2.py: converter: CTranslate2 .* passes " "$work/stderr.txt"; then
  cat "$work/stderr.txt"
  echo "FAIL: no 'converter:' line (tools/bench/ct2_compat.py's plan) in bench_vs_ct2.py's stderr"
  exit 1
fi
python3 - "$work/out.json" "$work/table.md" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
md = open(sys.argv[2]).read().splitlines()
def need(cond, msg):
    if not cond:
        sys.exit("FAIL: " + msg)
need(r["ids_check"]["agree"] and len(r["ids_check"]["prompts"]) == 4
     and all(len(p["ct2"]) == 8 and p["ct2"] == p["tpgen"] for p in r["ids_check"]["prompts"]),
     "f32 greedy ids differ: " + json.dumps(r["ids_check"])[:2000])
cols = ["batch 1", "batch 2", "prefill 32 tokens"]
need(r["columns"] == cols, f"columns {r['columns']}")
names = ["CTranslate2 float32", "tpgen f32", "CTranslate2 int8 (int8_float32)", "tpgen `--weights int8`",
         "CTranslate2 bfloat16", "tpgen `--dtype bf16`"]
need([t["row"] for t in r["table"]] == names, f"rows {[t['row'] for t in r['table']]}")
for t in r["table"]:
    need(len(t["values"]) == len(cols), f"{t['row']}: {t['values']}")
    refused = t["values"] == ["refused"] * len(cols)
    need(refused == (t["row"] == "CTranslate2 bfloat16" and "bf16" in r["ct2_refused"]) and
         (refused or all(isinstance(v, (int, float)) and v > 0 for v in t["values"])), f"{t['row']}: {t['values']}")
need(md[0] == "| | " + " | ".join(cols) + " |" and md[1] == "| --- |" + " ---: |" * 3, f"header {md[:2]}")
need(md[2:2 + len(names)] == r["table_markdown"][2:] and len(md[2:2 + len(names)]) == len(names),
     "markdown rows do not match the JSON")
kern = r["tpgen_kernels"]
need(sorted(kern) == ["bf16", "f32", "int8"] and all(list(kern[t]) == cols for t in kern),
     f"tpgen_kernels has types {sorted(kern)}, columns {[list(v) for v in kern.values()]}")
for t, by_col in kern.items():
    for col, k in by_col.items():
        ops = ("matmul", "logits", "attention")
        need(isinstance(k, dict) and all(isinstance(k.get(op), str) and k[op] for op in ops),
             f"tpgen_kernels[{t}][{col}] = {k!r}")
need(r["tpgen_kernels"]["f32"]["batch 1"] == r["per_run"]["f32"]["tpgen"][0]["kernels"]["batch 1"],
     "tpgen_kernels f32 batch 1 is not what tpgen bench printed")
kline = r["tpgen_kernels_line"]
below = md[2 + len(names):4 + len(names)]
need(below == ["", kline], f"no kernels line under the table: {below}")
need(kline.startswith("tpgen kernels (matmul / logits / attention): f32: batch 1")
     and all(f"{t}: " in kline and f"`{kern[t]['batch 1']['matmul']}`" in kline for t in kern),
     f"kernels line {kline!r}")
need(all(k in r["cpu"] for k in ("model", "flags")) and r["versions"]["ctranslate2"] and r["date_utc"],
     "CPU, versions or date missing")
print("ok: ids agree, table", len(names), "x", len(cols))
PY
