#!/usr/bin/env bash
# A tpgen.sbatch job whose model path is wrong ends with tpgen's error in its output (naming the
# path), srun's report of the failed tasks, and a non-zero exit code in `scontrol show job`
# (no accounting daemon needed: the job record stays MinJobAge seconds).
# usage: bad_model.sh TPGEN WORKDIR   (SLURM_CONF: the test cluster)
source "$(dirname "$0")/lib.sh"
tpgen=$1 work=$2
mkdir -p "$work" && cd "$work"
missing="$work/no-such-model"
rm -rf "$missing"
out="$work/bad-model.out"
submit "$out" "$repo/launcher/tpgen.sbatch" --tpgen "$tpgen" "$missing" "a b c"
state=$(job_field "$job" JobState) code=$(job_field "$job" ExitCode)
[ "$state" = FAILED ] && [ "$rc" != 0 ] ||
  { echo "FAIL: job $job with a wrong model path: JobState $state, ExitCode $code (want FAILED, non-zero)"; cat "$out"; exit 1; }
grep -q "^tpgen: error: .*$missing" "$out" || { echo "FAIL: job $job output lacks tpgen's error naming $missing:"; cat "$out"; exit 1; }
# srun's report names a task that exited non-zero; not necessarily with the job's code: a rank
# still in its exit (slow under a sanitizer: LeakSanitizer's check) when srun ends the step after
# the first failed task is reported "Terminated", and its signal can be the job's ExitCode
grep -q "^srun: error: .*Exited with exit code [1-9]" "$out" || { echo "FAIL: job $job output lacks srun's report:"; cat "$out"; exit 1; }
echo "wrong model path: ok (job $job $state, ExitCode $code): $(grep '^tpgen: error' "$out")"
echo "1 passed, 0 failed"
