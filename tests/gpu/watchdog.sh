#!/bin/sh
# The NCCL watchdog test: runs `mpirun ... test_nccl_comm --watchdog` (the arguments) and passes
# when the job ended non-zero with rank 0's watchdog message naming the stuck all-reduce.
# Exit 77 (SKIPPED) when the test program found too few GPUs.
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
case "$out" in *SKIPPED*) exit 77 ;; esac
if ! printf '%s\n' "$out" | grep -q "NCCL watchdog on rank 0: all-reduce #1 (1024 x F16) has not completed"; then
    echo "FAIL: no watchdog message naming rank 0 and all-reduce #1"
    exit 1
fi
if [ "$rc" -eq 0 ]; then
    echo "FAIL: the job exited 0 after the watchdog fired"
    exit 1
fi
echo "ok: the watchdog aborted the stuck all-reduce and the job exited $rc"
