#!/usr/bin/env bash
# The CPU test suite under AddressSanitizer + UndefinedBehaviorSanitizer, leak detection on.
# Builds build-san/ (-DTPGEN_SANITIZE=address,undefined, CPU engine only) and runs ctest there.
# Every UBSan finding is fatal (-fno-sanitize-recover); LeakSanitizer fails any test that leaks,
# except leaks inside the MPI runtime (tools/lsan.supp). Run by .ci/run after tools/test.sh.
#
# usage: tools/test-sanitize.sh [--all] [ctest args...]
#   default: the CI subset (see TPGEN_SANITIZE_SUBSET below and docs/RELIABILITY.md); --all: every
#   CPU test (about 4x the plain suite's time on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
all=0
if [ "${1:-}" = "--all" ]; then all=1; shift; fi
build=${TPGEN_SANITIZE_BUILD:-build-san}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTPGEN_CUDA=OFF -DTPGEN_SANITIZE=address,undefined >/dev/null
cmake --build "$build" -j"$(nproc)"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# fast_unwind_on_malloc=0: Open MPI's libraries have no frame pointers; the slow unwinder gives
# whole stacks, so tools/lsan.supp can match the MPI library that allocated.
export ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0:strict_string_checks=1:check_initialization_order=1:detect_stack_use_after_return=0
export LSAN_OPTIONS=suppressions=$PWD/tools/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# GPU tests report SKIPPED here (no CUDA build); everything else runs.
if [ $all -eq 1 ]; then
    ctest --test-dir "$build" --output-on-failure -j"$(nproc)" "$@"
else
    ctest --test-dir "$build" --output-on-failure -j"$(nproc)" -R "${TPGEN_SANITIZE_SUBSET}" "$@"
fi
