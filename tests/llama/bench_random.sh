#!/usr/bin/env bash
# `tpgen bench --config CONFIG --random-weights` on a LLaMA shape (grouped-query attention, 8 query
# heads on 2 KV heads) at TP NP: a decode row and a prefill row come out, and the decode row's KV
# bytes are those of this rank's KV heads: 2 layers * 2 (K, V) * 16 dims * 4 bytes (2 in bf16) =
# 256 bytes per KV head and position, times (context + 1) positions; one KV head a rank at TP 2 and
# at TP 4 (the 2 KV heads replicated on 2 ranks each), two at TP 1. Nothing is timed against a bound.
# usage: bench_random.sh TPGEN MPIEXEC NP CONFIG [flags...]
set -u
tpgen=$1 mpiexec=$2 np=$3 config=$4
shift 4
out=$("$mpiexec" --oversubscribe --allow-run-as-root -np "$np" "$tpgen" bench --config "$config" --random-weights \
      --batch 1 --steps 2 --context 40 --prefill 16 --prefill-runs 1 --backend cpu --threads 1 --json "$@") || {
    echo "FAIL: bench exited $?"; exit 1; }
echo "$out"
kv_heads=$(( np >= 2 ? 1 : 2 )) es=4
case " $* " in *" --dtype bf16 "*) es=2 ;; esac
want=$(( 2 * 2 * 16 * es * kv_heads * 41 ))
fail=0
echo "$out" | grep -q "\"kind\": \"decode\"" || { echo "FAIL: no decode row"; fail=1; }
echo "$out" | grep -q "\"kind\": \"prefill\"" || { echo "FAIL: no prefill row"; fail=1; }
echo "$out" | grep "\"kind\": \"decode\"" | grep -q "\"kv_bytes\": $want," || {
    echo "FAIL: decode kv_bytes is not $want ($kv_heads KV heads a rank)"; fail=1; }
[ $fail = 0 ] && echo "ok: decode and prefill rows, $want KV bytes a rank at TP $np"
exit $fail
