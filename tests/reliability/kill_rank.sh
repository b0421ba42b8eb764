#!/usr/bin/env bash
# Bounded failure: a rank SIGKILLed in the middle of `tpgen generate` ends the whole job.
#
# usage: kill_rank.sh TPGEN MPIEXEC MODEL NP VICTIM
#   VICTIM: the MPI rank to kill (0: the scheduler; others: a worker).
# Passes when, after the kill, every other rank is gone and the launcher has exited non-zero
# within 10 s, and the output names the lost rank ("rank VICTIM"). With Open MPI the launcher
# (mpirun) sees the rank die and kills the others; a worker left blocked in a collective
# would keep the job alive until the test's timeout.
set -u
tpgen=$1 mpiexec=$2 model=$3 np=$4 victim=$5
tmp=$(mktemp -d)
cleanup() {
    [ -n "${job:-}" ] && kill -9 "$job" 2>/dev/null
    for p in ${ranks:-}; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
die() { echo "FAIL: $*"; echo "--- launcher output"; head -c 4000 "$tmp/err"; exit 1; }

# enough work to still be running when the kill lands: many prompts, one at a time
for i in $(seq 1 400); do echo "1,2,$((i % 900 + 3))"; done > "$tmp/prompts.txt"
"$mpiexec" --oversubscribe --allow-run-as-root -np "$np" "$tpgen" generate --model "$model" \
    --prompts-file "$tmp/prompts.txt" --max-new-tokens 100 --ignore-eos --max-batch 1 --backend cpu --threads 1 \
    > "$tmp/out" 2> "$tmp/err" &
job=$!

# the ranks: processes running tpgen whose environment holds this job's rank numbers
find_rank() { # find_rank R -> pid
    local d p
    for d in /proc/[0-9]*; do # (no pgrep: procps is not on every fresh machine)
        p=${d#/proc/}
        [ "$p" = "$job" ] && continue
        tr '\0' ' ' 2>/dev/null < "$d/cmdline" | grep -qF -- "$tmp/prompts.txt" || continue
        if tr '\0' '\n' 2>/dev/null < "/proc/$p/environ" | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
            [ "$(readlink "/proc/$p/exe")" = "$(readlink -f "$tpgen")" ] && { echo "$p"; return; }
        fi
    done
}
for _ in $(seq 1 200); do # wait (<= 20 s) until generation is under way: results are printed
    [ -s "$tmp/out" ] && break
    kill -0 "$job" 2>/dev/null || die "the job ended before the kill (status: see below)"
    sleep 0.1
done
[ -s "$tmp/out" ] || die "no result within 20 s: generation never started"
ranks=
for r in $(seq 0 $((np - 1))); do
    p=$(find_rank "$r")
    [ -n "$p" ] || die "cannot find the process of rank $r"
    ranks="$ranks $p"
done
vpid=$(find_rank "$victim")
kill -9 "$vpid"
t0=$(date +%s.%N)
status=
for _ in $(seq 1 100); do # 10 s
    if ! kill -0 "$job" 2>/dev/null; then
        wait "$job"
        status=$?
        break
    fi
    sleep 0.1
done
secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
[ -n "$status" ] || die "the launcher still runs 10 s after rank $victim was killed"
# every other rank gone (a zombie waiting to be reaped counts as gone) within the same 10 s
alive() { [ -e "/proc/$1" ] && ! grep -q '^[0-9]* ([^)]*) [ZX]' "/proc/$1/stat" 2>/dev/null; }
while :; do
    left=
    for p in $ranks; do [ "$p" != "$vpid" ] && alive "$p" && left="$left $p"; done
    [ -z "$left" ] && break
    awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { exit !(b - a > 10) }' && break
    sleep 0.1
done
secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
if [ -n "$left" ]; then
    for p in $left; do echo "rank process $p: $(cat "/proc/$p/stat" 2>/dev/null | cut -d' ' -f1-3)"; done
    die "ranks still alive 10 s after rank $victim was killed: pids$left"
fi
[ "$status" -ne 0 ] || die "the launcher exited with status 0 after rank $victim was killed"
grep -Eq "rank $victim\b|process rank $victim " "$tmp/err" || die "the output does not name the lost rank $victim"
echo "ok: rank $victim of $np killed; every rank gone and status $status after ${secs} s; lost rank named:"
grep -E "rank $victim\b" "$tmp/err" | head -2
