#!/usr/bin/env bash
# Installs what building and testing tpgen needs on a Debian machine, skipping what is there:
# compilers and CMake, Open MPI, OpenBLAS, PCRE2. (The CUDA toolkit, when present in
# /usr/local/cuda, is picked up by CMake; nothing here installs it.)
set -euo pipefail
pkgs=(build-essential cmake pkg-config openmpi-bin libopenmpi-dev libopenblas-dev libpcre2-dev)
# Slurm tests (tests/slurm): a one-node cluster. libpmix-dev: Slurm's mpi/pmix plugin dlopens the
# unversioned libpmix.so, which only the -dev package ships (without it `srun --mpi=pmix` fails).
pkgs+=(slurm-wlm munge libpmix-dev)
# tools/dev/fuzz.sh: clang with libFuzzer and the sanitizer runtimes; libomp for OpenMP under clang.
pkgs+=(clang libclang-rt-14-dev libomp-dev)
pkgs+=(haproxy) # tests/replicas: replicas behind a load balancer (launcher/tpgen-haproxy-cfg, HAProxy >= 2.6)
pkgs+=(libmicrohttpd-dev libssl-dev curl python3-pip) # tpgen serve (libcrypto: SHA-256 of prefix-cache scopes), and its tests
pkgs+=(python3-venv libpython3.11) # Triton tests: tools/dev/install-triton.sh's venv; the Python-backend stub embeds Debian 12's libpython3.11
# oneDNN: the CPU backend's --dtype bf16 (batched GEMMs); the build works without it (f32 only).
pkgs+=(libdnnl-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "tools/dev/install-deps.sh: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Python packages of the tests (the openai client for the server tests)
if ! python3 -c 'import openai, numpy' 2>/dev/null; then
  req="$(dirname "$0")/requirements-test.txt"
  python3 -m pip install -q -r "$req" 2>/dev/null || python3 -m pip install -q --break-system-packages -r "$req"
fi
