#!/usr/bin/env bash
# The CPU test suite under AddressSanitizer + UndefinedBehaviorSanitizer, leak detection on.
# Builds build-san/ (-DTPGEN_SANITIZE=address,undefined, CPU engine only) and runs ctest there.
# Every UBSan finding is fatal (-fno-sanitize-recover); LeakSanitizer fails any test that leaks,
# except leaks inside the MPI runtime (tools/lsan.supp). Run by .ci/run after tools/test.sh.
#
# usage: tools/test-sanitize.sh [--all | --thread] [ctest args...]
#   default: the CI subset (see TPGEN_SANITIZE_SUBSET below and docs/RELIABILITY.md); --all: every
#   CPU test (about 4x the plain suite's time on 2 cores).
#   --thread: ThreadSanitizer instead, for the threads that share state: builds build-tsan/
#   (-DTPGEN_SANITIZE=thread; only tpgen and the canary, which is all these tests run) and runs
#   the server tests (label server: libmicrohttpd's connection threads and the engine thread)
#   and the sanitizer canaries (sanitize_catches_race shows TSan is on). Any report fails the
#   test (TSan exits 66); tools/tsan.supp holds the few reports wholly inside Open MPI.
set -euo pipefail
cd "$(dirname "$0")/.."
all=0
if [ "${1:-}" = "--all" ]; then all=1; shift; fi
if [ "${1:-}" = "--thread" ]; then
    shift
    build=${TPGEN_SANITIZE_BUILD:-build-tsan}
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPGEN_CUDA=OFF -DTPGEN_SANITIZE=thread >/dev/null
    cmake --build "$build" -j"$(nproc)" --target tpgen sanitize_canary
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
    # second_deadlock_stack: both stacks of a lock-order report; the run goes on after a report
    # (halt_on_error=0) so one test shows every race it meets, and still exits 66.
    export TSAN_OPTIONS=suppressions=$PWD/tools/tsan.supp:second_deadlock_stack=1:halt_on_error=0
    exec ctest --test-dir "$build" --output-on-failure -j"$(nproc)" -L 'server|sanitize' "$@"
fi
build=${TPGEN_SANITIZE_BUILD:-build-san}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTPGEN_CUDA=OFF -DTPGEN_SANITIZE=address,undefined >/dev/null
cmake --build "$build" -j"$(nproc)"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# fast_unwind_on_malloc=0: Open MPI's libraries have no frame pointers; the slow unwinder gives
# whole stacks, so tools/lsan.supp can match the MPI library that allocated.
export ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0:strict_string_checks=1:check_initialization_order=1:detect_stack_use_after_return=0
export LSAN_OPTIONS=suppressions=$PWD/tools/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The CI subset: LeakSanitizer's exit-time check costs seconds per MPI process, so the whole
# suite takes several times the plain one (docs/RELIABILITY.md has the figures). The subset keeps
# one test of each kind of code path: the sanitizer canaries, the unit tests, the loader's
# error paths, every kind of reliability test (ids, early checks, config, index paths, pipes,
# random streams incl. the full-logits sampler with odd V, n_positions, block boundaries),
# HF parity at TP 1 and 2 (the parity harness under LSan), and a rank failing alone.
: "${TPGEN_SANITIZE_SUBSET:=^(sanitize_catches_.*|sampler|safetensors|cpu_ops|tokenizer_unit|tokenizer_shared_cases|errors_ckpt_(truncated|index_missing_shard|header_not_json)|engine_die_all_alone|parity_tiny-f32_tp[12]|reliability_(bf16_round|id_3e9|id_3e9_one_rank|id_file_array|id_score|early_prompt_id|early_score_id|cfg_embd_huge|cfg_layers_huge|index_escape|index_absolute|stdin_prompts_np2|streams_np2|hf_snapshot_np2|npos_huge_np2|parity_block3_tp2))\$}"
# GPU tests report SKIPPED here (no CUDA build); everything else runs.
if [ $all -eq 1 ]; then
    ctest --test-dir "$build" --output-on-failure -j"$(nproc)" "$@"
else
    ctest --test-dir "$build" --output-on-failure -j"$(nproc)" -R "${TPGEN_SANITIZE_SUBSET}" "$@"
fi
