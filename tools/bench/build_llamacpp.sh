#!/usr/bin/env bash
# Builds llama.cpp (CPU only) for tools/bench/bench_vs_llamacpp.py: llama-bench, llama-batched-bench,
# llama-quantize and llama-perplexity (the AMX check below), from the llama.cpp that the
# llama-cpp-python source distribution on PyPI vendors (vendor/llama.cpp), and puts gguf-py (the
# `gguf` writer tools/bench/llamacpp_model.py imports) beside them.
#
#   bash tools/bench/build_llamacpp.sh [--sdist FILE.tar.gz | --version V] [--out DIR] [--jobs N]
#        [--cc C --cxx CXX] [--no-check]
#
#   --sdist    a llama_cpp_python-*.tar.gz already downloaded (nothing is fetched)
#   --version  the llama-cpp-python version to download (default 0.3.36, the one the docs were
#              measured with; "latest": the newest); `pip download --no-binary :all: --no-deps`
#   --out      where everything goes (default $TPGEN_LLAMACPP_DIR, else ~/.cache/tpgen/llamacpp):
#              src/ (the sdist, unpacked), build/ (cmake), bin/ (the four tools), gguf-py/,
#              BUILD_INFO (version, compiler, flags, the check's result)
#   --cc/--cxx the compiler (default clang / clang++; see AMX below)
#   --no-check skip the AMX check after the build
# Exit: 0 built (and checked), 1 the build or the check failed, 2 bad usage or a missing tool.
#
# Flags: GGML_NATIVE=ON (-march=native: on a Sapphire Rapids or later Xeon that includes
# avx512_vnni, avx512_bf16 and amx-tile/int8/bf16; the GGML_AMX_* options are read only when
# GGML_NATIVE is OFF), OpenMP on (llama.cpp's default; with clang it needs libomp-dev), static
# libraries, Release, every GPU backend off, no tests, examples, server, curl or OpenSSL (nothing is
# downloaded at build time). One line is patched into llama-batched-bench and llama-perplexity
# (below: they lost their last lines at exit).
#
# AMX and the compiler (docs/BENCHMARKING.md, "Against llama.cpp"): ggml compiles its AMX matmul
# only `#if defined(__AMX_INT8__) && defined(__AVX512VNNI__)`.
#  - Debian 12's gcc 12 defines __AMX_INT8__ but miscompiles ggml's AMX tile setup: its
#    amxtileintrin.h declares _tile_loadconfig's asm as reading `*(const void **)config`, 8 bytes of
#    the 64-byte tile configuration, so the optimiser drops the stores of the rows/colsb fields in
#    ggml_tile_config_init (ggml/src/ggml-cpu/amx/mmq.cpp; its disassembly keeps palette_id = 1
#    only, the rest is stack garbage): llama-perplexity built so (g++ 12.2, GGML_NATIVE=ON) dies of
#    SIGSEGV at that ldtilecfg in ggml_backend_amx_mul_mat on a tiny Q4_0 model, and runs with
#    --no-repack (no AMX). GGML_NATIVE=OFF + GGML_AMX_INT8=ON is the same header. This script refuses gcc 12 and older on a CPU with amx_int8 (newer: not tried).
#  - Debian 12's clang 14 (`apt-get install clang libomp-dev`) keeps the stores but names the macro
#    __AMXINT8__, so ggml leaves AMX out silently (system info without AMX_INT8 = 1); GGML_AMX_INT8=ON
#    does not change that. Passing -D__AMX_INT8__ (done below, exactly when the compiler enables
#    amx-int8 under the other name) gives the working AMX path.
# The check after the build (tools/bench/llamacpp_model.py check, unless --no-check) proves it on
# this CPU: system info AMX_INT8 = 1, the weights of a tiny Q4_0 model in an "AMX" buffer, and
# llama-perplexity's figure with that buffer within 1% of the one with --no-repack (no AMX).
set -euo pipefail
PROG=build_llamacpp.sh
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
die() { echo "$PROG: error: $1" >&2; exit "${2:-2}"; }

