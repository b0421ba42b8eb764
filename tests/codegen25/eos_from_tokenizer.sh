#!/usr/bin/env bash
# A CodeGen2.5 config.json that carries LLaMA's default eos_token_id 2 ("#" in CodeGen2.5's
# vocabulary): the tokenizer's <|endoftext|> (50256) ends a sequence instead, and tpgen says so
# (launcher/job.c, tp_job_use_tokenizer_eos). With the config's 2, every "#" would end a completion.
#   eos_from_tokenizer.sh TPGEN MODEL_DIR WORK_DIR
set -euo pipefail
tpgen=$1 model=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
cp "$model"/tokenizer_config.json "$model"/model.safetensors "$work"/
python3 - "$model/config.json" "$work/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["eos_token_id"] = 2
json.dump(c, open(sys.argv[2], "w"))
PY
out=$("$tpgen" generate --model "$work" --prompt 'x = 1  # one' --max-new-tokens 4 2>&1) || { echo "$out"; exit 1; }
want="the tokenizer's eos token (id 50256) ends a sequence, not config.json's eos_token_id 2"
if ! grep -qF "$want" <<<"$out"; then
  echo "FAIL: expected the line \"$want\"; tpgen printed:"; echo "$out"; exit 1
fi
echo "ok: $want"
