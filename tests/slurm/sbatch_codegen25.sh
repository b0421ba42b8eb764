#!/usr/bin/env bash
# CodeGen2.5 under Slurm (label slurm, codegen25): launcher/tpgen.sbatch at TP 2 (srun) on the
# CodeGen2.5-shaped checkpoint directory as it is (config.json, tokenizer_config.json naming
# CodeGen25Tokenizer, model.safetensors; tests/codegen25.cmake regenerates it): a text prompt gives
# HF's prompt ids, greedy ids and text (MODEL/expected.json, tools/fixtures/make_codegen25_model.py).
# usage: sbatch_codegen25.sh TPGEN MODEL WORKDIR   (SLURM_CONF: the test cluster)
source "$(dirname "$0")/lib.sh"
tpgen=$1 model=$(realpath "$2") work=$3
mkdir -p "$work" && cd "$work"
first() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["generate"][0][sys.argv[2]], end="")' \
                  "$model/expected.json" "$1"; }
prompt=$(first text) n=$(first max_new_tokens)
submit "$work/job.out" "$repo/launcher/tpgen.sbatch" --tpgen "$tpgen" "$model" "$prompt" \
  --max-new-tokens "$n" --ignore-eos
[ "$rc" = 0 ] || { echo "FAIL: job $job exited $rc:"; cat "$work/job.out"; exit 1; }
grep -q "TP=2" "$work/job.out" || { echo "FAIL: job $job did not run TP=2"; cat "$work/job.out"; exit 1; }
json_of "$work/job.out" | python3 -c '
import json, sys
got = json.loads(sys.stdin.read().splitlines()[-1])
g = json.load(open(sys.argv[1]))["generate"][0]
want = {"prompt_ids": g["prompt_ids"], "ids": g["ids"], "text": g["completion"]}
bad = [k for k in want if got.get(k) != want[k]]
if bad:
    sys.exit("FAIL: job %s: %s differ from HF'"'"'s: %s" % (sys.argv[2], bad, got))
print("CodeGen2.5 under Slurm, job %s: prompt ids, greedy ids and text == HF'"'"'s" % sys.argv[2])' \
  "$model/expected.json" "$job"
echo "1 passed, 0 failed"
