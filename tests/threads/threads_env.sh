#!/usr/bin/env bash
# The threading model in effect (util/threads.h), seen from outside:
#  1. libgomp itself reports tpgen's short spin (GOMP_SPINCOUNT 30000, OMP_DISPLAY_ENV) in the process
#     that runs: tpgen's variables were set before the runtime read them (the re-exec);
#  2. the user's OMP_WAIT_POLICY and OMP_NUM_THREADS win, and `tpgen info` says so;
#  3. under mpirun, 2 ranks on this node: threads per rank x 2 <= cores (generate --verbose);
#  4. OpenBLAS runs AVX2 / AVX-512 kernels on a CPU that has them, even one the library does not
#     know (tpgen sets OPENBLAS_CORETYPE then), and the user's OPENBLAS_CORETYPE wins.
# usage: threads_env.sh TPGEN MPIEXEC MODEL
set -euo pipefail
tpgen=$1 mpiexec=$2 model=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
cores=$(getconf _NPROCESSORS_ONLN)

# 1. libgomp prints its settings at its start; with the re-exec, the last print is the process
#    that runs tpgen's code.
#    (clang's libomp starts lazily, after main, and prints nothing for `tpgen info`: part 1 is
#    libgomp's; libomp reads the variable at its first parallel region, long after the re-exec.)
gomp=1
ldd "$tpgen" | grep -q 'libgomp\.so' || { gomp=0; echo "note: $tpgen does not use libgomp; part 1 left out"; }
if [ $gomp = 1 ]; then
  err=$(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u OMP_NUM_THREADS OMP_DISPLAY_ENV=verbose "$tpgen" info 2>&1 >/dev/null)
  spin=$(grep -o "GOMP_SPINCOUNT = '[0-9]*'" <<< "$err" | tail -1)
  [ "$spin" = "GOMP_SPINCOUNT = '30000'" ] || fail "libgomp does not run tpgen's short spin: last $spin in:"$'\n'"$err"
  echo "ok: libgomp runs with $spin"
fi
out=$(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u OMP_NUM_THREADS -u OPENBLAS_NUM_THREADS "$tpgen" info)
grep -q "^cpu threads: $cores OpenMP per rank (online CPUs / ranks on this node); OpenMP waiting: a short spin, then sleep (GOMP_SPINCOUNT=30000, set by tpgen); OpenBLAS: 1 thread inside tpgen's OpenMP threads (OPENBLAS_NUM_THREADS=1, set by tpgen)" <<< "$out" \
  || fail "tpgen info's threading line:"$'\n'"$out"
echo "ok: $(grep '^cpu threads' <<< "$out")"

# 2. the user's settings stay
if [ $gomp = 1 ]; then
  err=$(OMP_WAIT_POLICY=PASSIVE OMP_DISPLAY_ENV=verbose "$tpgen" info 2>&1 >/dev/null)
  spin=$(grep -o "GOMP_SPINCOUNT = '[0-9]*'" <<< "$err" | tail -1)
  [ "$spin" = "GOMP_SPINCOUNT = '0'" ] || fail "OMP_WAIT_POLICY=PASSIVE not kept: $spin"
fi
out=$(OMP_WAIT_POLICY=ACTIVE OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=2 "$tpgen" info)
grep -q "^cpu threads: 1 OpenMP per rank (OMP_NUM_THREADS); OpenMP waiting: the user's (OMP_WAIT_POLICY=ACTIVE, GOMP_SPINCOUNT=unset); OpenBLAS: the user's OPENBLAS_NUM_THREADS=2" <<< "$out" \
  || fail "user's settings not reported:"$'\n'"$out"
echo "ok: $(grep '^cpu threads' <<< "$out")"

# 3. two ranks on this node share its cores
err=$(env -u OMP_NUM_THREADS "$mpiexec" -np 2 generate --model "$model" --prompt-ids 1,2,3 --max-new-tokens 2 --backend cpu \
      --verbose 2>&1 >/dev/null)
n=$(sed -n 's/^threads: \([0-9]*\) OpenMP per rank.*/\1/p' <<< "$err" | head -1)
[ -n "$n" ] || fail "no threads line from generate --verbose:"$'\n'"$err"
want=$(( cores / 2 > 0 ? cores / 2 : 1 ))
[ "$n" -eq "$want" ] || fail "2 ranks on $cores cores: $n threads per rank, want $want"
[ $((n * 2)) -le "$cores" ] || [ "$n" -eq 1 ] || fail "2 ranks x $n threads > $cores cores"
echo "ok: 2 ranks x $n threads on $cores cores"

# 4. OpenBLAS's kernels (tpgen info's "cpu blas" line)
flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
out=$(env -u OPENBLAS_CORETYPE "$tpgen" info | grep '^cpu blas: ' || true)
[ -n "$out" ] || fail "no 'cpu blas' line from tpgen info"
if [[ " $flags " == *" avx2 "* && " $flags " == *" fma "* ]]; then
  grep -qiE '^cpu blas: OpenBLAS (Haswell|Zen|SkylakeX|Cooperlake|SapphireRapids) kernels' <<< "$out" \
    || fail "an AVX2 CPU runs OpenBLAS's generic kernels: $out"
fi
echo "ok: $out"
out=$(OPENBLAS_CORETYPE=Haswell "$tpgen" info | grep '^cpu blas: ')
[ "$out" = "cpu blas: OpenBLAS Haswell kernels (the user's OPENBLAS_CORETYPE=Haswell)" ] || fail "user's core: $out"
echo "ok: $out"
