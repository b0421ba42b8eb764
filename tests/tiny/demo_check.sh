#!/usr/bin/env bash
# The demo's completion (tools/demo_generate.sh, models/codegen-tiny-py at TP=2, JSON output):
#  - prompt_ids are what `tpgen tokenize` gives for the prompt;
#  - the completion text is what `tpgen detokenize` makes of the ids (up to the stop), and it tokenizes back to
#    the generated ids (minus a final eos, which the text leaves out). Where a model emits a
#    non-canonical split (this one writes "___" as "_" + "__", ids 4808 834, where BPE gives
#    41052), the re-tokenized ids must decode to the same text, every generated id must be one
#    the tokenizer has, and the ids may differ only at such spots (same number of characters
#    covered); the count of such spots is printed;
#  - no <|endoftext|> (id eos_token_id) anywhere but as the last id, none in the text;
#  - when the demo's stop ("\n\n", a blank line) ended it, the text is the ids' text cut just
#    before it;
#  - no degenerate repetition (issue 34: the old demo printed os.path.path.path...): no 4-gram of
#    generated ids occurs more than MAX_4GRAM times, and no line of the text repeats more than
#    MAX_LINE times;
#  - whether prompt + completion (cut before its first top-level line) parses as Python is
#    printed, not required: the tiny model often writes code that does not parse (docs/QUALITY.md).
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
MAX_4GRAM, MAX_LINE = 3, 3  # the old demo had one 4-gram 24 times; code may repeat a few
grams = {}
for k in range(len(ids) - 3):
    grams[tuple(ids[k:k + 4])] = grams.get(tuple(ids[k:k + 4]), 0) + 1
worst = max(grams.items(), key=lambda kv: kv[1]) if grams else ((), 0)
assert worst[1] <= MAX_4GRAM, (f"degenerate repetition: the ids {list(worst[0])} occur {worst[1]} times "
                               f"(at most {MAX_4GRAM}) in the completion {text!r}")
lines = [l.strip() for l in text.split("\n") if l.strip()]
dup = max(((l, lines.count(l)) for l in set(lines)), key=lambda x: x[1], default=("", 0))
assert dup[1] <= MAX_LINE, f"degenerate repetition: the line {dup[0]!r} occurs {dup[1]} times in {text!r}"
assert eos not in ids[:-1], f"<|endoftext|> (id {eos}) in the middle of the completion: {ids}"
assert "<|endoftext|>" not in text, repr(text)
body = ids[:-1] if ids[-1] == eos else ids
def tp(*args):
    return json.loads(subprocess.run([tpgen, *args, "--model", model, "--json"],
                                     capture_output=True, text=True, check=True).stdout)
def detok(ids):
    return tp("detokenize", "--ids", ",".join(map(str, ids)))["text"] if ids else ""
full = detok(body)
if res.get("finish_reason") == "stop":  # the ids include the token that completed the stop string
    assert full.startswith(text) and full[len(text):].startswith("\n\n"), \
        f"stopped at a blank line, but ids {body} detokenize to {full!r}, JSON text is {text!r}"
else:
    assert full == text, f"ids {body} detokenize to {full!r}, JSON text is {text!r}"
text = full
back = tp("tokenize", "--text", text)["ids"]
n_vocab = len(json.load(open(f"{model}/vocab.json"))) + len(json.load(open(f"{model}/added_tokens.json")))
assert all(i < n_vocab for i in body), f"ids outside the tokenizer's {n_vocab}: {body}"
assert detok(back) == text, f"text {text!r} tokenizes to {back}, which decodes to {detok(back)!r}"
noncanon = 0
if back != body:
    # walk both id lists by decoded character offsets; they must re-synchronise after each spot
    cuts = lambda ids: {len(detok(ids[:k])) for k in range(len(ids) + 1)}
    cb, ck = cuts(body), cuts(back)
    noncanon = len(ck - cb)
    assert noncanon <= max(1, len(body) // 8), f"text {text!r} tokenizes to {back}, generated {body}"
prompt = json.loads(subprocess.run([tpgen, "detokenize", "--model", model, "--ids",
                                    ",".join(map(str, res["prompt_ids"])), "--json"],
                                   capture_output=True, text=True, check=True).stdout)["text"]
lines = text.split("\n")
cut = next((i for i in range(1, len(lines)) if lines[i] and not lines[i][0].isspace()), len(lines))
src = prompt + "\n".join(lines[:cut])
try:
    ast.parse(src)
    parse = "parses as Python"
except SyntaxError as e:
    parse = f"does not parse as Python ({e})"
print(f"demo completion: {len(ids)} ids, finish_reason {res.get('finish_reason')}, most repeated 4-gram "
      f"{worst[1]}x, tokenizes back ({noncanon} non-canonical split(s)), "
      f"{parse}:\n{prompt}{text}")
PY
