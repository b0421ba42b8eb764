#!/usr/bin/env bash
# docs/EXTENDING.md, "A new CPU kernel tier", guarded: every tier of every CPU kernel family's
# tier list (the enums below) is named in that family's twin test, the test that runs the tier
# against the plain-C kernel (or the double reference) on the same inputs, and that test is
# registered in ctest. A tier added to a list without its case in the test fails here, naming
# the tier, the list and the test.
#   check_tier_twins.sh ROOT
set -u
root=$1
fail=0 n=0
# family | file with the tier enum | enum prefix | twin test source | cmake file | test program
families="
f32 rows GEMM|kernels/cpu/cpu_internal.h|F32_TIER_|tests/ops/test_cpu_ops.c|tests/ops.cmake|test_cpu_ops
bf16 GEMV|kernels/cpu/cpu_bf16.h|BF16_ISA_|tests/cpu_bf16/test_bf16_ops.c|tests/cpu_bf16.cmake|test_bf16_ops
int8 GEMV/GEMM|kernels/cpu/cpu_int8.c|I8_ISA_|tests/cpu_int8/test_int8_ops.c|tests/cpu_int8.cmake|test_int8_ops
attention|kernels/cpu/cpu_attn.h|ATT_ISA_|tests/cpu_attn/test_cpu_attn.c|tests/cpu_attn.cmake|test_cpu_attn"
while IFS='|' read -r fam src prefix test cmake prog; do
  [ -n "$fam" ] || continue
  for f in "$src" "$test" "$cmake"; do
    [ -f "$root/$f" ] || { echo "check_tier_twins: no file $f (family $fam)" >&2; exit 2; }
  done
  tiers=$(grep -m1 "typedef enum *{ *$prefix" "$root/$src" | grep -o "${prefix}[A-Z0-9_]*" | sed "s/^$prefix//" |
          tr 'A-Z' 'a-z' | grep -v '^n_')
  [ -n "$tiers" ] || { echo "check_tier_twins: no '$prefix' tier enum in $src" >&2; exit 2; }
  grep -Eq "add_test\(.*COMMAND +$prog( |\))" "$root/$cmake" ||
    { echo "FAIL: $fam: $prog (the twin test) is not registered with add_test in $cmake"; fail=1; }
  for t in $tiers; do
    n=$((n + 1))
    [ "$t" = c ] && continue # the twin itself
    if ! grep -q "\"$t\"" "$root/$test"; then
      echo "FAIL: $fam tier $t (${prefix}$(echo "$t" | tr a-z A-Z) in $src) has no twin test: \"$t\" is not a case of $test"
      fail=1
    fi
  done
  echo "$fam: tiers $(echo $tiers) in $test"
done <<<"$families"
[ $fail = 0 ] && echo "check_tier_twins: $n tiers, each with its twin test"
exit $fail