version=0.3.36 sdist="" out="${TPGEN_LLAMACPP_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tpgen/llamacpp}"
jobs="$(nproc)" cc=clang cxx=clang++ check=1
while [ $# -gt 0 ]; do
  case "$1" in
    --sdist) sdist="${2:?--sdist needs a file}"; shift 2 ;;
    --version) version="${2:?--version needs a version}"; shift 2 ;;
    --out) out="${2:?--out needs a directory}"; shift 2 ;;
    --jobs) jobs="${2:?--jobs needs a number}"; shift 2 ;;
    --cc) cc="${2:?--cc needs a compiler}"; shift 2 ;;
    --cxx) cxx="${2:?--cxx needs a compiler}"; shift 2 ;;
    --no-check) check=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || die "--jobs must be a positive integer, got '$jobs'"
for t in cmake python3 "$cc" "$cxx"; do
  command -v "$t" >/dev/null || die "'$t' not found (Debian: apt-get install cmake clang libomp-dev)"
done
has_amx=0
grep -qw amx_int8 /proc/cpuinfo && has_amx=1
# gcc 12 or older with AMX: the miscompiled tile setup above (a crash at the first AMX matmul)
if "$cxx" --version 2>/dev/null | head -1 | grep -qiE '(g\+\+|gcc)'; then
  gmaj="$("$cxx" -dumpversion | cut -d. -f1)"
  if [ "$has_amx" = 1 ] && [ "$gmaj" -lt 13 ]; then
    die "$cxx is GCC $gmaj, whose _tile_loadconfig makes ggml's AMX tile setup a dead store (see this script's header); this CPU has AMX: use clang (apt-get install clang libomp-dev)"
  fi
fi

# ggml compiles its AMX code only `#if defined(__AMX_INT8__)`: GCC's name for the feature macro.
# Clang 14 names it __AMXINT8__ for the same -mamx-int8 (-march=native here), so ggml leaves AMX out
# (system info AMX_INT8 = 0, no AMX buffer) unless the macro is given: define it exactly when the
# compiler enables amx-int8 for this CPU under the other name.
extra=""
macros="$("$cc" -march=native -dM -E - </dev/null 2>/dev/null || true)"
if grep -q '__AMXINT8__ 1' <<<"$macros" && ! grep -q '__AMX_INT8__ 1' <<<"$macros"; then
  extra="-D__AMX_INT8__"
fi
if [ "$has_amx" = 1 ] && ! grep -qE '__AMX_?INT8__ 1' <<<"$macros"; then
  echo "$PROG: warning: $cc -march=native does not enable amx-int8 on this AMX CPU: llama.cpp will run without AMX" >&2
fi

mkdir -p "$out/src" "$out/bin"
out="$(cd "$out" && pwd)"
if [ -z "$sdist" ]; then
  spec="llama-cpp-python==$version"
  [ "$version" = latest ] && spec=llama-cpp-python
  echo "$PROG: pip download --no-binary :all: --no-deps $spec (pip builds its metadata: a few minutes)" >&2
  python3 -m pip download --no-binary :all: --no-deps -d "$out/src" "$spec" >&2 ||
    die "pip download $spec failed (no network to PyPI? give --sdist FILE.tar.gz)" 1
  if [ "$version" = latest ]; then
    sdist="$(ls -t "$out"/src/llama_cpp_python-*.tar.gz | head -1)"
  else
    sdist="$out/src/llama_cpp_python-$version.tar.gz"
  fi
fi
[ -f "$sdist" ] || die "--sdist $sdist: no such file"
name="$(basename "$sdist" .tar.gz)"
[[ "$name" =~ ^llama_cpp_python-[0-9][0-9a-zA-Z.+-]*$ ]] ||
  die "--sdist $sdist: expected llama_cpp_python-VERSION.tar.gz (the llama-cpp-python sdist)"
