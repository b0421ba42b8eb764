#!/usr/bin/env bash
# The second compiler: configures build-clang/ with clang (CPU engine, TPGEN_CUDA=OFF) and
# -Werror (TPGEN_WERROR), builds everything, then runs a quick ctest subset: labels unit and ops
# (the kernels' AVX2 clones and their bit-exact checks) and the tiny model's HF parity at TP 1.
#   bash tools/dev/build-clang.sh            (CC_CLANG=clang-15 etc. to pick another clang)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${TPGEN_CLANG_BUILD:-build-clang}
cc=${CC_CLANG:-clang}
cxx=${CXX_CLANG:-${cc/clang/clang++}}
command -v "$cc" >/dev/null || { echo "tools/dev/build-clang.sh: $cc not found (install clang)" >&2; exit 2; }
cmake -S . -B "$build" -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release \
      -DTPGEN_CUDA=OFF -DTPGEN_WERROR=ON >/dev/null
cmake --build "$build" -j"$(nproc)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" -L 'unit|ops'
ctest --test-dir "$build" --output-on-failure -R '^parity_tiny-f32_tp1$'
