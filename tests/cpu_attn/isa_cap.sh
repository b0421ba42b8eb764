#!/usr/bin/env bash
# TPGEN_CPU_ISA reaches the attention family (issue 35): under each tier this CPU runs, `tpgen
# bench` names the attention build at or below it (c -> c, avx2/avxvnni -> avx2, avx512 -> avx512),
# for f32 and bf16 K/V; TPGEN_CPU_ATTN, the attention-only override, wins over it; unset, the widest
# build runs; --verbose says which and why. No timing.
# usage: isa_cap.sh TPGEN CONFIG
set -euo pipefail
tpgen=$1 config=$2
flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
has() { for f in "$@"; do [[ " $flags " == *" $f "* ]] || return 1; done; }
fails=0
attn_kernel() { # env... -- bench flags...: the attention kernel of the decode row
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env -u TPGEN_CPU_ISA -u TPGEN_CPU_ATTN TPGEN_KERNEL_CACHE=off "${envs[@]}" "$tpgen" bench --config "$config" \
      --random-weights --backend cpu --threads 1 --batch 1 --context 8 --steps 1 --prefill 0 --json "$@" 2>/dev/null |
    python3 -c 'import json, sys
rows = [json.loads(l) for l in sys.stdin if l.startswith("{")]
print(next(r["kernels"]["attention"] for r in rows if r.get("kind") == "decode"))'
}
expect() { # what want got
  if [ "$2" = "$3" ]; then echo "ok: $1 -> $3"; else echo "FAIL: $1 -> $3, want $2"; fails=$((fails + 1)); fi
}
best=c
has avx2 fma && best=avx2
has avx2 fma avx512f avx512bw avx512vl && best=avx512
tiers=(c)
has avx2 fma && tiers+=(avx2)
has avx2 fma avx_vnni && tiers+=(avxvnni)
has avx2 fma avx512f avx512bw avx512vl && tiers+=(avx512)
for dt in f32 bf16; do
  dflags=()
  [ "$dt" = bf16 ] && dflags=(--dtype bf16)
  expect "$dt, TPGEN_CPU_ISA unset" "dot-$dt-$best" "$(attn_kernel -- "${dflags[@]}")"
  for t in "${tiers[@]}"; do
    want=$t
    [ "$t" = avxvnni ] && want=avx2
    expect "$dt, TPGEN_CPU_ISA=$t" "dot-$dt-$want" "$(attn_kernel TPGEN_CPU_ISA="$t" -- "${dflags[@]}")"
  done
  if [ "$best" != c ]; then
    expect "$dt, TPGEN_CPU_ISA=c TPGEN_CPU_ATTN=$best" "dot-$dt-$best" \
      "$(attn_kernel TPGEN_CPU_ISA=c TPGEN_CPU_ATTN="$best" -- "${dflags[@]}")"
  fi
done
# --verbose names the build and why (the bf16 backend's report)
line=$(env -u TPGEN_CPU_ATTN TPGEN_CPU_ISA=c TPGEN_KERNEL_CACHE=off "$tpgen" bench --config "$config" --random-weights \
       --backend cpu --threads 1 --dtype bf16 --batch 1 --context 8 --steps 1 --prefill 0 --verbose 2>&1 >/dev/null |
       grep 'cpu attention:' || true)
expect "--verbose, TPGEN_CPU_ISA=c" "cpu attention: c: capped by TPGEN_CPU_ISA" "$(sed 's/^tpgen: //' <<< "$line")"
[ "$fails" -eq 0 ] || { echo "$fails checks failed"; exit 1; }
