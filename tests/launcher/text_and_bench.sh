#!/usr/bin/env bash
# End to end through the tokenizer and the bench command, on the tiny-f32 fixture with the real
# CodeGen tokenizer files beside it (text made of single letters encodes to ids < its vocab 1001):
#  1. generate --prompt TEXT on 2 ranks: prompt_ids == `tpgen tokenize` of the text, and "text" ==
#     `tpgen detokenize` of the generated ids;
#  2. --stop STR, with STR taken from the middle of that text: text ends right before STR's first
#     occurrence, finish_reason "stop", and the ids are a prefix of the unstopped run's;
#  3. plain (non-JSON) output of one prompt prints exactly that text;
#  4. bench on 1 and 2 ranks prints one JSON line per batch size with positive times and bytes;
#  5. the launch wrapper launcher/tpgen-mpirun runs a 2-rank job, and `tpgen info` names the CPU
#     backend.
# usage: text_and_bench.sh TPGEN MPIEXEC FIXTURE TOKENIZER_DIR WORKDIR
set -euo pipefail
tpgen=$1 mpiexec=$2 fixture=$3 tokdir=$4 work=$5
model="$work/tiny-with-tokenizer"
rm -rf "$model" && mkdir -p "$model"
cp "$fixture"/config.json "$fixture"/*.safetensors "$model"/
cp "$tokdir"/vocab.json "$tokdir"/merges.txt "$tokdir"/added_tokens.json "$tokdir"/special_tokens_map.json "$model"/
run2() { "$mpiexec" --oversubscribe --allow-run-as-root -np 2 "$tpgen" "$@" --backend cpu --threads 1 2>/dev/null; }
prompt="a b c d e"
common=(--model "$model" --prompt "$prompt" --max-new-tokens 24 --ignore-eos --json)
full=$(run2 generate "${common[@]}")
toks=$("$tpgen" tokenize --model "$model" --text "$prompt" --json)
python3 - "$full" "$toks" "$tpgen" "$model" <<'PY'
import json, subprocess, sys
full, toks, tpgen, model = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
assert full["prompt_ids"] == toks["ids"], (full["prompt_ids"], toks["ids"])
det = subprocess.run([tpgen, "detokenize", "--model", model, "--ids", ",".join(map(str, full["ids"])), "--json"],
                     capture_output=True, text=True, check=True).stdout
assert json.loads(det)["text"] == full["text"], (det, full["text"])
assert len(full["ids"]) == 24 and full["finish_reason"] == "length"
print("text prompt: ok;", repr(full["text"][:40]))
PY
text=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["text"])' "$full")
stop=$(python3 - "$full" <<'PY'
import json, sys
t = json.loads(sys.argv[1])["text"]
# a 3-character piece from the middle whose first occurrence is past the start
for i in range(len(t) // 2, len(t) - 3):
    s = t[i:i + 3]
    if t.find(s) > 0 and s.strip():
        print(s)
        break
PY
)
[ -n "$stop" ] || { echo "FAIL: no stop string could be picked from $text"; exit 1; }
stopped=$(run2 generate "${common[@]}" --stop "$stop")
python3 - "$full" "$stopped" "$stop" <<'PY'
import json, sys
full, st, stop = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
want = full["text"][:full["text"].find(stop)]
assert st["text"] == want, (st["text"], want, stop)
assert st["finish_reason"] == "stop", st["finish_reason"]
assert st["ids"] == full["ids"][:len(st["ids"])], (st["ids"], full["ids"])
print("stop string: ok;", repr(stop))
PY
plain=$(run2 generate --model "$model" --prompt "$prompt" --max-new-tokens 24 --ignore-eos)
[ "$plain" = "$text" ] || { echo "FAIL: plain output differs: [$plain] vs [$text]"; exit 1; }
echo "plain output: ok"
for np in 1 2; do
  out=$("$mpiexec" --oversubscribe --allow-run-as-root -np $np "$tpgen" bench --model "$fixture" --batch 1,3 \
        --context 16 --steps 4 --prefill 0 --json --backend cpu --threads 1 2>/dev/null)
  python3 - "$out" "$np" <<'PY'
import json, sys
rows = [json.loads(l) for l in sys.argv[1].splitlines() if l.startswith("{")]
rows = [r for r in rows if "batch" in r]  # decode rows (prefill rows: tests/bench)
assert [r["batch"] for r in rows] == [1, 3], rows
for r in rows:
    assert r["tp"] == int(sys.argv[2]) and r["ms_per_step"] > 0 and r["weight_bytes"] > 0 and r["gb_per_s"] > 0, r
    assert abs(r["tokens_per_s"] - r["batch"] / (r["ms_per_step"] / 1e3)) < 1e-2 * r["tokens_per_s"], r
print("bench np=%s: ok" % sys.argv[2])
PY
done
wrapper="$(cd "$(dirname "$0")/../.." && pwd)/launcher/tpgen-mpirun"
out=$(TPGEN_BIN="$tpgen" "$wrapper" -np 2 score --model "$fixture" --ids 1,2,3 --json --backend cpu --threads 1 2>/dev/null)
python3 -c 'import json,sys; r=json.loads(sys.argv[1]); assert r["ids"]==[1,2,3] and len(r["logprobs"])==3, r' "$out"
echo "tpgen-mpirun: ok"
"$tpgen" info | grep -q '^backends: cpu' || { echo "FAIL: tpgen info does not list the cpu backend"; exit 1; }
echo "info: ok"
echo "1 passed, 0 failed"
