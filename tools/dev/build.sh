#!/usr/bin/env bash
# Configures and builds tpgen into build/ (the CUDA backend too when nvcc, cuBLAS and NCCL are
# found; TPGEN_CUDA=OFF in the environment builds the CPU engine only). TPGEN_WERROR=ON in the
# environment (CI: .ci/run) makes C/C++ warnings errors; off by default, so that a newer compiler's
# new warnings do not stop a user's build.
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTPGEN_CUDA="${TPGEN_CUDA:-AUTO}" \
      -DTPGEN_WERROR="${TPGEN_WERROR:-OFF}" >/dev/null
cmake --build build -j"$(nproc)"
