#!/usr/bin/env bash
# The demo's completion (tools/demo_generate.sh, models/codegen-tiny-py at TP=2, JSON output):
#  - prompt_ids are what `tpgen tokenize` gives for the prompt;
#  - the completion text tokenizes back to exactly the generated ids (minus a final eos, which
#    the text leaves out): no id the tokenizer lacks, no text that re-merges differently;
#  - no <|endoftext|> (id eos_token_id) anywhere but as the last id, none in the text;
#  - prompt + completion (cut before its first top-level line) parses as Python.
# usage: demo_check.sh TPGEN
set -euo pipefail
tpgen=$1
root="$(cd "$(dirname "$0")/../.." && pwd)"
model="$root/models/codegen-tiny-py"
out=$(TPGEN_BIN="$tpgen" bash "$root/tools/demo_generate.sh" --json --backend cpu --threads 1 2>/dev/null)
python3 - "$out" "$tpgen" "$model" <<'PY'
import ast, json, subprocess, sys
res, tpgen, model = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
eos = json.load(open(f"{model}/config.json"))["eos_token_id"]
ids, text = res["ids"], res["text"]
assert len(ids) > 8, f"completion too short: {ids}"
assert eos not in ids[:-1], f"<|endoftext|> (id {eos}) in the middle of the completion: {ids}"
assert "<|endoftext|>" not in text, repr(text)
body = ids[:-1] if ids[-1] == eos else ids
back = json.loads(subprocess.run([tpgen, "tokenize", "--model", model, "--text", text, "--json"],
                                 capture_output=True, text=True, check=True).stdout)["ids"]
assert back == body, f"completion text {text!r} tokenizes to {back}, generated {body}"
prompt = json.loads(subprocess.run([tpgen, "detokenize", "--model", model, "--ids",
                                    ",".join(map(str, res["prompt_ids"])), "--json"],
                                   capture_output=True, text=True, check=True).stdout)["text"]
lines = text.split("\n")
cut = next((i for i in range(1, len(lines)) if lines[i] and not lines[i][0].isspace()), len(lines))
src = prompt + "\n".join(lines[:cut])
try:
    ast.parse(src)
except SyntaxError as e:
    sys.exit(f"FAIL: prompt + completion does not parse ({e}):\n{src}")
print(f"demo completion: {len(ids)} ids, tokenizes back, parses as Python:\n{prompt}{text}")
PY
