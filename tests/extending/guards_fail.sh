#!/usr/bin/env bash
# The EXTENDING.md guards can fail: each is run on a copy of the tree with one step missed and
# must exit 1 naming what is missing.
#   guards_fail.sh ROOT
set -u
root=$1 here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
bad=0
expect_fail() { # NAME REGEX CMD...
  local name=$1 re=$2; shift 2
  out=$("$@" 2>&1); rc=$?
  if [ $rc = 1 ] && grep -Eq "$re" <<<"$out"; then echo "ok: $name fails: $(grep -E "$re" <<<"$out" | head -1)"
  else echo "FAIL: $name: rc $rc, wanted 1 and /$re/ in:"; echo "$out"; bad=1; fi
}
# a tier added to the int8 list without its case in test_int8_ops.c
for f in kernels/cpu/cpu_internal.h kernels/cpu/cpu_bf16.h kernels/cpu/cpu_int8.c kernels/cpu/cpu_attn.h \
         tests/ops/test_cpu_ops.c tests/cpu_bf16/test_bf16_ops.c tests/cpu_int8/test_int8_ops.c tests/cpu_attn/test_cpu_attn.c \
         tests/ops.cmake tests/cpu_bf16.cmake tests/cpu_int8.cmake tests/cpu_attn.cmake; do
  mkdir -p "$tmp/t/$(dirname "$f")" && cp "$root/$f" "$tmp/t/$f" || exit 2
done
sed -i 's/I8_ISA_AMX = 4 }/I8_ISA_AMX = 4, I8_ISA_AVX10 = 5 }/' "$tmp/t/kernels/cpu/cpu_int8.c"
expect_fail "a tier without a twin test" "int8 GEMV/GEMM tier avx10 .* has no twin test" bash "$here/check_tier_twins.sh" "$tmp/t"
# an architecture row without a parity fixture (a data folder with none)
mkdir -p "$tmp/data/codegen-only" && cp "$root/tests/data/tiny-f32/config.json" "$root/tests/data/tiny-f32/expected.json" "$tmp/data/codegen-only/"
expect_fail "an architecture without a parity fixture" "LlamaForCausalLM .* has no parity fixture" \
  bash "$here/check_arch_fixtures.sh" "$root" "$tmp/data"
exit $bad
