#!/usr/bin/env bash
# Configures and builds tpgen into build/ (the CUDA backend too when nvcc, cuBLAS and NCCL are
# found; TPGEN_CUDA=OFF in the environment builds the CPU engine only).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTPGEN_CUDA="${TPGEN_CUDA:-AUTO}" >/dev/null
cmake --build build -j"$(nproc)"
