#!/usr/bin/env bash
# EOS sampled as the last allowed token ends the choice with finish_reason "stop", not "length"
# (issue 41: the scheduler must look at EOS/stop ids before the length limit). Through
# `tpgen generate --json`, greedy, on tiny-f32: prompt [799] ends on EOS (eos_token_id of the
# config) after K tokens (found by a run with room to spare: K is read, not assumed); then
# --max-new-tokens K must say "stop" with the same ids (TP 1 and 2), and K - 1 must say "length".
#
# usage: eos_at_length.sh TPGEN MPIEXEC MODEL_DIR
set -u
tpgen=$1 mpiexec=$2 model=$3
prompt=799
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
eos=$(sed -nE 's/.*"eos_token_id": *([0-9]+).*/\1/p' "$model/config.json")

# run NAME NP MAX_NEW: one JSON line into $tmp/NAME (exits on a failed run)
run() {
    local cmd=("$mpiexec" --oversubscribe --allow-run-as-root -np "$2" "$tpgen" generate --model "$model"
               --prompt-ids "$prompt" --max-new-tokens "$3" --logprobs 2 --json --backend cpu --threads 1)
    if ! timeout 60 "${cmd[@]}" > "$tmp/$1" 2> "$tmp/$1.err"; then
        echo "FAIL: exit status $? from: ${cmd[*]}"
        cat "$tmp/$1.err"
        exit 1
    fi
}
field() { python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$tmp/$1" "$2"; }

fail=0
run free 1 64
K=$(field free 'len(j["ids"])')
if [ "$(field free 'j["finish_reason"], j["ids"][-1]')" != "('stop', $eos)" ]; then
    echo "FAIL: the case is gone: prompt [$prompt], greedy, 64 new tokens no longer ends on EOS $eos" \
         "(choose another prompt that does): $(cat "$tmp/free")"
    exit 1
fi
# the margin of EOS over the runner-up at its step: TP 2 sums in another order, it must pick EOS too
echo "prompt [$prompt] ends on EOS as token $K; EOS leads by $(field free \
     'round(j["top_logprobs"][-1][0][1] - j["top_logprobs"][-1][1][1], 3)') nats at its step"
for np in 1 2; do
    run "at_k_tp$np" "$np" "$K"
    got=$(field "at_k_tp$np" 'j["finish_reason"], j["ids"]')
    if [ "$got" != "$(field free '"stop", j["ids"]')" ]; then
        echo "FAIL: TP $np, --max-new-tokens $K (EOS is the ${K}th token): want finish_reason \"stop\" and the" \
             "same $K ids, got $got"
        fail=1
    fi
done
run below 1 $((K - 1))
got=$(field below 'j["finish_reason"], len(j["ids"])')
if [ "$got" != "('length', $((K - 1)))" ]; then
    echo "FAIL: --max-new-tokens $((K - 1)) (one short of EOS): want (\"length\", $((K - 1))), got $got"
    fail=1
fi
[ $fail -eq 0 ] && echo "ok: EOS as the last allowed token ($K) says \"stop\" at TP 1 and 2; one fewer says \"length\""
exit $fail
