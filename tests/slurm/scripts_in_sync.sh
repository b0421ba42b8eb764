#!/usr/bin/env bash
# Every launcher/*.sbatch parses (bash -n) and carries the same common block (finding the binary,
# choosing the backend) between its "--- common to launcher/*.sbatch" and "--- end common ---"
# lines: Slurm runs a spool copy of each script, so they cannot source a shared file.
# usage: scripts_in_sync.sh
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
block() { sed -n '/^# --- common to launcher\/\*\.sbatch/,/^# --- end common ---/p' "$1"; }
first="" ref=""
n=0
for f in "$repo"/launcher/*.sbatch; do
  bash -n "$f" || { echo "FAIL: $f does not parse"; exit 1; }
  b=$(block "$f")
  grep -q "^find_tpgen()" <<<"$b" || { echo "FAIL: $f has no common block with find_tpgen"; exit 1; }
  if [ -z "$first" ]; then first=$f ref=$b
  elif [ "$b" != "$ref" ]; then
    echo "FAIL: the common block of $f differs from $first's:"; diff <(echo "$ref") <(echo "$b") || true; exit 1
  fi
  n=$((n + 1))
done
((n >= 2)) || { echo "FAIL: expected at least 2 launcher/*.sbatch scripts, found $n"; exit 1; }
echo "$n scripts, one common block: ok"
echo "1 passed, 0 failed"
