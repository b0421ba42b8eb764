#!/usr/bin/env bash
# launcher/tpgen.sbatch given GPUs on the one-node test cluster (2 GPUs in gres.conf, stood in for
# by device files): the script picks --backend cuda, which the emulated device serves
# (TPGEN_CUDA_MODULE=lib/libtpgen-cuda-emu.so in the job's environment, docs/CUDA.md). TP 2 over
# srun --mpi=pmix; the job's JSON equals `mpirun -np 2 tpgen generate --backend cuda` on the same
# emulated device, and its log names the CUDA backend.
# usage: emu.sh TPGEN MPIEXEC FIXTURE TOKDIR WORKDIR   (SLURM_CONF: the test cluster; TPGEN_CUDA_MODULE)
source "$(dirname "$0")/lib.sh"
tpgen=$1 mpiexec=$2 fixture=$3 tokdir=$4 work=$5
[ -n "${TPGEN_CUDA_MODULE:-}" ] && [ -f "$TPGEN_CUDA_MODULE" ] ||
  { echo "FAIL: TPGEN_CUDA_MODULE does not name the emulated module"; exit 1; }
mkdir -p "$work"
model="$work/model"
make_model "$fixture" "$tokdir" "$model"
prompt="a b c d e"
flags=(--max-new-tokens 8 --ignore-eos --dtype f16)
ref=$("$mpiexec" --oversubscribe --allow-run-as-root -np 2 "$tpgen" generate --model "$model" --prompt "$prompt" \
      --json --backend cuda "${flags[@]}" 2>"$work/ref.err") ||
  { echo "FAIL: the mpirun reference failed:"; cat "$work/ref.err"; exit 1; }
cd "$work"
submit "$work/emu.out" --gpus-per-node=2 "$repo/launcher/tpgen.sbatch" --tpgen "$tpgen" "$model" "$prompt" "${flags[@]}"
[ "$rc" = 0 ] || { echo "FAIL: job $job exited $rc:"; cat "$work/emu.out"; exit 1; }
grep -q "backend cuda" "$work/emu.out" || { echo "FAIL: job $job did not run --backend cuda:"; cat "$work/emu.out"; exit 1; }
same_json "$(json_of "$work/emu.out")" "$ref" "tpgen.sbatch with 2 GPUs on the emulated device (job $job)"
echo "1 passed, 0 failed"
