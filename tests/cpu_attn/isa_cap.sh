#!/usr/bin/env bash
# TPGEN_CPU_ISA reaches the attention family (issue 35): under each tier this CPU runs, `tpgen
# bench` names the attention build at or below it (c -> c, avx2/avxvnni -> avx2, avx512 -> avx512),
# for f32 and bf16 K/V; TPGEN_CPU_ATTN, the attention-only override, wins over it; unset, a test
# model's tiny heads (CONFIG, D = 16) run the widest build unmeasured; --verbose says which and why.
# Then the measurement at load on D64 (a config with 64-dim heads): the pick is one of this CPU's
# builds, what bench names, saved to TPGEN_KERNEL_CACHE; a second process reads it ("cached in"); an
# edited line naming another build is obeyed; TPGEN_KERNEL_CACHE=off writes nothing; forced and
# capped runs write nothing. Never which build is fastest.
# usage: isa_cap.sh TPGEN CONFIG D64
set -euo pipefail
tpgen=$1 config=$2 d64=$3
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
line=$(env -u TPGEN_CPU_ATTN -u TPGEN_CPU_ISA TPGEN_KERNEL_CACHE=off "$tpgen" bench --config "$config" \
       --random-weights --backend cpu --threads 1 --batch 1 --context 8 --steps 1 --prefill 0 --verbose 2>&1 \
       >/dev/null | grep 'cpu attention:' || true)
expect "--verbose, D = 16, unset" "cpu attention: $best: the widest this CPU runs (head dim 16 < 32, a test model's: not measured)" \
  "$(sed 's/^tpgen: //' <<< "$line")"

# ---- measured at load (D = 64), the kernel cache file ----
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cache=$tmp/kernels.tsv
builds=(c)
has avx2 fma && builds+=(avx2)
has avx2 fma avx512f && builds+=(avx512) # what cpu_attn_isa_supported asks (AVX-512F)
run_d64() { # env... -- bench flags...: "BUILD|WHY|KERNEL" (--verbose's build and why, the JSON's attention name)
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env -u TPGEN_CPU_ISA -u TPGEN_CPU_ATTN XDG_CACHE_HOME="$tmp/xdg" HOME="$tmp/home" "${envs[@]}" "$tpgen" bench \
      --config "$d64" --random-weights --backend cpu --threads 1 --batch 1 --context 8 --steps 1 --prefill 0 --json \
      --verbose "$@" 2>&1 | python3 -c 'import json, re, sys
out = sys.stdin.read()
m = re.search(r"cpu attention: (\S+): (.*)", out)
rows = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
k = next((r["kernels"]["attention"] for r in rows if r.get("kind") == "decode"), "none")
print("%s|%s|%s" % (m.group(1), m.group(2), k) if m else "no cpu attention line|" + out[-300:].replace("\n", " "))'
}
check_run() { # what result want_build want_why_prefix dtype
  local b why k
  IFS='|' read -r b why k <<< "$2"
  local ok=1
  [[ " ${builds[*]} " == *" $b "* ]] || ok=0
  [ -z "$3" ] || [ "$b" = "$3" ] || ok=0
  [[ "$why" == "$4"* ]] || ok=0
  [ "$k" = "dot-$5-$b" ] || ok=0
  if [ $ok = 1 ]; then echo "ok: $1 -> $b ($why), bench names $k"
  else echo "FAIL: $1 -> build $b, why '$why', bench names $k; want ${3:-one of ${builds[*]}}, '$4...', dot-$5-BUILD"
       fails=$((fails + 1)); fi
}
for dt in f32 bf16; do
  dflags=()
  [ "$dt" = bf16 ] && dflags=(--dtype bf16)
  rm -f "$cache"
  r=$(run_d64 TPGEN_KERNEL_CACHE="$cache" -- "${dflags[@]}")
  picked=$(cut -d'|' -f1 <<< "$r")
  check_run "$dt D=64, measured" "$r" "" "measured at T = 1, context 1024 (ms: " "$dt"
  [[ "$r" == *"saved to $cache"* ]] || { echo "FAIL: $dt: not saved to $cache: $r"; fails=$((fails + 1)); }
  if grep -q "	attention	kv $dt, Hl 4, Hkl 4, D 64, bs 16	.*@att1	$picked	" "$cache" 2>/dev/null; then
    echo "ok: $dt: the cache line names $picked"
  else echo "FAIL: $dt: no attention line choosing $picked in $cache: $(cat "$cache" 2>&1)"; fails=$((fails + 1)); fi
  # a second process reads it back
  check_run "$dt D=64, second process" "$(run_d64 TPGEN_KERNEL_CACHE="$cache" -- "${dflags[@]}")" "$picked" \
    "cached in $cache" "$dt"
  # an edited line naming another build of this CPU is obeyed (read, not measured again)
  other=c
  [ "$picked" = c ] && other=${builds[-1]}
  if [ "$other" != "$picked" ]; then
    sed -i "s/\(	attention	kv $dt, [^	]*	[^	]*\)	$picked	/\1	$other	/" "$cache"
    check_run "$dt D=64, cache edited to $other" "$(run_d64 TPGEN_KERNEL_CACHE="$cache" -- "${dflags[@]}")" "$other" \
      "cached in $cache" "$dt"
  fi
done
# TPGEN_KERNEL_CACHE=off: measured, nothing written (neither there nor at the default path)
rm -f "$cache"
r=$(run_d64 TPGEN_KERNEL_CACHE=off --)
check_run "TPGEN_KERNEL_CACHE=off" "$r" "" "measured at T = 1, context 1024" f32
[[ "$r" == *"not cached (TPGEN_KERNEL_CACHE=off)"* ]] || { echo "FAIL: off: $r"; fails=$((fails + 1)); }
# forced and capped: nothing measured, nothing written (default path: $tmp/xdg/tpgen/cpu-kernels.tsv)
check_run "TPGEN_CPU_ATTN=c" "$(run_d64 TPGEN_CPU_ATTN=c --)" c "forced by TPGEN_CPU_ATTN" f32
check_run "TPGEN_CPU_ISA=c" "$(run_d64 TPGEN_CPU_ISA=c --)" c "capped by TPGEN_CPU_ISA" f32
check_run "TPGEN_CPU_ATTN=c, bf16" "$(run_d64 TPGEN_CPU_ATTN=c -- --dtype bf16)" c "forced by TPGEN_CPU_ATTN" bf16
if [ -e "$cache" ] || grep -qs "	attention	" "$tmp/xdg/tpgen/cpu-kernels.tsv"; then
  echo "FAIL: off / forced / capped wrote an attention choice: $(cat "$cache" "$tmp/xdg/tpgen/cpu-kernels.tsv" 2>&1)"
  fails=$((fails + 1))
else echo "ok: off, forced and capped wrote no attention choice"; fi
[ "$fails" -eq 0 ] || { echo "$fails checks failed"; exit 1; }
