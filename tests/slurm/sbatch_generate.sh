#!/usr/bin/env bash
# tpgen.sbatch under Slurm, CPU, TP 2 through srun --mpi=pmix; every run's JSON must equal
# `mpirun -np 2 tpgen generate` with the same prompt and flags:
#  1. submitted from a checkout (build/bin/tpgen under $SLURM_SUBMIT_DIR; no TPGEN_BIN, no flag):
#     Slurm runs a spool copy of the script, so only $SLURM_SUBMIT_DIR can lead to the binary;
#  2. submitted from another directory with TPGEN_BIN, and 3. with --tpgen PATH;
#  4. from another directory with nothing: the job fails with exit code 2 and names every place
#     tried; TPGEN_BIN naming no file: the error names it;
#  5. the multi-node template on this one node, by srun and by mpirun inside the allocation.
# usage: sbatch_generate.sh TPGEN MPIEXEC FIXTURE TOKDIR WORKDIR   (SLURM_CONF: the test cluster)
source "$(dirname "$0")/lib.sh"
tpgen=$1 mpiexec=$2 fixture=$3 tokdir=$4 work=$5
mkdir -p "$work"
model="$work/model"
make_model "$fixture" "$tokdir" "$model"
# text of single letters: the random fixture's vocab (1001 ids) covers their tokens
prompt="a b c d e"
flags=(--max-new-tokens 12 --ignore-eos)
ref=$("$mpiexec" --oversubscribe --allow-run-as-root -np 2 "$tpgen" generate --model "$model" --prompt "$prompt" \
      --max-new-tokens 128 --json --backend cpu --threads 1 "${flags[@]}" 2>"$work/ref.err") ||
  { echo "FAIL: the mpirun reference failed:"; cat "$work/ref.err"; exit 1; }

# 1. from a checkout: SLURM_SUBMIT_DIR/build/bin/tpgen
checkout="$work/checkout"
mkdir -p "$checkout/build/bin" && ln -sf "$tpgen" "$checkout/build/bin/tpgen"
cd "$checkout"
submit "$work/from-checkout.out" "$repo/launcher/tpgen.sbatch" "$model" "$prompt" "${flags[@]}"
[ "$rc" = 0 ] || { echo "FAIL: job $job from a checkout exited $rc:"; cat "$work/from-checkout.out"; exit 1; }
grep -qF "tpgen.sbatch: job $job: $checkout/build/bin/tpgen on 2 tasks" "$work/from-checkout.out" ||
  { echo "FAIL: job $job did not run $checkout/build/bin/tpgen on 2 tasks:"; cat "$work/from-checkout.out"; exit 1; }
grep -q "TP=2" "$work/from-checkout.out" || { echo "FAIL: job $job did not run TP=2"; cat "$work/from-checkout.out"; exit 1; }
same_json "$(json_of "$work/from-checkout.out")" "$ref" "submitted from a checkout (job $job)"

# 2. and 3. from elsewhere, binary by TPGEN_BIN and by --tpgen
elsewhere="$work/elsewhere"
mkdir -p "$elsewhere" && cd "$elsewhere"
TPGEN_BIN="$tpgen" submit "$work/tpgen-bin.out" "$repo/launcher/tpgen.sbatch" "$model" "$prompt" "${flags[@]}"
[ "$rc" = 0 ] || { echo "FAIL: job $job (TPGEN_BIN) exited $rc:"; cat "$work/tpgen-bin.out"; exit 1; }
same_json "$(json_of "$work/tpgen-bin.out")" "$ref" "from $elsewhere with TPGEN_BIN (job $job)"
submit "$work/flag.out" "$repo/launcher/tpgen.sbatch" --tpgen "$tpgen" "$model" "$prompt" "${flags[@]}"
[ "$rc" = 0 ] || { echo "FAIL: job $job (--tpgen) exited $rc:"; cat "$work/flag.out"; exit 1; }
same_json "$(json_of "$work/flag.out")" "$ref" "from $elsewhere with --tpgen (job $job)"

# 4. nothing leads to a binary: exit code 2 and every place tried
submit "$work/none.out" "$repo/launcher/tpgen.sbatch" "$model" "$prompt"
code=$(job_field "$job" ExitCode)
[ "$rc" = 2 ] && [ "$code" = "2:0" ] || { echo "FAIL: job $job without a binary: sbatch $rc, ExitCode $code (want 2, 2:0)"; cat "$work/none.out"; exit 1; }
for want in "cannot find the tpgen binary" "--tpgen (not given)" "TPGEN_BIN (not set)" \
            "$elsewhere/build/bin/tpgen (no executable file)" "tpgen on PATH (not found)"; do
  grep -qF -- "$want" "$work/none.out" || { echo "FAIL: job $job output lacks \"$want\":"; cat "$work/none.out"; exit 1; }
done
echo "no binary: ok (exit code $code, every place named)"
TPGEN_BIN="$work/no-such-tpgen" submit "$work/bad-bin.out" "$repo/launcher/tpgen.sbatch" "$model" "$prompt"
grep -qF "TPGEN_BIN=$work/no-such-tpgen: no executable file there" "$work/bad-bin.out" && [ "$rc" = 2 ] ||
  { echo "FAIL: job $job with a wrong TPGEN_BIN (rc $rc):"; cat "$work/bad-bin.out"; exit 1; }
echo "wrong TPGEN_BIN: ok"

# 5. the multi-node template on one node: srun, then mpirun inside the allocation
for launch in srun mpirun; do
  TPGEN_LAUNCH=$launch submit "$work/multinode-$launch.out" --nodes=1 --ntasks-per-node=2 \
    "$repo/launcher/tpgen-multinode.sbatch" --tpgen "$tpgen" generate --model "$model" --prompt "$prompt" \
    --max-new-tokens 128 --json "${flags[@]}"
  [ "$rc" = 0 ] || { echo "FAIL: multi-node template by $launch, job $job exited $rc:"; cat "$work/multinode-$launch.out"; exit 1; }
  same_json "$(json_of "$work/multinode-$launch.out")" "$ref" "multi-node template by $launch (job $job)"
done
echo "1 passed, 0 failed"
