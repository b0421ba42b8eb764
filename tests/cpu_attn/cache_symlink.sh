#!/usr/bin/env bash
# The kernel cache's temporary file is created exclusively (issue 41 item 5): `tpgen bench` on a
# config whose attention choice is measured (D = 64) writes TPGEN_KERNEL_CACHE through a temporary
# file in its directory. A symlink planted at the name tpgen used to write (PATH.<pid>.tmp: the
# shell's pid, kept by exec) must not be followed: its target is untouched, the cache is still
# written as a regular file, and no temporary is left behind.
# usage: cache_symlink.sh TPGEN D64_CONFIG
set -euo pipefail
tpgen=$1 d64=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cache=$tmp/cache/kernels.tsv
mkdir -p "$tmp/cache"
printf 'precious\n' > "$tmp/target"
fails=0
for round in 1 2 3; do
  rm -f "$cache"
  # the planted link at PATH.<pid>.tmp for this process, exec'd into tpgen (bench re-execs in place)
  out=$(env -u TPGEN_CPU_ISA -u TPGEN_CPU_ATTN TPGEN_KERNEL_CACHE="$cache" bash -c \
        'ln -s "$1" "$2.$$.tmp" && shift 2 && exec "$@"' _ "$tmp/target" "$cache" \
        "$tpgen" bench --config "$d64" --random-weights --backend cpu --threads 1 --batch 1 --context 8 --steps 1 \
        --prefill 0 --verbose 2>&1 >/dev/null) || { echo "FAIL: round $round: tpgen bench failed: $out"; exit 1; }
  if [ "$(cat "$tmp/target")" != precious ]; then
    echo "FAIL: round $round: the symlink's target was overwritten: $(head -c 300 "$tmp/target")"; fails=$((fails + 1))
    printf 'precious\n' > "$tmp/target"
  fi
  if [ -f "$cache" ] && [ ! -L "$cache" ] && grep -q '	attention	' "$cache"; then echo "ok: round $round: cache written"
  else echo "FAIL: round $round: no regular cache file with an attention line: ${out: -300}"; fails=$((fails + 1)); fi
  left=$(find "$tmp/cache" -type f -name 'kernels.tsv.tmp*')
  [ -z "$left" ] || { echo "FAIL: round $round: temporary left behind: $left"; fails=$((fails + 1)); }
  find "$tmp/cache" -type l -delete
done
[ "$fails" = 0 ] && echo "PASS" || { echo "$fails failure(s)"; exit 1; }
