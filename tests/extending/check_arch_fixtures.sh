#!/usr/bin/env bash
# docs/EXTENDING.md, "A new architecture", guarded: every row of the architecture table
# (engine/model/arch.c, ARCHS) has
#   - a row for each tp_arch_id of arch.h (an enum value without a row is a NULL hf_class),
#   - a parity fixture: a folder of DATA with expected.json (tpgen_parity_fixtures registers
#     parity_<folder>_tp1/2/4 for it) whose config.json names the row's HF class,
#   - a fixture maker under tools/fixtures/ that writes that class (so the fixture can be remade).
# Fails naming the architecture and the missing step.
#   check_arch_fixtures.sh ROOT [DATA]     (DATA: ROOT/tests/data)
set -u
root=$1
data=${2:-$root/tests/data}
arch_c=$root/engine/model/arch.c arch_h=$root/engine/model/arch.h
for f in "$arch_c" "$arch_h"; do [ -f "$f" ] || { echo "check_arch_fixtures: no file $f" >&2; exit 2; }; done
fail=0
# tp_arch_id's values but TP_ARCH_COUNT, each with its [TP_ARCH_X] = row in ARCHS
ids=$(sed -n '/typedef enum.*tp_arch_id/p' "$arch_h" | grep -o 'TP_ARCH_[A-Z0-9_]*' | grep -v '^TP_ARCH_COUNT$')
[ -n "$ids" ] || { echo "check_arch_fixtures: no tp_arch_id values in $arch_h" >&2; exit 2; }
for id in $ids; do
  grep -q "\[$id\] *= *{" "$arch_c" || { echo "FAIL: $id (engine/model/arch.h) has no row in ARCHS (engine/model/arch.c)"; fail=1; }
done
classes=$(grep -o '\.hf_class *= *"[^"]*"' "$arch_c" | sed 's/.*"\(.*\)"/\1/')
[ -n "$classes" ] || { echo "check_arch_fixtures: no .hf_class in $arch_c" >&2; exit 2; }
for cls in $classes; do
  fixtures=""
  for d in "$data"/*/; do
    [ -f "$d/expected.json" ] && [ -f "$d/config.json" ] && grep -q "\"$cls\"" "$d/config.json" && fixtures="$fixtures $(basename "$d")"
  done
  if [ -z "$fixtures" ]; then
    echo "FAIL: $cls (engine/model/arch.c) has no parity fixture: no folder of $data with expected.json and a config.json naming \"$cls\""
    fail=1
  else
    echo "$cls: parity fixtures$fixtures"
  fi
  if ! grep -lq "$cls" "$root"/tools/fixtures/*.py 2>/dev/null; then
    echo "FAIL: $cls (engine/model/arch.c) has no fixture maker: no tools/fixtures/*.py writes \"$cls\""
    fail=1
  fi
done
[ $fail = 0 ] && echo "check_arch_fixtures: $(echo $classes | wc -w) architectures, each with a table row, a parity fixture and a maker"
exit $fail
