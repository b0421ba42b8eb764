#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs every test (ctest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/dev/install-deps.sh
bash tools/dev/build.sh
# Open MPI refuses to run as root unless told; tests start several ranks on few cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"
