#!/usr/bin/env bash
# Non-finite logits (inf or NaN) fail the request with an error naming the step and position,
# in every sampling mode and in score: never a crash, a hang, or a silently chosen id.
#
# usage: nonfinite.sh TPGEN MPIEXEC FAULTY_DIR CLEAN_MODEL NP
#   FAULTY_DIR: made by make_faulty.py (inf_bias, inf_bias_hi, nan_bias, nan_all, poison_id7).
set -u
tpgen=$1 mpiexec=$2 faulty=$3 clean=$4 np=$5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
runs=0
launch=("$mpiexec" --oversubscribe --allow-run-as-root -np "$np" "$tpgen")
common=(--backend cpu --threads 1 --json)

# expect_fail NAME REGEX CMD...: non-zero (not a timeout), REGEX on stderr on exactly one error line
expect_fail() {
    local name=$1 regex=$2
    shift 2
    runs=$((runs + 1))
    timeout 60 "$@" > "$tmp/out" 2> "$tmp/err"
    local rc=$?
    local why=""
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then why="hung (killed by timeout)"
    elif [ $rc -eq 0 ]; then why="exit status 0"
    elif [ $rc -gt 128 ]; then why="killed by signal $((rc - 128))"
    elif ! grep -Eq -- "$regex" "$tmp/err"; then why="stderr does not match: $regex"
    elif [ "$(grep -Ec '^tpgen: (\[rank [0-9]+\] )?error:' "$tmp/err")" -ne 1 ]; then why="not exactly one error line"
    fi
    if [ -n "$why" ]; then
        echo "FAIL: $name: $why (status $rc): $*"
        head -c 3000 "$tmp/err"
        fail=1
        return 1
    fi
    return 0
}

modes=("greedy|"
       "greedy_logprobs|--logprobs 5"
       "topk|--temperature 0.8 --top-k 20"
       "topp|--temperature 1 --top-p 0.9"
       "topk_topp|--temperature 0.7 --top-k 50 --top-p 0.8"
       "penalty|--repetition-penalty 1.3"
       "penalty_sampled|--temperature 1 --top-k 10 --repetition-penalty 1.2"
       "full_k100|--temperature 1 --top-k 100")
for case in inf_bias inf_bias_hi nan_bias nan_all; do
    for m in "${modes[@]}"; do
        name=${m%%|*}
        read -r -a flags <<< "${m#*|}"
        if expect_fail "$case/$name" \
            '^tpgen: error: --prompt-ids: non-finite logits \(inf or NaN\) at step 0, position 3' \
            "${launch[@]}" generate --model "$faulty/$case" --prompt-ids 1,2,3 --max-new-tokens 3 --seed 3 \
            "${common[@]}" "${flags[@]}"; then
            # the JSON line says so, and holds no id
            if ! grep -q '"ids": \[\], .*"finish_reason": "error", "error": "non-finite logits' "$tmp/out" \
               || [ "$(wc -l < "$tmp/out")" -ne 1 ]; then
                echo "FAIL: $case/$name: stdout is not one JSON line with finish_reason error and no ids:"
                cat "$tmp/out"
                fail=1
            fi
        fi
    done
    expect_fail "$case/score" '^tpgen: error: non-finite logits \(inf or NaN\) at position 1 of --ids' \
        "${launch[@]}" score --model "$faulty/$case" --ids 1,2,3 "${common[@]}"
done

# Only prompts holding id 7 go NaN (wte row 7 has an inf): that request fails alone; the others
# are answered exactly as by the clean model, whether they share steps with it or reuse its KV
# blocks after it (--max-batch 1).
printf '1,2,3\n5,7,9\n4,5,6\n' > "$tmp/prompts.txt"
for flags in "--max-batch 1" "--max-batch 4" "--max-batch 4 --temperature 1 --top-p 0.9" \
             "--max-batch 1 --temperature 0.9 --top-k 7"; do
    read -r -a f <<< "$flags"
    args=(generate --prompts-file "$tmp/prompts.txt" --max-new-tokens 6 --ignore-eos --seed 11 "${common[@]}" "${f[@]}")
    if ! timeout 60 "${launch[@]}" "${args[@]}" --model "$clean" > "$tmp/clean" 2> "$tmp/clean.err"; then
        echo "FAIL: clean run failed: $flags"; cat "$tmp/clean.err"; fail=1; continue
    fi
    if expect_fail "poison_id7 $flags" 'prompts.txt line 2: non-finite logits \(inf or NaN\) at step 0, position 3' \
        "${launch[@]}" "${args[@]}" --model "$faulty/poison_id7"; then
        if ! diff <(sed -n '1p;3p' "$tmp/clean") <(sed -n '1p;3p' "$tmp/out") > /dev/null; then
            echo "FAIL: poison_id7 $flags: the healthy requests differ from the clean model's answers:"
            diff <(sed -n '1p;3p' "$tmp/clean") <(sed -n '1p;3p' "$tmp/out")
            fail=1
        fi
        if ! sed -n 2p "$tmp/out" | grep -q '"finish_reason": "error"'; then
            echo "FAIL: poison_id7 $flags: line 2 is not the failed request:"; cat "$tmp/out"; fail=1
        fi
    fi
done
[ $fail -eq 0 ] && echo "ok: $runs runs at TP=$np, every non-finite case reported with step and position"
exit $fail
