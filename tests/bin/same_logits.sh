#!/usr/bin/env bash
# The same model from safetensors and from torch.save .bin must give byte-identical output:
# score (log-probabilities and top-5 of every position) and greedy generate, on NP ranks.
# usage: same_logits.sh TPGEN MPIEXEC NP SAFETENSORS_DIR BIN_DIR
set -u
tpgen=$1 mpiexec=$2 np=$3 st=$4 bin=$5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { # name model args...
    local name=$1 model=$2
    shift 2
    "$mpiexec" --oversubscribe --allow-run-as-root -np "$np" "$tpgen" "$@" --model "$model" --backend cpu --threads 1 \
        > "$tmp/$name.out" 2> "$tmp/$name.err"
    local rc=$?
    if grep -q "valid TP sizes" "$tmp/$name.err"; then echo "SKIPPED: TP=$np not valid here"; exit 77; fi
    if [ $rc -ne 0 ]; then echo "FAIL: $name exited $rc"; cat "$tmp/$name.err"; exit 1; fi
}
fail=0
for mode in score generate; do
    if [ $mode = score ]; then args=(score --ids 0,5,17,9,33,2,8,1,4,19,7,3 --logprobs 5 --json)
    else args=(generate --prompt-ids 3,1,4,1,5,9,2,6 --max-new-tokens 12 --ignore-eos --logprobs 5 --json); fi
    run st_$mode "$st" "${args[@]}"
    run bin_$mode "$bin" "${args[@]}"
    grep -q "checkpoint: .*pytorch_model.*(torch.save zip" "$tmp/bin_$mode.err" || { echo "FAIL: $bin was not read as .bin"; fail=1; }
    grep -q "checkpoint: .*(safetensors)" "$tmp/st_$mode.err" || { echo "FAIL: $st was not read as safetensors"; fail=1; }
    if ! cmp -s "$tmp/st_$mode.out" "$tmp/bin_$mode.out"; then
        echo "FAIL: $mode output differs between $st and $bin (np=$np)"
        diff "$tmp/st_$mode.out" "$tmp/bin_$mode.out" | head -5
        fail=1
    elif [ ! -s "$tmp/st_$mode.out" ]; then
        echo "FAIL: no $mode output"; fail=1
    fi
done
[ $fail -eq 0 ] && echo "ok: score and generate identical from .bin and safetensors at np=$np ($(wc -c < "$tmp/st_score.out") + $(wc -c < "$tmp/st_generate.out") bytes)"
exit $fail
