#!/usr/bin/env bash
# HF parity of tpgen on the CUDA backend (F16 or BF16), against the f32 fixtures
# tests/data/*/expected.json: tests/parity/hf_parity.sh, which says what is checked.
# usage: tests/gpu/parity.sh [--np N] [--dtype bf16|f16] [--comm mpi|nccl] [--build DIR]
#                            [--timeout SECONDS] [--tol T]
#   defaults: --np 1 --dtype bf16 --comm mpi --build build --timeout 120
#   (--backend cpu runs the same checks on the CPU backend at the CPU's 2e-4, to test the script)
# With --comm mpi several ranks may share one GPU: that is how TP = 2 runs on a one-GPU machine.
exec "$(dirname "$0")/../parity/hf_parity.sh" --backend cuda "$@"