src="$out/src/$name"
if [ ! -f "$src/vendor/llama.cpp/CMakeLists.txt" ]; then
  rm -rf "$src"
  tar -xzf "$sdist" -C "$out/src" || die "cannot unpack $sdist" 1
  [ -f "$src/vendor/llama.cpp/CMakeLists.txt" ] || die "$sdist has no vendor/llama.cpp/CMakeLists.txt" 1
fi
lcpp="$src/vendor/llama.cpp"
# llama.cpp's LOG() hands lines to a logger thread that nobody flushes at exit (common/log.cpp,
# common_log_main: logs "may be lost if not flushed before the program exits"): llama-batched-bench's
# result row went missing in 3 runs of 6 here, llama-perplexity -v's "Final estimate" too, with exit
# status 0. One line before each one's llama_backend_free() flushes the logger; nothing measured
# changes.
for f in tools/batched-bench/batched-bench.cpp tools/perplexity/perplexity.cpp; do
  f="$lcpp/$f"
  if ! grep -q "tpgen: flush" "$f"; then
    [ "$(grep -c '^    llama_backend_free();$' "$f")" = 1 ] ||
      die "$f: not one '    llama_backend_free();' line to flush the log before: this llama.cpp is not the one this script knows (0.3.36)" 1
    sed -i 's|^    llama_backend_free();$|    common_log_flush(common_log_main()); // tpgen: flush the logger thread before exit\n    llama_backend_free();|' "$f"
  fi
done

bld="$out/build"
cfg=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx"
     -DCMAKE_C_FLAGS="$extra" -DCMAKE_CXX_FLAGS="$extra" -DGGML_NATIVE=ON -DGGML_OPENMP=ON -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_HIP=OFF
     -DGGML_SYCL=OFF -DGGML_OPENCL=OFF -DGGML_RPC=OFF -DBUILD_SHARED_LIBS=OFF
     -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF
     -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF)
echo "$PROG: configuring $lcpp -> $bld" >&2
cmake -S "$lcpp" -B "$bld" "${cfg[@]}" > "$out/cmake-configure.log" 2>&1 ||
  { tail -30 "$out/cmake-configure.log" >&2; die "cmake configure failed (log: $out/cmake-configure.log)" 1; }
# OpenMP missing is only a warning to ggml (it falls back to its own threads): say so, the figures differ
if grep -q "OpenMP not found" "$out/cmake-configure.log"; then
  die "cmake found no OpenMP for $cc (Debian: apt-get install libomp-dev), log: $out/cmake-configure.log"
fi
tools=(llama-bench llama-batched-bench llama-quantize llama-perplexity)
echo "$PROG: building ${tools[*]} with $jobs jobs (tens of minutes on 2 cores)" >&2
cmake --build "$bld" -j"$jobs" --target "${tools[@]}" > "$out/cmake-build.log" 2>&1 ||
  { tail -40 "$out/cmake-build.log" >&2; die "build failed (log: $out/cmake-build.log)" 1; }
for t in "${tools[@]}"; do
  cp "$bld/bin/$t" "$out/bin/$t" || die "the build made no $bld/bin/$t" 1
done
rm -rf "$out/gguf-py" && cp -r "$lcpp/gguf-py" "$out/gguf-py"

{
  echo "llama-cpp-python $name"
  # the sdist carries the llama.cpp submodule's git directory: its commit (llama-bench's build_commit)
  echo "llama.cpp commit $(git -C "$lcpp" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "compiler $("$cxx" --version | head -1)"
  echo "cmake ${cfg[*]}"
  echo "cpu $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
} > "$out/BUILD_INFO"

if [ "$check" = 1 ]; then
  echo "$PROG: checking the build (tools/bench/llamacpp_model.py check)" >&2
  if python3 "$ROOT/tools/bench/llamacpp_model.py" check --llamacpp "$out" >> "$out/BUILD_INFO" 2> "$out/check.log"; then
    tail -3 "$out/BUILD_INFO" >&2
  else
    cat "$out/check.log" >&2
    die "the check of $out failed (log: $out/check.log)" 1
  fi
fi
echo "$PROG: built ${tools[*]} in $out/bin" >&2
