#!/usr/bin/env bash
# Fuzzes every libFuzzer target (tests/fuzz/fuzz_<name>.c) for SECONDS each, starting from the
# committed seed corpus (tests/fuzz/corpus/<name>/) and the kept crash inputs
# (tests/fuzz/regress/<name>/). Builds them with clang into build-fuzz/ (-DTPGEN_FUZZ=ON:
# -fsanitize=fuzzer,address,undefined). Fails on any crash, sanitizer report, leak or hang (an
# input running over 10 s); the input is left in build-fuzz/artifacts/<name>/: fix the bug,
# then keep the input under tests/fuzz/regress/<name>/ so ctest replays it (label fuzz).
#   bash tools/dev/fuzz.sh [SECONDS] [TARGET...]     (default 30 s, every target)
# New inputs the fuzzer finds go to build-fuzz/corpus/<name>/ (not committed; kept across runs).
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-30}
shift || true
build=${TPGEN_FUZZ_BUILD:-build-fuzz}
CC=${CC_FUZZ:-clang}
# -O1 -g without -DNDEBUG: asserts stay on, stacks stay readable.
cmake -S . -B "$build" -DCMAKE_C_COMPILER="$CC" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" -DTPGEN_CUDA=OFF \
      -DTPGEN_FUZZ=ON >/dev/null
cmake --build "$build" -j"$(nproc)" --target fuzzers >/dev/null
targets=("$@")
if ((${#targets[@]} == 0)); then
  for f in "$build"/fuzz/fuzz_*; do targets+=("$(basename "$f" | sed 's/^fuzz_//')"); done
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# fuzz_request runs the engine in-process: a singleton MPI job (as root too), whose runtime keeps
# memory until exit by design (tools/dev/lsan.supp names only the MPI libraries; their stacks need
# the slow unwinder, fast_unwind_on_malloc=0, set for that target below: Open MPI has no frame
# pointers, and a leak's stack would end in "<unknown module>", which no suppression matches)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tools/dev/lsan.supp:print_suppressions=0}
failed=()
for t in "${targets[@]}"; do
  bin="$build/fuzz/fuzz_$t"
  [ -x "$bin" ] || { echo "tools/dev/fuzz.sh: no target $t (have: $(ls "$build/fuzz" | tr '\n' ' '))" >&2; exit 2; }
  work="$build/corpus/$t" art="$build/artifacts/$t"
  mkdir -p "$work" "$art"
  seeds=(tests/fuzz/corpus/"$t")
  [ -d tests/fuzz/regress/"$t" ] && seeds+=(tests/fuzz/regress/"$t")
  dict=(); [ -f tests/fuzz/"$t".dict ] && dict=(-dict=tests/fuzz/"$t".dict)
  log="$build/fuzz-$t.log"
  asan=$ASAN_OPTIONS; [ "$t" = request ] && asan+=:fast_unwind_on_malloc=0
  # stdout/stderr of the code under test are closed (error messages on every input); libFuzzer
  # and the sanitizers keep reporting.
  if ASAN_OPTIONS=$asan "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=8192 -close_fd_mask=3 \
        -print_final_stats=1 -artifact_prefix="$art/" "${dict[@]}" "$work" "${seeds[@]}" >"$log" 2>&1; then
    echo "fuzz $t: $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$') runs in ${secs} s, no crash"
  else
    echo "fuzz $t: FAILED (see $log; the input is in $art/)" >&2
    tail -n 40 "$log" >&2
    failed+=("$t")
  fi
done
if ((${#failed[@]})); then
  echo "tools/dev/fuzz.sh: crashes in: ${failed[*]}" >&2
  exit 1
fi
