#!/usr/bin/env bash
# End-to-end reliability checks that compare two runs of tpgen (one case per invocation).
#
# usage: runs.sh CASE TPGEN MPIEXEC TINY_MODEL FAULTY_DIR NP
#   stdin_prompts    --prompts-file /dev/stdin (a pipe) gives what --prompt-ids gives
#   streams          two identical prompts in one sampled batch with one seed get different ids
#                    (each request draws from its own random stream)
#   hf_snapshot      a checkpoint in the HF cache layout (index and shard are symlinks into
#                    ../../blobs) loads and answers as the plain copy does
#   npos_huge        n_positions = 1e9 is only a limit: a 3-token answer stays small and fast
#                    (peak RSS < 600 MB; before the fix it was 8 GB and 17 s)
set -u
case=$1 tpgen=$2 mpiexec=$3 tiny=$4 faulty=$5 np=$6
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ "$np" -eq 0 ]; then launch=("$tpgen"); else launch=("$mpiexec" --oversubscribe --allow-run-as-root -np "$np" "$tpgen"); fi
cpu=(--backend cpu --threads 1)
die() { echo "FAIL: $*"; exit 1; }
run() { # run OUT CMD... : must succeed
    local out=$1
    shift
    timeout 60 "$@" > "$out" 2> "$out.err" || { cat "$out.err"; die "status $? from: $*"; }
}

case $case in
stdin_prompts)
    printf '1,2,3\n[4, 5]\n' > "$tmp/p.txt"
    run "$tmp/want" "${launch[@]}" generate --model "$tiny" --prompts-file "$tmp/p.txt" --max-new-tokens 5 --json "${cpu[@]}"
    # a pipe can be read once: the tokenizer check and the parser must share that one read
    cat "$tmp/p.txt" | run "$tmp/got" "${launch[@]}" generate --model "$tiny" --prompts-file /dev/stdin \
        --max-new-tokens 5 --json "${cpu[@]}"
    [ "$(wc -l < "$tmp/want")" -eq 2 ] || die "expected 2 result lines: $(cat "$tmp/want")"
    diff "$tmp/want" "$tmp/got" || die "--prompts-file /dev/stdin differs from the same file"
    ;;
streams)
    printf '1,2,3\n1,2,3\n' > "$tmp/p.txt"
    run "$tmp/out" "${launch[@]}" generate --model "$tiny" --prompts-file "$tmp/p.txt" --max-new-tokens 16 \
        --ignore-eos --temperature 1 --seed 5 --json "${cpu[@]}"
    sed -nE 's/.*"ids": \[([^]]*)\].*/\1/p' "$tmp/out" > "$tmp/ids"
    [ "$(wc -l < "$tmp/ids")" -eq 2 ] || die "expected 2 result lines: $(cat "$tmp/out")"
    [ "$(sed -n 1p "$tmp/ids")" != "$(sed -n 2p "$tmp/ids")" ] ||
        die "two identical prompts drew identical ids with one seed: the per-request random streams are ignored: $(cat "$tmp/ids")"
    ;;
hf_snapshot)
    run "$tmp/want" "${launch[@]}" generate --model "$tiny" --prompt-ids 1,2,3 --max-new-tokens 5 --json "${cpu[@]}"
    run "$tmp/got" "${launch[@]}" generate --model "$faulty/hf_snapshot/snapshots/abc" --prompt-ids 1,2,3 \
        --max-new-tokens 5 --json "${cpu[@]}"
    diff "$tmp/want" "$tmp/got" || die "the HF-cache-layout copy answers differently"
    ;;
npos_huge)
    limit_mb=${TPGEN_RSS_LIMIT_MB:-600}
    python3 - "$limit_mb" "${launch[@]}" generate --model "$faulty/npos_huge" --prompt-ids 1,2,3 --max-new-tokens 3 \
        --json "${cpu[@]}" <<'PY' || exit 1
import resource, subprocess, sys, time
limit = int(sys.argv[1]); cmd = sys.argv[2:]
t0 = time.time()
p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
secs = time.time() - t0
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024  # largest child (a rank), MB
if p.returncode != 0:
    sys.exit("FAIL: status %d: %s" % (p.returncode, p.stderr.decode()[-2000:]))
if b'"finish_reason": "length"' not in p.stdout:
    sys.exit("FAIL: no 3-token answer: %s" % p.stdout.decode())
if rss > limit:
    sys.exit("FAIL: peak RSS %d MB > %d MB: something is sized by n_positions=1e9" % (rss, limit))
print("ok: n_positions=1e9, 3 tokens: peak RSS %d MB (limit %d), %.1f s" % (rss, limit, secs))
PY
    ;;
*) die "unknown case $case" ;;
esac
echo "ok: $case"
