#!/usr/bin/env bash
# The CPU test suite under AddressSanitizer + UndefinedBehaviorSanitizer, leak detection on.
# Builds build-san/ (-DTPGEN_SANITIZE=address,undefined, CPU engine only) and runs ctest there.
# Every UBSan finding is fatal (-fno-sanitize-recover); LeakSanitizer fails any test that leaks,
# except leaks inside the MPI runtime (tools/dev/lsan.supp). Run by .ci/run after tools/test.sh.
#
# usage: tools/dev/test-sanitize.sh [--all | --slice K/N | --thread] [ctest args...]
#   default (CI): the fixed subset (TPGEN_SANITIZE_SUBSET below) and one rotating slice of every
#   other test: slice K of N (N = TPGEN_SANITIZE_SLICES, default 10), K from the checked-out
#   commit (its hash mod N; the day number mod N outside a git checkout), so each commit runs a
#   reproducible part and consecutive commits cover the whole suite. A test's slice is the cksum
#   of its name mod N: adding a test moves no other. The script prints K/N and the command that
#   reruns that slice.
#   --slice K/N: just slice K of N (0 <= K < N), e.g. to rerun the one a CI run drew.
#   --all: every CPU test (far over what CI can give it: 137 tests took 38 min at -j2 in round 1,
#   and the suite has about twice as many now; docs/RELIABILITY.md).
#   --thread: ThreadSanitizer instead, for the threads that share state: builds build-tsan/
#   (-DTPGEN_SANITIZE=thread; only tpgen, the canary and test_request_params, which is all these
#   tests run) and runs the server tests (label server: libmicrohttpd's connection threads and the
#   engine thread) and the sanitizer canaries (sanitize_catches_race shows TSan is on). Any report fails the
#   test (TSan exits 66); tools/dev/tsan.supp holds the few reports wholly inside Open MPI.
set -euo pipefail
cd "$(dirname "$0")/../.."
all=0 slice=
if [ "${1:-}" = "--all" ]; then all=1; shift; fi
if [ "${1:-}" = "--slice" ]; then
    slice=${2:-}
    [[ "$slice" =~ ^([0-9]+)/([1-9][0-9]*)$ ]] && [ "${BASH_REMATCH[1]}" -lt "${BASH_REMATCH[2]}" ] ||
        { echo "test-sanitize: --slice expects K/N with 0 <= K < N, got \"$slice\"" >&2; exit 2; }
    shift 2
fi
if [ "${1:-}" = "--thread" ]; then
    shift
    build=${TPGEN_SANITIZE_BUILD:-build-tsan}
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPGEN_CUDA=OFF -DTPGEN_SANITIZE=thread >/dev/null
    cmake --build "$build" -j"$(nproc)" --target tpgen sanitize_canary test_request_params test_routes_documented
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
    # second_deadlock_stack: both stacks of a lock-order report; the run goes on after a report
    # (halt_on_error=0) so one test shows every race it meets, and still exits 66.
    export TSAN_OPTIONS=suppressions=$PWD/tools/dev/tsan.supp:second_deadlock_stack=1:halt_on_error=0
    exec ctest --test-dir "$build" --output-on-failure -j"$(nproc)" -L 'server|sanitize' "$@"
fi
build=${TPGEN_SANITIZE_BUILD:-build-san}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTPGEN_CUDA=OFF -DTPGEN_SANITIZE=address,undefined >/dev/null
cmake --build "$build" -j"$(nproc)"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# fast_unwind_on_malloc=0: Open MPI's libraries have no frame pointers; the slow unwinder gives
# whole stacks, so tools/dev/lsan.supp can match the MPI library that allocated.
export ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0:strict_string_checks=1:check_initialization_order=1:detect_stack_use_after_return=0
export LSAN_OPTIONS=suppressions=$PWD/tools/dev/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The CI subset: LeakSanitizer's exit-time check costs seconds per MPI process, so the whole
# suite takes several times the plain one (docs/RELIABILITY.md has the figures). The subset keeps
# one test of each kind of code path: the sanitizer canaries, the unit tests, the loader's
# error paths, every kind of reliability test (ids, early checks, config, index paths, pipes,
# random streams incl. the full-logits sampler with odd V, n_positions, block boundaries),
# HF parity at TP 1 and 2 (the parity harness under LSan), and a rank failing alone.
: "${TPGEN_SANITIZE_SUBSET:=^(sanitize_catches_.*|sampler|safetensors|cpu_ops|tokenizer_unit|tokenizer_shared_cases|errors_ckpt_(truncated|index_missing_shard|header_not_json)|engine_die_all_alone|speculate_kv_edge|parity_tiny-f32_tp[12]|reliability_(bf16_round|id_3e9|id_3e9_one_rank|id_file_array|id_score|early_prompt_id|early_score_id|cfg_embd_huge|cfg_layers_huge|index_escape|index_absolute|stdin_prompts_np2|streams_np2|hf_snapshot_np2|npos_huge_np2|parity_block3_tp2))\$}"
# GPU tests report SKIPPED here (no CUDA build); everything else runs.
if [ $all -eq 1 ]; then
    exec ctest --test-dir "$build" --output-on-failure -j"$(nproc)" "$@"
fi
# slice_tests K N: the names of the tests of slice K of N, outside the fixed subset, one a line.
# A fixture's setup or cleanup test is never drawn by itself (ctest adds them to the tests that
# need them): drawn alone, slurm_cluster_start left a Slurm cluster running after the run.
slice_tests() {
    ctest --test-dir "$build" --show-only=json-v1 | python3 -c '
import json, sys
for t in json.load(sys.stdin)["tests"]:
    props = {p["name"] for p in t.get("properties", [])}
    if not props & {"FIXTURES_SETUP", "FIXTURES_CLEANUP"}:
        print(t["name"])' | while read -r t; do
        [[ "$t" =~ $TPGEN_SANITIZE_SUBSET ]] && continue
        [ $(( $(printf '%s' "$t" | cksum | cut -d' ' -f1) % $2 )) -eq "$1" ] && echo "$t"
        true
    done
}
# the regex of exactly those names (test names hold only [A-Za-z0-9_.-]; the dots escaped)
names_regex() { printf '^(%s)$' "$(sed 's/\./\\./g' | paste -sd'|')"; }
if [ -n "$slice" ]; then
    exec ctest --test-dir "$build" --output-on-failure -j"$(nproc)" -R "$(slice_tests "${slice%/*}" "${slice#*/}" | names_regex)" "$@"
fi
n=${TPGEN_SANITIZE_SLICES:-10}
if head=$(git rev-parse HEAD 2>/dev/null); then k=$(( 16#${head:0:7} % n )) why="commit ${head:0:12}"
else k=$(( $(date -u +%s) / 86400 % n )) why="day $(date -u +%F)"; fi
picked=$(slice_tests "$k" "$n")
echo "test-sanitize: the fixed subset and slice $k/$n ($why: $(echo "$picked" | grep -c .) tests;" \
     "rerun it alone with: tools/dev/test-sanitize.sh --slice $k/$n)"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" \
      -R "($TPGEN_SANITIZE_SUBSET)|($(echo "$picked" | names_regex))" "$@"
