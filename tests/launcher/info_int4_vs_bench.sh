#!/usr/bin/env bash
# `tpgen info --weights int4`'s GEMM bytes a decode step reads per rank equal what `tpgen bench
# --weights int4` reports as its weight bytes (the engine's own count) on a tiny LLaMA shape (written
# here), at TP 1 and 2, groups of 128 and 64, and lm_head in int4 too (--lm-head int4).
# usage: info_int4_vs_bench.sh TPGEN MPIEXEC WORKDIR
set -euo pipefail
tpgen=$1 mpiexec=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
cfg="$work/tiny-llama.json"
cat > "$cfg" <<'JSON'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
 "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 2, "vocab_size": 512,
 "max_position_embeddings": 256, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "tie_word_embeddings": false,
 "torch_dtype": "float32"}
JSON
fail=0
for v in 128:int8 64:int8 128:int4; do
  g=${v%:*} lm=${v#*:}
  line=$("$tpgen" info --model "$cfg" --weights int4 --group-size "$g" --lm-head "$lm" | grep "^GEMM weight bytes a decode step")
  for np in 1 2; do
    # info prints KiB with one decimal: compare bench's bytes printed the same way
    bytes=$("$mpiexec" --oversubscribe --allow-run-as-root -np "$np" "$tpgen" bench --config "$cfg" --random-weights --batch 1 --context 8 \
              --steps 2 --prefill 0 --threads 1 --weights int4 --group-size "$g" --lm-head "$lm" --json 2>"$work/err.txt" |
            python3 -c 'import json, sys; print([json.loads(l) for l in sys.stdin if l.startswith("{")][0]["weight_bytes"])') ||
      { cat "$work/err.txt"; echo "FAIL: tpgen bench -np $np --group-size $g --lm-head $lm"; exit 1; }
    want=$(python3 -c "print(f'TP $np {$bytes / 1024:.1f} KiB')")
    if grep -q "$want[,]\|$want\$" <<<"$line"; then echo "ok: group $g, lm_head $lm: $want (bench: $bytes bytes)"
    else echo "FAIL: group $g, lm_head $lm: bench says $bytes bytes ($want), info: $line"; fail=1; fi
  done
done
exit $fail
