#!/usr/bin/env bash
# tools/bench/bench_vs_llamacpp.py end to end in --smoke settings on a tiny LLaMA shape (written
# here): the GGUF files made (llamacpp_model.py make: F16, then Q8_0 and Q4_0 by llama-quantize),
# tpgen --weights int4 (--group-size 64 --lm-head int4; and with --int4-activations int8) and int8
# and --dtype bf16, llama.cpp Q8_0 and Q4_0 each run, the table has one
# column per batch, the prefill and the short and long contexts, every cell a number > 0, --record writes
# records tools/bench/perf_tables.py accepts, with the tpgen rows' ratios against their llama.cpp
# peers; a tpgen row with --kv-cache-dtype bf16 names the flag; bad flags exit 2 naming them; the F16 GGUF's names, shapes and statistics; the build's
# AMX check (llamacpp_model.py check). No timing is asserted. SKIPs (77) when llama.cpp is not
# built (bash tools/bench/build_llamacpp.sh; $TPGEN_LLAMACPP_DIR, default ~/.cache/tpgen/llamacpp).
# usage: llamacpp_smoke.sh TPGEN WORKDIR
set -euo pipefail
tpgen=$1 work=$2
root="$(cd "$(dirname "$0")/../.." && pwd)"
lcpp="${TPGEN_LLAMACPP_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tpgen/llamacpp}"
if [ ! -x "$lcpp/bin/llama-bench" ] || [ ! -d "$lcpp/gguf-py" ]; then
  echo "SKIP: no llama.cpp build in $lcpp (bash tools/bench/build_llamacpp.sh)"
  exit 77
fi
if ! miss=$(python3 -c 'import numpy, yaml' 2>&1); then
  echo "SKIP: llamacpp_model.py needs numpy and pyyaml: ${miss##*$'\n'}"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
cat > "$work/tiny-llama.json" <<'JSON'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
 "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 2, "vocab_size": 512,
 "max_position_embeddings": 256, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "tie_word_embeddings": false,
 "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32"}
JSON
bench=(python3 "$root/tools/bench/bench_vs_llamacpp.py" --tpgen "$tpgen" --llamacpp "$lcpp" --config "$work/tiny-llama.json"
       --models-dir "$work/models" --threads 1 --smoke)
