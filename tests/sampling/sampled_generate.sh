#!/usr/bin/env bash
# Seeded sampled generation through `tpgen generate`: the same seed gives the same ids at every
# TP size and on a rerun, asking for more log-probabilities (more candidates gathered) does not
# change the draws, and another seed gives other ids.
#
# usage: sampled_generate.sh TPGEN MPIEXEC MODEL_DIR SEED -- SAMPLING FLAGS...
#   TP sizes tried: 1, 2, 4 (those n_head allows; at least two are needed).
set -u
tpgen=$1 mpiexec=$2 model=$3 seed=$4
shift 4
[ "${1:-}" = "--" ] && shift
flags=("$@")
new_tokens=24

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# two prompts in one batch: each request has its own rng stream
printf '1,2,3\n[500, 17, 900, 4, 77]\n' > "$tmp/prompts.txt"

fail=0
n_head=$(sed -nE 's/.*"n_head": *([0-9]+).*/\1/p' "$model/config.json")

# run NAME NP EXTRA...: the "ids" arrays of every output line into $tmp/NAME
run() {
    local name=$1 np=$2
    shift 2
    local cmd=("$mpiexec" --oversubscribe --allow-run-as-root -np "$np" "$tpgen" generate --model "$model"
               --prompts-file "$tmp/prompts.txt" --max-new-tokens $new_tokens --ignore-eos --json
               --backend cpu --threads 1 --seed "$seed" "${flags[@]}" "$@")
    if ! timeout 60 "${cmd[@]}" > "$tmp/$name.json" 2> "$tmp/$name.err"; then
        echo "FAIL: exit status $? from: ${cmd[*]}"
        cat "$tmp/$name.err"
        fail=1
        : > "$tmp/$name"
        return
    fi
    sed -nE 's/.*"ids": \[([^]]*)\].*/\1/p' "$tmp/$name.json" > "$tmp/$name"
    local lines
    lines=$(wc -l < "$tmp/$name")
    if [ "$lines" -ne 2 ]; then
        echo "FAIL: $name: expected 2 result lines with \"ids\", got $lines:"
        cat "$tmp/$name.json" "$tmp/$name.err"
        fail=1
    fi
    while read -r ids; do
        local n
        n=$(echo "$ids" | tr ',' '\n' | grep -c '[0-9]')
        if [ "$n" -ne $new_tokens ]; then
            echo "FAIL: $name: $n ids generated, expected $new_tokens (--ignore-eos): $ids"
            fail=1
        fi
    done < "$tmp/$name"
}

same() { # same A B WHAT
    if ! cmp -s "$tmp/$1" "$tmp/$2"; then
        echo "FAIL: $3"
        echo "  $1:"; sed 's/^/    /' "$tmp/$1"
        echo "  $2:"; sed 's/^/    /' "$tmp/$2"
        fail=1
    fi
}

sizes=()
for np in 1 2 4; do
    if [ $((n_head % np)) -eq 0 ]; then sizes+=("$np"); fi
done
if [ ${#sizes[@]} -lt 2 ]; then
    echo "FAIL: $model (n_head=$n_head) allows fewer than two of TP 1, 2, 4"
    exit 1
fi

for np in "${sizes[@]}"; do run "tp$np" "$np"; done
run rerun "${sizes[1]}"
run logprobs "${sizes[1]}" --logprobs 40
run other_seed "${sizes[1]}" --seed $((seed + 1))

for np in "${sizes[@]:1}"; do
    same "tp${sizes[0]}" "tp$np" "seed $seed, ${flags[*]}: TP=${sizes[0]} and TP=$np sampled different ids"
done
same "tp${sizes[1]}" rerun "seed $seed, ${flags[*]}: a rerun at TP=${sizes[1]} sampled different ids"
same "tp${sizes[1]}" logprobs "seed $seed, ${flags[*]}: --logprobs 40 changed the sampled ids"
# another seed: both prompts' ids differ (24 draws from a random model's wide distribution)
if [ -s "$tmp/other_seed" ]; then
    common=$(paste -d '|' "$tmp/tp${sizes[1]}" "$tmp/other_seed" | awk -F'|' '$1 == $2' | wc -l)
    if [ "$common" -ne 0 ]; then
        echo "FAIL: seeds $seed and $((seed + 1)) gave the same ids for $common prompt(s) with ${flags[*]}"
        cat "$tmp/other_seed"
        fail=1
    fi
fi
# the two prompts' streams are independent: not the same continuation
if [ -s "$tmp/tp1" ] && [ "$(sort -u "$tmp/tp1" | wc -l)" -ne 2 ]; then
    echo "FAIL: both prompts got the same sampled ids"
    fail=1
fi

if [ $fail -eq 0 ]; then
    echo "ok: seed $seed ${flags[*]}: same ids at TP ${sizes[*]}, on a rerun and with --logprobs; seed $((seed + 1)) differs"
    head -1 "$tmp/tp1"
fi
exit $fail
