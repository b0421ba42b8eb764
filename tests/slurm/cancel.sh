#!/usr/bin/env bash
# Running tpgen.sbatch jobs end with every rank gone:
#  1. scancel: the job is CANCELLED and no tpgen process of it is left;
#  2. a rank killed (SIGKILL to rank 1): srun --kill-on-bad-exit=1 ends the other rank too, the
#     job FAILS with a non-zero exit code and srun's report of the task in its output.
# The job stays running without depending on timing: rank 0 blocks opening --prompts-file, a FIFO
# no one writes, while rank 1 waits for it in an MPI broadcast.
# usage: cancel.sh TPGEN FIXTURE TOKDIR WORKDIR   (SLURM_CONF: the test cluster)
source "$(dirname "$0")/lib.sh"
tpgen=$1 fixture=$(realpath "$2") tokdir=$(realpath "$3") work=$4
mkdir -p "$work" && cd "$work"
make_model "$fixture" "$tokdir" "$work/model"
fifo="$work/prompts.fifo"
rm -f "$fifo" && mkfifo "$fifo"

# start_job OUT: submits a job that stays running; sets job and ranks (its 2 tpgen pids)
start_job() {
  rm -f "$1"
  job=$(sbatch --parsable "${cpu_job[@]}" --output="$1" "$repo/launcher/tpgen.sbatch" --tpgen "$tpgen" \
        "$work/model" "@$fifo")
  job=${job%%;*}
  local i
  for ((i = 0; i < 300; i++)); do
    ranks=$(ranks_of "$job" "$tpgen")
    [ "$(echo "$ranks" | wc -w)" = 2 ] && [ "$(job_field "$job" JobState)" = RUNNING ] && return 0
    sleep 0.1
  done
  scancel "$job" || true
  echo "FAIL: job $job did not reach 2 running ranks in 30 s (state $(job_field "$job" JobState), pids: $ranks)"
  cat "$1"
  exit 1
}
# no_ranks_left: every tpgen process of $job is gone within 15 s
no_ranks_left() {
  local i left
  for ((i = 0; i < 150; i++)); do
    left=$(ranks_of "$job" "$tpgen")
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  echo "FAIL: $1: tpgen processes of job $job still running after 15 s: $left"
  kill -KILL $left 2>/dev/null || true
  exit 1
}

start_job "$work/scancel.out"
scancel "$job"
no_ranks_left "scancel"
wait_job "$job" 15
[ "$(job_field "$job" JobState)" = CANCELLED ] || { echo "FAIL: job $job is $(job_field "$job" JobState) after scancel"; exit 1; }
echo "scancel: ok (job $job CANCELLED, both ranks gone)"

start_job "$work/rank-dies.out"
rank1=""
for p in $ranks; do tr '\0' '\n' <"/proc/$p/environ" | grep -qx SLURM_PROCID=1 && rank1=$p; done
[ -n "$rank1" ] || { echo "FAIL: no rank with SLURM_PROCID=1 among $ranks"; exit 1; }
kill -KILL "$rank1"
no_ranks_left "rank 1 killed"
wait_job "$job" 15
state=$(job_field "$job" JobState) code=$(job_field "$job" ExitCode)
[ "$state" = FAILED ] && [ "${code%%:*}" != 0 ] || { echo "FAIL: job $job is $state, ExitCode $code after rank 1 died"; cat "$work/rank-dies.out"; exit 1; }
grep -q "^srun: error: .*task 1: Killed" "$work/rank-dies.out" ||
  { echo "FAIL: job $job output does not say task 1 was killed:"; cat "$work/rank-dies.out"; exit 1; }
echo "rank 1 killed: ok (job $job $state, ExitCode $code; $(grep '^srun: error: .*task 1' "$work/rank-dies.out"))"
echo "1 passed, 0 failed"