fail() { echo "FAIL: $*"; exit 1; }
# bad inputs first (no model is made for them)
for bad in "--types int5|--types takes int4, int4a8, int8, bf16, f32" "--context 250|--context 250 \+ --steps 4 \+ 4 .* exceed max_position_embeddings=256" \
           "--batch 1,x|--batch: '1,x' is not a comma-separated list" "--kv-cache-dtype f16|--kv-cache-dtype: invalid choice: 'f16'"; do
  flag=${bad%%|*} want=${bad#*|}
  rc=0
  # shellcheck disable=SC2086
  "${bench[@]}" $flag > "$work/bad.txt" 2>&1 || rc=$?
  [ "$rc" = 2 ] && grep -Eq -- "$want" "$work/bad.txt" || { cat "$work/bad.txt"; fail "$flag: exit $rc, want 2 and /$want/"; }
  echo "ok: $flag -> exit 2"
done
rc=0
"${bench[@]}" --types int4,int4a8,int8,bf16 --group-size 64 --lm-head int4 --llama-types Q8_0,Q4_0 --out "$work/out.json" --record "$work/rec.jsonl" \
  > "$work/table.md" 2> "$work/stderr.txt" || rc=$?
cat "$work/table.md"
[ "$rc" = 0 ] || { cat "$work/stderr.txt"; fail "bench_vs_llamacpp.py exited $rc"; }
python3 - "$work/out.json" "$work/table.md" "$work/rec.jsonl" "$root" <<'PY'
import json, os, sys
r = json.load(open(sys.argv[1]))
md = open(sys.argv[2]).read().splitlines()
recs = [json.loads(x) for x in open(sys.argv[3])]
sys.path.insert(0, os.path.join(sys.argv[4], "tools", "bench"))
import perf_tables
def need(cond, msg):
    if not cond:
        sys.exit("FAIL: " + msg)
cols = ["batch 1", "batch 4", "prefill 64 tokens", "batch 1, context 32", "batch 1, context 192"]
need(r["columns"] == cols, f"columns {r['columns']}")
i4 = "tpgen `--weights int4 --group-size 64 --lm-head int4`"  # the row names its flags
i4a8 = "tpgen `--weights int4 --int4-activations int8 --group-size 64 --lm-head int4`"
names = [i4, i4a8, "tpgen `--weights int8`", "tpgen `--dtype bf16`", "llama.cpp Q8_0", "llama.cpp Q4_0"]
need([t["row"] for t in r["table"]] == names, f"rows {[t['row'] for t in r['table']]}")
for t in r["table"]:
    need(len(t["values"]) == len(cols) and all(isinstance(v, (int, float)) and v > 0 for v in t["values"]),
         f"{t['row']}: {t['values']}")
need(md[0] == "| | " + " | ".join(cols) + " |" and md[2:2 + len(names)] == r["table_markdown"][2:], "markdown table")
need(sorted(r["gguf"]) == ["Q4_0", "Q8_0"] and all(os.path.getsize(p) > 0 for p in r["gguf"].values()), f"gguf {r['gguf']}")
tt = r["gguf_files"]["Q4_0"]["tensor_types"]  # llama-quantize's default Q4_0 mix: output.weight in q6_K
need(tt == {"q4_0": 15, "q6_K": 1, "f32": 5} and r["gguf_files"]["Q8_0"]["tensor_types"] == {"q8_0": 16, "f32": 5},
     f"tensor types {r['gguf_files']}")
raw = r["per_run"]["llama.cpp Q4_0"][0]["raw"]
need(sorted(raw) == ["batched", "pp", "tg"] and raw["batched"][0]["pl"] == 4 and raw["batched"][0]["is_pp_shared"] == 1,
     f"llama.cpp raw records: {sorted(raw)}")
need({x["n_depth"] for x in raw["tg"]} == {64, 32, 192} and raw["pp"][0]["n_prompt"] == 64, "llama-bench depths / prompt")
need(r["llamacpp_settings"].get("build_commit") and r["cpu"]["flags"] is not None, "llama.cpp settings or CPU flags")
need(len(recs) == len(names) * len(cols) and all(x["section"] == "cpu-llamacpp" for x in recs), f"{len(recs)} records")
peer = {"tpgen `--weights int8`": "llama.cpp Q8_0", i4: "llama.cpp Q4_0", i4a8: "llama.cpp Q4_0"}
for x in recs:
    if x["row"] in peer:
        need(x.get("reference", {}).get("row") == peer[x["row"]] and x["ratio"] > 0, f"ratio of {x['row']} {x['metric']}")
    elif x["row"] == "tpgen `--dtype bf16`":
        need("ratio" not in x, "tpgen bf16 has no llama.cpp BF16 row here: no ratio")
d = os.path.dirname(sys.argv[3])
perf_tables.load(d)  # raises DataError on a record it would not render
print("ok: table", len(names), "x", len(cols), "and", len(recs), "records")
PY
# --kv-cache-dtype bf16 reaches tpgen: its row names the flag, every cell a number (the GGUFs made above)
rc=0
"${bench[@]}" --types int8 --llama-types Q8_0 --kv-cache-dtype bf16 --batch 1 --short-context 0 --long-context 0 \
  --prefill 0 --out "$work/kv.json" > "$work/kv.md" 2> "$work/kv_err.txt" || rc=$?
[ "$rc" = 0 ] || { cat "$work/kv_err.txt"; fail "bench_vs_llamacpp.py --kv-cache-dtype bf16 exited $rc"; }
python3 - "$work/kv.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rows = {t["row"]: t["values"] for t in r["table"]}
want = "tpgen `--weights int8 --kv-cache-dtype bf16`"
if want not in rows or not all(isinstance(v, (int, float)) and v > 0 for v in rows[want]):
    sys.exit(f"FAIL: --kv-cache-dtype bf16 row: {rows}")
print("ok: --kv-cache-dtype bf16 row", rows[want])
PY
# the F16 GGUF llamacpp_model.py wrote: LLaMA names and the config's shape, tpgen's statistics
PYTHONPATH="$lcpp/gguf-py" python3 - "$work/models/tiny-llama-F16.gguf" <<'PY'
import sys, numpy as np, gguf
r = gguf.GGUFReader(sys.argv[1])
def need(cond, msg):
    if not cond:
        sys.exit("FAIL: GGUF: " + msg)
t = {x.name: x for x in r.tensors}
names = ["token_embd.weight", "output_norm.weight", "output.weight"] + [f"blk.{i}.{n}.weight" for i in range(2) for n in (
    "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")]
need(sorted(t) == sorted(names), f"tensors {sorted(t)}")
shapes = {"token_embd.weight": [256, 512], "output.weight": [256, 512], "blk.1.ffn_down.weight": [512, 256],
          "blk.0.ffn_gate.weight": [256, 512], "blk.0.attn_q.weight": [256, 256], "output_norm.weight": [256]}
for n, sh in shapes.items():  # GGUF order: the row length first
    need([int(x) for x in t[n].shape] == sh, f"{n} shape {list(t[n].shape)}, want {sh}")
m = np.asarray(t["blk.0.ffn_up.weight"].data, dtype=np.float32)
g = np.asarray(t["blk.1.attn_norm.weight"].data, dtype=np.float32)
need(t["blk.0.ffn_up.weight"].tensor_type.name == "F16" and abs(m.mean()) < 2e-3 and abs(m.std() - 0.02) < 1e-3,
     f"ffn_up {t['blk.0.ffn_up.weight'].tensor_type.name} mean {m.mean()} std {m.std()}")
need(t["blk.1.attn_norm.weight"].tensor_type.name == "F32" and abs(g.mean() - 1) < 3e-3 and abs(g.std() - 0.01) < 3e-3,
     f"attn_norm mean {g.mean()} std {g.std()}")
f = r.fields
need(len(f["tokenizer.ggml.tokens"].data) == 512 and int(f["llama.block_count"].parts[-1][0]) == 2, "vocab or layers")
print("ok: GGUF names, shapes, statistics")
PY
# the build's own check: on a CPU with amx_int8, AMX compiled in, used, and right (llamacpp_model.py check)
python3 "$root/tools/bench/llamacpp_model.py" check --llamacpp "$lcpp" --work "$work/check" --threads 1 ||
  fail "llamacpp_model.py check of $lcpp"
