#!/usr/bin/env bash
# The missing-barrier fault (docs/CUDA.md "The emulated device"): the emulated module and its copy
# built with one __syncthreads() removed from rotary_kv_kernel (tests/gpu/emu/drop_barrier.py) run
# the same rotary_kv_write (test_emu_barrier) under several thread orders (TPGEN_EMU_SEED).
# Passes when the emulator catches the fault:
#   - the real module gives the same bytes under every order, and agrees with the CPU backend;
#   - the copy gives other bytes than the real module under every order tried.
# A fixed thread order would let the copy pass (test_emu_barrier.c says why), so this fails then.
#
# usage: missing_barrier.sh REAL_MODULE COPY_MODULE TEST_EMU_BARRIER [SEED...]
set -u
if [ $# -lt 3 ]; then
    echo "usage: missing_barrier.sh REAL_MODULE COPY_MODULE TEST_EMU_BARRIER [SEED...]" >&2
    exit 2
fi
real=$1 copy=$2 prog=$3
shift 3
seeds=${*:-1 2 3}
fail=0
run() { # MODULE SEED -> the program's line, or dies
    local out
    if ! out=$(TPGEN_CUDA_MODULE=$1 TPGEN_EMU_SEED=$2 timeout 60 "$prog" 2>&1); then
        echo "FAIL: $prog on $1 (seed $2) failed:"
        echo "$out"
        exit 1
    fi
    echo "$out" | grep '^rotary_kv_write: hash'
}
ref=
for s in $seeds; do
    r=$(run "$real" "$s") || { echo "$r"; exit 1; }
    c=$(run "$copy" "$s") || { echo "$c"; exit 1; }
    echo "seed $s  real: ${r#rotary_kv_write: }"
    echo "seed $s  copy: ${c#rotary_kv_write: }"
    rh=$(echo "$r" | sed -E 's/.*hash ([0-9a-f]+);.*/\1/')
    ch=$(echo "$c" | sed -E 's/.*hash ([0-9a-f]+);.*/\1/')
    [ -z "$ref" ] && ref=$rh
    if [ "$rh" != "$ref" ]; then
        echo "FAIL: the real module's result changes with the thread order (seed $s): a race in the real kernel?"
        fail=1
    fi
    if ! echo "$r" | grep -q '; 0 of '; then
        echo "FAIL: the real module disagrees with the CPU backend (seed $s)"
        fail=1
    fi
    if [ "$ch" = "$rh" ]; then
        echo "FAIL: the copy without the barrier gave the real module's bytes under seed $s: the fault passed silently"
        fail=1
    fi
done
if [ $fail -eq 0 ]; then
    echo "ok: the missing barrier changed the result under every thread order tried; the real kernel is stable"
fi
exit $fail
