#!/usr/bin/env bash
# launcher/tpgen-serve.sbatch on the test Slurm cluster (tests/slurm/cluster.sh): the job serves
# (the ready line with its port is in the job's output), a greedy completion over HTTP equals
# `tpgen generate` run with mpirun, and scancel drains: rank 0 prints "server stopped" and no
# tpgen process of the job is left.
# usage: slurm_serve.sh TPGEN MPIEXEC FIXTURE TOKDIR WORKDIR   (SLURM_CONF: the test cluster)
source "$(dirname "$0")/../slurm/lib.sh"
tpgen=$(realpath "$1") mpiexec=$2 fixture=$(realpath "$3") tokdir=$(realpath "$4") work=$5
mkdir -p "$work" && cd "$work"
make_model "$fixture" "$tokdir" "$work/model"
out="$work/serve.out"
rm -f "$out"
job=$(sbatch --parsable "${cpu_job[@]}" --output="$out" "$repo/launcher/tpgen-serve.sbatch" --tpgen "$tpgen" \
      "$work/model" 0 --host 127.0.0.1)
job=${job%%;*}
url=""
for ((i = 0; i < 600; i++)); do
  url=$(sed -n 's/^tpgen: serving model on \(http:.*\)$/\1/p' "$out" 2>/dev/null || true)
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { scancel "$job" || true; echo "FAIL: no ready line from job $job in 60 s:"; cat "$out"; exit 1; }
got=$(curl -s "$url/v1/completions" -H 'Content-Type: application/json' \
      -d '{"prompt": "a b c d e", "max_tokens": 12, "temperature": 0, "ignore_eos": true}')
want=$("$mpiexec" --oversubscribe --allow-run-as-root -np 2 "$tpgen" generate --model "$work/model" \
       --prompt "a b c d e" --max-new-tokens 12 --ignore-eos --json --backend cpu --threads 1 2>/dev/null)
python3 - "$got" "$want" <<'PY' || { scancel "$job" || true; exit 1; }
import json, sys
got, want = json.loads(sys.argv[1]), json.loads(sys.argv[2])
if got["choices"][0]["text"] != want["text"]:
    sys.exit("FAIL: the job's completion %r differs from tpgen generate's %r" % (got["choices"][0]["text"], want["text"]))
print("completion from the Slurm job == tpgen generate: ok")
PY
scancel "$job"
wait_job "$job" 40
left=$(ranks_of "$job" "$tpgen")
[ -z "$left" ] || { echo "FAIL: tpgen processes of job $job left after scancel: $left"; kill -KILL $left; exit 1; }
grep -q "^tpgen: server stopped" "$out" || { echo "FAIL: job $job did not drain (no 'server stopped'):"; cat "$out"; exit 1; }
echo "scancel drained the server: ok (job $job $(job_field "$job" JobState))"
echo "1 passed, 0 failed"
