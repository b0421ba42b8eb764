# Sourced by the tests/slurm/*.sh tests: a model dir, sbatch with a bound, the job's record.
# The tests run against the cluster of tests/slurm/cluster.sh (ctest starts it as a fixture and
# passes its SLURM_CONF). Every job is CPU-only, 2 tasks of 1 CPU, with a 2-minute time limit (x scale), so
# none outlives a failed test for long; the cluster's stop cancels what is left.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# a two-node cluster that could not be made here (no namespaces): cluster.sh wrote why
if [ -n "${SLURM_CONF:-}" ] && [ -f "$(dirname "$(dirname "$SLURM_CONF")")/unavailable" ]; then
  echo "SKIPPED: $(cat "$(dirname "$(dirname "$SLURM_CONF")")/unavailable")"
  exit 77
fi
[ -n "${SLURM_CONF:-}" ] && [ -f "$SLURM_CONF" ] || { echo "FAIL: SLURM_CONF does not name the test cluster's slurm.conf (start tests/slurm/cluster.sh)"; exit 1; }
unset TPGEN_BIN TPGEN_LAUNCH  # the tests say where the binary is
# (times x TPGEN_TIMEOUT_SCALE: a sanitizer build runs several times slower, tests/sanitize.cmake)
scale=${TPGEN_TIMEOUT_SCALE:-1}
cpu_job=(--gpus-per-node=0 --cpus-per-task=1 --time=$((2 * scale)))

# make_model FIXTURE TOKDIR OUT: the random fixture's weights with the real CodeGen tokenizer
make_model() {
  rm -rf "$3" && mkdir -p "$3"
  cp "$1"/config.json "$1"/*.safetensors "$3"/
  cp "$2"/vocab.json "$2"/merges.txt "$2"/added_tokens.json "$2"/special_tokens_map.json "$3"/
}

# submit OUT [sbatch flags and script args]: submits and waits for the job's end (at most 90 s x
# scale, then cancels it); sets job and rc (the job's exit code). sbatch --wait is not used: it polls
# with a growing interval and adds up to 10 s per job.
submit() {
  local out=$1; shift
  rm -f "$out"
  job=$(sbatch --parsable "${cpu_job[@]}" --output="$out" "$@") || { echo "FAIL: sbatch did not submit ($*)"; exit 1; }
  job=${job%%;*}
  wait_job "$job" $((90 * scale))
  rc=$(job_field "$job" ExitCode)
  rc=${rc%%:*}
}

# wait_job ID SECONDS: until the job has ended (FAIL, and cancel it, after SECONDS)
wait_job() {
  local i state
  for ((i = 0; i < $2 * 10; i++)); do
    state=$(job_field "$1" JobState)
    case "$state" in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE) return 0 ;; esac
    sleep 0.1
  done
  scancel "$1" || true
  echo "FAIL: job $1 still $state after $2 s"
  exit 1
}

# job_field ID FIELD: one field of `scontrol show job` (kept 300 s after the end: MinJobAge)
job_field() { scontrol show job "$1" -o | tr ' ' '\n' | sed -n "s/^$2=//p"; }

# json_of FILE: the JSON line of a job's output
json_of() { grep '^{' "$1" || true; }

# same_json A B WHAT: the two JSON texts parse to equal objects
same_json() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
a, b, what = sys.argv[1:]
try:
    ja, jb = json.loads(a), json.loads(b)
except json.JSONDecodeError as e:
    sys.exit(f"FAIL: {what}: not JSON ({e}): {a!r} / {b!r}")
if ja != jb:
    sys.exit(f"FAIL: {what}: the job's JSON differs from mpirun's:\n  job:    {a}\n  mpirun: {b}")
print(f"{what}: ok")
PY
}

# ranks_of ID TPGEN: pids of the tpgen processes that belong to job ID
ranks_of() {
  local exe p
  exe=$(readlink -f "$2")
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/exe" 2>/dev/null)" = "$exe" ] || continue
    tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qx "SLURM_JOB_ID=$1" && echo "${p#/proc/}"
  done
  return 0
}

# multinode: the two-node cluster's settings (cluster.sh start DIR 2): exports Open MPI's TCP-only
# settings for the bridge's network, sets node1_addr and node2_addr
multinode() {
  local env
  env="$(dirname "$SLURM_CONF")/multinode.env"
  [ -f "$env" ] || { echo "FAIL: $SLURM_CONF is not a two-node test cluster (tests/slurm/cluster.sh start DIR 2)"; exit 1; }
  source "$env"
}
