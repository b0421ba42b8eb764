#!/usr/bin/env bash
# Runs a command that must fail cleanly on bad input, and checks how it fails.
#
# usage: expect_error.sh [--status N] [--abort-ok] REGEX COMMAND...
#
# Passes only when COMMAND (run under `timeout 60`):
#   - exits non-zero (exactly N with --status N);
#   - did not hang: not killed by the timeout (status 124 or 137);
#   - printed an error matching REGEX (grep -E) on stderr;
#   - printed exactly one "tpgen ... error:" line: an error every rank sees is reported once
#     by rank 0, not once per rank, and only one thing went wrong;
#   - did not end through MPI_Abort (unless --abort-ok): bad input should make every rank exit
#     with status 1; an abort means a rank-local error path was taken, or ranks disagreed and
#     the bounded wait in tp_die_all ran out;
#   - printed nothing on stdout (no partial results).
set -u
status=
abort_ok=0
while [ $# -gt 0 ]; do
    case $1 in
        --status) status=$2; shift 2 ;;
        --abort-ok) abort_ok=1; shift ;;
        *) break ;;
    esac
done
if [ $# -lt 2 ]; then
    echo "usage: expect_error.sh [--status N] [--abort-ok] REGEX COMMAND..." >&2
    exit 2
fi
regex=$1
shift

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s.%N)
timeout 60 "$@" > "$tmp/out" 2> "$tmp/err"
rc=$?
secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')

fail=0
why() {
    echo "FAIL: $*"
    fail=1
}
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    why "hung: killed by timeout after ${secs} s"
elif [ $rc -eq 0 ]; then
    why "exited with status 0 on bad input"
elif [ -n "$status" ] && [ $rc -ne "$status" ]; then
    why "exit status $rc, expected $status"
fi
if ! grep -Eq -- "$regex" "$tmp/err"; then
    why "stderr does not match: $regex"
fi
n_err=$(grep -Ec '^tpgen: (\[rank [0-9]+\] )?error:' "$tmp/err")
if [ "$n_err" -ne 1 ]; then
    why "$n_err error lines on stderr, expected exactly 1 (printed once per rank?)"
fi
if [ $abort_ok -eq 0 ] && grep -q 'MPI_ABORT' "$tmp/err"; then
    why "the job ended through MPI_Abort, not a clean exit of every rank"
fi
if [ -s "$tmp/out" ]; then
    why "stdout is not empty"
fi

if [ $fail -ne 0 ]; then
    echo "command (status $rc, ${secs} s): $*"
    echo "--- stderr"
    cat "$tmp/err"
    echo "--- stdout"
    head -c 2000 "$tmp/out"
    exit 1
fi
echo "ok (status $rc, ${secs} s): $(grep -E '^tpgen: (\[rank [0-9]+\] )?error:' "$tmp/err")"
exit 0
