#!/usr/bin/env bash
# launcher/tpgen-replicas.sbatch on the one-node test cluster: 2 replicas (TP 1, one srun step each)
# and HAProxy in the batch script. Once the job says "serving 2 replicas", completions through the
# balancer answer 200, a client keeps its replica (X-Tpgen-Replica) and clients reach both;
# `scancel --batch --signal=TERM` drains: the job COMPLETES with exit 0 and no tpgen of it is left.
# SKIPPED (77) without haproxy.
# usage: replicas.sh TPGEN FIXTURE TOKDIR WORKDIR   (SLURM_CONF: the test cluster)
source "$(dirname "$0")/lib.sh"
command -v haproxy >/dev/null || { echo "SKIPPED: haproxy is not installed (tools/dev/install-deps.sh)"; exit 77; }
tpgen=$1 fixture=$(realpath "$2") tokdir=$(realpath "$3") work=$4
mkdir -p "$work" && cd "$work"
make_model "$fixture" "$tokdir" "$work/model"
port=${TPGEN_SLURM_REPLICAS_PORT:-18810}
out="$work/replicas.out"
rm -f "$out"
job=$(sbatch --parsable "${cpu_job[@]}" --nodes=1 --ntasks-per-node=2 --output="$out" \
      "$repo/launcher/tpgen-replicas.sbatch" --tpgen "$tpgen" --tp 1 "$work/model" "$port")
job=${job%%;*}
for ((i = 0; i < 600; i++)); do
  grep -q "serving 2 replicas on" "$out" 2>/dev/null && break
  case "$(job_field "$job" JobState)" in COMPLETED | FAILED | CANCELLED | TIMEOUT) break ;; esac
  sleep 0.1
done
grep -q "serving 2 replicas on" "$out" 2>/dev/null ||
  { scancel "$job" || true; echo "FAIL: job $job never said it serves 2 replicas:"; cat "$out"; exit 1; }
python3 - "$port" <<'PY' || { scancel "$job" || true; cat "$out"; exit 1; }
import http.client, json, sys
port = int(sys.argv[1])
def ask(client):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("POST", "/v1/completions", json.dumps({"prompt": [1, 2, 3], "max_tokens": 4, "temperature": 0}),
              {"Content-Type": "application/json", "X-Tpgen-Client": client})
    r = c.getresponse()
    body = r.read()
    return r.status, r.getheader("X-Tpgen-Replica"), body
seen, bad = {}, 0
for i in range(8):
    st, rep, body = ask("c%d" % i)
    again = ask("c%d" % i)[1]
    if st != 200 or rep is None or again != rep:
        print("FAIL: client c%d: status %s, replica %s then %s (%s)" % (i, st, rep, again, body[:200]))
        bad += 1
    seen[rep] = seen.get(rep, 0) + 1
print("%s: 8 clients through the balancer, each kept its replica; per replica: %s" % ("FAIL" if bad or len(seen) < 2 else "ok", seen))
sys.exit(1 if bad or len(seen) < 2 else 0)
PY
scancel --batch --signal=TERM "$job"
wait_job "$job" 60
state=$(job_field "$job" JobState) code=$(job_field "$job" ExitCode)
[ "$state" = COMPLETED ] && [ "${code%%:*}" = 0 ] ||
  { echo "FAIL: job $job is $state, ExitCode $code after scancel --batch --signal=TERM:"; cat "$out"; exit 1; }
left=$(ranks_of "$job" "$tpgen")
[ -z "$left" ] || { echo "FAIL: tpgen processes of job $job left: $left"; kill -KILL $left; exit 1; }
grep -q "stopping: the replicas drain" "$out" || { echo "FAIL: the job did not say it drains:"; cat "$out"; exit 1; }
echo "ok: scancel --batch --signal=TERM: the replicas drained, job $job COMPLETED, exit 0, no tpgen left"
