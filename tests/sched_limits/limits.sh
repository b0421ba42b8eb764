#!/usr/bin/env bash
# The scheduler's limits through `tpgen generate` (tiny-f32: n_positions = 128):
#  - a sequence never holds more than n_positions tokens: a prompt of n_positions - 1 gets one
#    token, a prompt of exactly n_positions gets none ("length" both times), at TP 1 and 2;
#  - a request reserves prompt + max_new_tokens - 1 tokens of KV cache (the last generated
#    token is never fed back): 3 + 14 - 1 = 16 tokens run in a 16-token budget.
#
# usage: limits.sh TPGEN MPIEXEC MODEL_DIR
set -u
tpgen=$1 mpiexec=$2 model=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n_pos=$(sed -nE 's/.*"n_positions": *([0-9]+).*/\1/p' "$model/config.json")
fail=0

# gen NP EXPECT_N_IDS EXPECT_REASON FLAGS...
gen() {
    local np=$1 want_n=$2 want_reason=$3
    shift 3
    local out
    if ! out=$(timeout 60 "$mpiexec" --oversubscribe --allow-run-as-root -np "$np" "$tpgen" generate --model "$model" \
            --backend cpu --threads 1 --json --ignore-eos "$@" 2> "$tmp/err"); then
        echo "FAIL: np=$np $*: exit status $?"
        cat "$tmp/err"
        fail=1
        return
    fi
    local ids reason n
    ids=$(echo "$out" | sed -nE 's/.*"ids": \[([^]]*)\].*/\1/p')
    reason=$(echo "$out" | sed -nE 's/.*"finish_reason": "([a-z]*)".*/\1/p')
    n=$(echo "$ids" | tr ',' '\n' | grep -c '[0-9]')
    if [ "$n" != "$want_n" ] || [ "$reason" != "$want_reason" ]; then
        echo "FAIL: np=$np ${*:1:2}...: got $n ids, finish_reason \"$reason\"; expected $want_n, \"$want_reason\""
        echo "$out" | cut -c1-400
        fail=1
    else
        echo "ok: np=$np: $n ids, $reason"
    fi
}

full=$(seq -s, 0 $((n_pos - 1)))
short=$(seq -s, 0 $((n_pos - 2)))
for np in 1 2; do
    gen "$np" 1 length --prompt-ids "$short" --max-new-tokens 4
    gen "$np" 0 length --prompt-ids "$full" --max-new-tokens 4
done
gen 1 14 length --prompt-ids 1,2,3 --max-new-tokens 14 --kv-cache-tokens 16 --block-size 16
exit $fail
