#!/usr/bin/env bash
# Greedy output with --speculate is the output without it: `tpgen generate` on MODEL, the same
# prompts, at TP 1, 2 and 4 (those n_head allows), with roomy and with tiny step budgets.
#
# usage: greedy_same.sh TPGEN MPIEXEC MODEL [text]
#   Prompts (ids, from the model's vocab_size and n_positions): one that repeats, one that never
#   does, a one-token prompt, and one that ends 6 tokens short of n_positions (stops at
#   n_positions in the middle of a step's drafts). With `text` (a model with a tokenizer) code
#   prompts are added, and a run with --stop strings (stops found token by token, mid-step).
#   Also with a repetition penalty (full-logits verification) and --logprobs.
#   Baseline: TP=1 without --speculate. Every other run must print the same ids per prompt
#   (and the same text). With --speculate, every line carries "speculative" counts with
#   accepted <= drafted, and some drafts are accepted (else the test shows nothing).
set -u
tpgen=$1 mpiexec=$2 model=$3 text=${4:-}
tmp=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
cfg() { sed -nE "s/.*\"$1\": *([0-9]+).*/\1/p" "$model/config.json" | head -1; }
n_head=$(cfg n_head) n_pos=$(cfg n_positions) vocab=$(cfg vocab_size)
new=40
{
    echo "1,2,3,4,1,2,3,4,1,2,3"
    echo "$((5 % vocab)),$((17 % vocab)),$((vocab - 2)),$((4 % vocab)),$((77 % vocab)),$((vocab / 2))"
    echo "7"
    # n_pos - 6 tokens: a repeating pattern, so drafts are long when the length stop comes
    seq 0 $((n_pos - 7)) | awk -v v="$vocab" '{ printf "%s%d", (NR > 1 ? "," : ""), ($1 % 9) * 13 % v + 1 } END { print "" }'
    if [ -n "$text" ]; then
        printf '"def add(a, b):\\n    return a + b\\n\\n\\ndef sub(a, b):\\n"\n'
        printf '"import os\\nimport sys\\n\\n\\nclass Config:\\n    def __init__(self, path):\\n        self.path = path\\n"\n'
        printf '"for i in range(10):\\n    print(i)\\nfor j in range(10):\\n"\n'
    fi
} > "$tmp/prompts.txt"
n_prompts=$(grep -c . "$tmp/prompts.txt")

fail=0
# run NAME NP FLAGS...: ids (and text) per output line into $tmp/NAME
run() {
    local name=$1 np=$2
    shift 2
    local cmd=("$mpiexec" --oversubscribe --allow-run-as-root -np "$np" "$tpgen" generate --model "$model"
               --prompts-file "$tmp/prompts.txt" --max-new-tokens $new --json --backend cpu --threads 1 "$@")
    if ! timeout 120 "${cmd[@]}" > "$tmp/$name.json" 2> "$tmp/$name.err"; then
        echo "FAIL: exit status $? from: ${cmd[*]}"
        cat "$tmp/$name.err"
        fail=1
        : > "$tmp/$name"
        return
    fi
    sed -E 's/.*"ids": (\[[^]]*\]).*"finish_reason": ("[a-z]*").*/\1 \2/' "$tmp/$name.json" > "$tmp/$name"
    sed -nE 's/.*("text": .*)\}$/\1/p' "$tmp/$name.json" >> "$tmp/$name"
    local lines
    lines=$(grep -c '"ids"' "$tmp/$name.json")
    if [ "$lines" -ne "$n_prompts" ]; then
        echo "FAIL: $name: $lines result lines, expected $n_prompts"
        cat "$tmp/$name.json" "$tmp/$name.err"
        fail=1
    fi
}
# spec NAME: the counts of a --speculate run: present on every line, accepted <= drafted
drafted=0 accepted=0
spec() {
    local d a n=0
    while read -r d a; do
        n=$((n + 1))
        if [ "$a" -gt "$d" ]; then echo "FAIL: $1: accepted $a > drafted $d"; fail=1; fi
        drafted=$((drafted + d)) accepted=$((accepted + a))
    done < <(sed -nE 's/.*"speculative": \{"drafted": ([0-9]+), "accepted": ([0-9]+)\}.*/\1 \2/p' "$tmp/$1.json")
    if [ "$n" -ne "$n_prompts" ]; then echo "FAIL: $1: $n of $n_prompts lines have speculative counts"; fail=1; fi
}
same() { # same RUN [BASE]
    local base=${2:-base}
    if ! cmp -s "$tmp/$base" "$tmp/$1"; then
        echo "FAIL: $1 differs from $base (TP=1 without --speculate):"
        diff "$tmp/$base" "$tmp/$1" | head -20
        fail=1
    fi
}

stop=()
[ -n "$text" ] && stop=(--stop "0, 0, 0, 0" --stop "self._name,")
run base 1
[ -n "$text" ] && run base_stop 1 "${stop[@]}"
for np in 1 2 4; do
    [ $((n_head % np)) -eq 0 ] || continue
    run "k4_tp$np" "$np" --speculate ngram:4 && spec "k4_tp$np" && same "k4_tp$np"
done
# tiny budgets: drafts squeezed by the step's tokens, prompts queue for the 2 slots, prefill
# chunks share steps with verification
run tight 2 --speculate ngram:8:2 --max-batch 2 --max-batch-tokens 7 && spec tight && same tight
run k1 1 --speculate ngram:1:1 && spec k1 && same k1
# a repetition penalty: full logits, the penalty over the history as it grows token by token
# within a step's accepted drafts; and more candidates gathered (--logprobs)
run base_pen 1 --repetition-penalty 1.3 --logprobs 7
run pen 2 --speculate ngram:6 --repetition-penalty 1.3 --logprobs 7 && spec pen && same pen base_pen
if [ -n "$text" ]; then
    cp "$tmp/base_stop" "$tmp/base"
    run stop 2 --speculate ngram:8 "${stop[@]}" && spec stop && same stop
fi
if [ "$accepted" -eq 0 ]; then echo "FAIL: no draft was ever accepted ($drafted drafted): the test shows nothing"; fail=1; fi
[ $fail -eq 0 ] && echo "ok: $model: greedy ids identical with --speculate ($accepted of $drafted drafts accepted over all runs)"
exit $fail
