#!/usr/bin/env bash
# The kernel cache is per machine (kernels/cpu/cpu_tune.c machine_id): one TPGEN_KERNEL_CACHE file
# shared by two hosts (a cluster's home directory) holds a line for each, and a host never takes
# the other's choice. `tpgen bench` on a config whose attention choice is measured (D = 64), on
# this host, then under another host name (a UTS namespace: needs root; SKIPPED otherwise):
#  1. this host measures and saves; 2. this host again: cached; 3. the other host: measured
#     again, not cached; 4. the file has one line per host, each line's machine field naming it.
# usage: cache_per_host.sh TPGEN D64_CONFIG
set -euo pipefail
tpgen=$1 d64=$2
why=$(unshare --uts true 2>&1) || { echo "SKIPPED: cannot make a UTS namespace for a second host name: $why"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cache=$tmp/shared/cpu-kernels.tsv
fails=0
run_as() { # HOST: the "cpu attention: BUILD: WHY" line of a bench run under host name HOST
  unshare --uts sh -c 'hostname "$1" && shift && exec "$@"' _ "$1" \
    env -u TPGEN_CPU_ISA -u TPGEN_CPU_ATTN TPGEN_KERNEL_CACHE="$cache" "$tpgen" bench --config "$d64" --random-weights \
    --backend cpu --threads 1 --batch 1 --context 8 --steps 1 --prefill 0 --verbose 2>&1 >/dev/null |
    grep "^cpu attention: " || echo "no cpu attention line"
}
check() { # what line want
  if [[ "$2" == *"$3"* ]]; then echo "ok: $1: $2"; else echo "FAIL: $1: '$2', want '$3'"; fails=$((fails + 1)); fi
}
check "tpgen-node-a, first" "$(run_as tpgen-node-a)" "saved to $cache"
check "tpgen-node-a, second" "$(run_as tpgen-node-a)" "cached in $cache"
check "tpgen-node-b, first (the file has node a's choice)" "$(run_as tpgen-node-b)" "saved to $cache"
check "tpgen-node-b, second" "$(run_as tpgen-node-b)" "cached in $cache"
for h in tpgen-node-a tpgen-node-b; do
  n=$(grep -c "^$h: .* \[cpuid [0-9a-f]\{8\}\]	attention	" "$cache" || true)
  [ "$n" = 1 ] && echo "ok: one attention line for $h" ||
    { echo "FAIL: $n attention lines for $h in:"; cat "$cache"; fails=$((fails + 1)); }
done
rm -f "$cache"
for i in 1 2 3 4 5 6; do run_as "tpgen-node-c$i" >"$tmp/c$i.out" & done
wait
n=$(grep -c "^tpgen-node-c[1-6]: .*	attention	" "$cache" || true)
[ "$n" = 6 ] && echo "ok: 6 hosts at once: 6 attention lines" ||
  { echo "FAIL: 6 hosts at once left $n attention lines:"; cat "$cache" "$tmp"/c*.out; fails=$((fails + 1)); }
[ "$fails" = 0 ] && echo "1 passed, 0 failed" || { echo "$fails failure(s)"; exit 1; }
