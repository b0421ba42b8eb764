#!/usr/bin/env bash
# `tpgen info --model`: the figures against references computed elsewhere.
# Parameter counts are transformers' own: CodeGenForCausalLM(config).num_parameters() on the
# meta device gives 228457 for tests/data/tiny-f32 and 16032155648 for configs/codegen-16B.json;
# LlamaForCausalLM(config).num_parameters() 6895702016 for configs/codegen25-7B.json and 368000 for
# tests/data/llama-gqa-bf16-sharded.
# usage: info.sh TPGEN DATA_DIR CONFIGS_DIR
set -u
tpgen=$1 data=$2 configs=$3
out=$(mktemp)
cfgdir=$(mktemp -d)
trap 'rm -rf "$out" "$cfgdir"' EXIT
fail=0
expect() { # regex: a line of the output must match
    if grep -Eq -- "$1" "$out"; then echo "ok: $1"; else echo "FAIL: no line matches: $1"; fail=1; fi
}

"$tpgen" info --model "$data/bin/tiny-f32" --memory 1 --dtype f32 > "$out" || { echo "FAIL: info exited $?"; fail=1; }
cat "$out"
expect "^parameters: 228457 "
expect "^checkpoint: .*/bin/tiny-f32/pytorch_model.bin \(torch.save zip"
expect "1 file, 23 tensors, .* stored as F32$"
expect "^  228457 of the elements are model weights \(= the parameters of config.json\)"
# TP 1 in f32: 228457 * 4 bytes of weights; K and V: 2 layers * 2 * 64 * 4 = 1024 bytes a token;
# floor((2^30 - 913828) / 1024) = 1047683 tokens.
expect "^  1 +892.4 KiB +1024 +1047683$"
expect "^  4 .* 256 "
expect "^  8 +not valid"

"$tpgen" info --model "$configs/codegen-16B.json" --memory 80 --dtype f16 > "$out" || { echo "FAIL: info exited $?"; fail=1; }
cat "$out"
expect "^parameters: 16032155648 \(16.03 B\)"
expect "^checkpoint: none \(a config file\); torch_dtype F16"
# TP 1: 16032155648 * 2 bytes = 29.86 GiB; KV: 34 layers * 2 * 6144 * 2 bytes = 835584 a token;
# floor((80 * 2^30 - 32064311296) / 835584) = 64428. TP 8: 1/8 of the KV bytes.
expect "^  1 +29.86 GiB +835584 +64428$"
expect "^  2 .* 417792 "
expect "^  8 .* 104448 "

"$tpgen" info --model "$configs/codegen25-7B.json" --memory 80 --dtype f16 > "$out" || { echo "FAIL: info exited $?"; fail=1; }
cat "$out"
expect "^architecture: LlamaForCausalLM \(RMSNorm, SiLU-gated MLP, rotate-half rotary, sequential residual\)"
expect "^parameters: 6895702016 \(6.90 B\)"
# TP 1: 6895702016 * 2 bytes = 12.84 GiB; KV: 32 layers * 2 * 4096 * 2 bytes = 524288 a token;
# floor((80 * 2^30 - 13791404032) / 524288) = 137534. TP 8: 1/8 of the KV bytes.
expect "^  1 +12.84 GiB +524288 +137534$"
expect "^  8 .* 65536 "
# grouped-query attention, 8 heads on 2 KV heads: K and V of 2 layers * 2 * 16 * 4 bytes per KV
# head; TP 2 holds one KV head a rank, TP 4 and 8 one replicated KV head a rank (not a quarter)
"$tpgen" info --model "$data/llama-gqa-bf16-sharded" --memory 1 --dtype f32 > "$out" || { echo "FAIL: info exited $?"; fail=1; }
cat "$out"
expect "^parameters: 368000 "
expect "^  368000 of the elements are model weights \(= the parameters of config.json\)"
expect "^  1 .* 512 "
expect "^  2 .* 256 "
expect "^  4 .* 256 "
expect "^  8 .* 256 "

"$tpgen" info --model "$data/tiny-f32" > "$out" || { echo "FAIL: info exited $?"; fail=1; }
expect "^checkpoint: .*/tiny-f32/model.safetensors \(safetensors\)"
expect "per rank \((--memory|this machine's memory|free memory of GPU 0)\)"
cp "$data/tiny-f32/config.json" "$cfgdir/"
"$tpgen" info --model "$cfgdir" --memory 1 --dtype f32 > "$out" || { echo "FAIL: info exited $?"; fail=1; }
expect "^checkpoint: none \(no model.safetensors or .* no pytorch_model.bin or"
expect "^  1 +892.4 KiB +1024 +1047683$"
"$tpgen" info --model "$data/bin" > "$out" 2>&1 && { echo "FAIL: info on a directory without config.json exited 0"; fail=1; }
expect "error: .*config.json"
exit $fail
