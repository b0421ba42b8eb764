#!/usr/bin/env bash
# launcher/tpgen-triton.sbatch on the test Slurm cluster (tests/slurm/cluster.sh): tpgen at TP 2
# through srun, tritonserver in front of it on the batch node (attached by $TPGEN_URL). Checks:
# Triton's tpgen model gets ready; HTTP generate greedy == `mpirun -np 2 tpgen generate`; scancel
# ends the job with no tpgen rank and no tritonserver of it left.
# usage: slurm_triton.sh TPGEN MPIEXEC FIXTURE TOKDIR WORKDIR VENV   (SLURM_CONF: the test cluster)
source "$(dirname "$0")/../slurm/lib.sh"
tpgen=$1 mpiexec=$2 fixture=$(realpath "$3") tokdir=$(realpath "$4") work=$5 venv=$(realpath "$6")
mkdir -p "$work" && cd "$work"
make_model "$fixture" "$tokdir" "$work/model"
prompt="a b c d e"
want=$("$mpiexec" --oversubscribe --allow-run-as-root -np 2 "$tpgen" generate --model "$work/model" --prompt "$prompt" \
       --max-new-tokens 12 --ignore-eos --json --backend cpu --threads 1 | python3 -c 'import json,sys; print(json.dumps(json.loads(sys.stdin.read().splitlines()[-1])["text"]))')
read -r hp gp mp < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(3)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
out="$work/job.out"
rm -f "$out"
job=$(TRITON_VENV="$venv" TPGEN_TRITON_REPO="$repo/launcher/triton/model_repository" TRITON_METRICS_PORT=$mp \
      sbatch --parsable "${cpu_job[@]}" --output="$out" "$repo/launcher/tpgen-triton.sbatch" --tpgen "$tpgen" \
      "$work/model" "$hp" "$gp" --max-batch 8)
job=${job%%;*}
ready=""
for ((i = 0; i < 900; i++)); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$hp/v2/models/tpgen/ready")" = 200 ] && { ready=1; break; }
  case "$(job_field "$job" JobState)" in RUNNING | PENDING | CONFIGURING) ;; *) break ;; esac
  sleep 0.1
done
[ -n "$ready" ] || { scancel "$job" || true; echo "FAIL: Triton's tpgen model not ready (job $job $(job_field "$job" JobState)):"; cat "$out"; exit 1; }
echo "job $job: Triton ready on port $hp"
got=$(curl -s "http://127.0.0.1:$hp/v2/models/tpgen/generate" -d "{\"text_input\": \"$prompt\", \"max_tokens\": 12,
      \"exclude_input_in_output\": true, \"sampling_parameters\": \"{\\\"temperature\\\": 0, \\\"ignore_eos\\\": true}\"}" |
      python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin).get("text_output")))') || got="(no answer)"
[ "$got" = "$want" ] || { scancel "$job" || true; echo "FAIL: generate through the job's Triton: $got, tpgen generate: $want"; cat "$out"; exit 1; }
echo "generate through Triton == tpgen generate: ok ($got)"
ranks=$(ranks_of "$job" "$tpgen")
[ "$(echo "$ranks" | wc -w)" = 2 ] || { scancel "$job" || true; echo "FAIL: expected 2 tpgen ranks of job $job, found: $ranks"; exit 1; }
scancel "$job"
wait_job "$job" 60
left=$(ranks_of "$job" "$tpgen"; ranks_of "$job" "$venv"/lib/python3*/site-packages/pytriton/tritonserver/bin/tritonserver)
[ -z "$left" ] || { echo "FAIL: processes of job $job left after scancel: $left"; kill -KILL $left 2>/dev/null || true; exit 1; }
grep -q "tpgen: server stopped" "$out" || { echo "FAIL: tpgen did not drain and stop on scancel:"; cat "$out"; exit 1; }
echo "scancel: ok (job $job $(job_field "$job" JobState), tpgen drained, nothing left)"
echo "1 passed, 0 failed"
