#!/usr/bin/env bash
# Prepares baseline (b) of issue 15 (tools/dev/seed_pattern/README.md): the Triton of tools/dev/install-triton.sh
# (nvidia-pytriton's tritonserver, in a venv), plus torch and transformers for the Python backend's stub.
#
# usage: tools/dev/seed_pattern/setup.sh [VENV]     (default: build/triton-venv)
# Prints, on stdout, the environment lines for tritonserver (eval them, or read them):
#   SEED_PYTHONPATH=DIR   site-packages holding torch + transformers, for the models' python_path
#   TRITONSERVER=PATH BACKENDS=DIR PYTHONPATH=DIR
# The stub embeds the system's libpython3.X, which has its own site-packages, not those of the
# Python that has torch (here pyenv's): the models put SEED_PYTHONPATH first on sys.path. That
# Python must be the same 3.X as the stub. PYTHON=... picks it (default: python3).
# Exit status 77 when torch/transformers or Triton cannot be set up (the ctest's SKIPPED).
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
venv="${1:-$root/build/triton-venv}"
py="${PYTHON:-python3}"

if ! "$py" -c 'import torch, transformers' 2>/dev/null; then
  echo "seed_pattern/setup: SKIP: $py cannot import torch and transformers (pip install -r tools/fixtures/requirements-fixtures.txt)" >&2
  exit 77
fi
site="$("$py" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')"
tsite="$("$py" -c 'import os, transformers; print(os.path.dirname(os.path.dirname(transformers.__file__)))')"
[ "$tsite" = "$site" ] || site="$site:$tsite"
pyver="$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"

if ! PYTHON="$py" bash "$root/tools/dev/install-triton.sh" "$venv" >/dev/null; then
  echo "seed_pattern/setup: SKIP: tools/dev/install-triton.sh could not set up Triton in $venv" >&2
  exit 77
fi
vpy="$venv/bin/python"
vver="$("$vpy" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
if [ "$vver" != "$pyver" ]; then
  echo "seed_pattern/setup: FAIL: the Triton venv's Python is $vver, the one with torch ($py) is $pyver:" \
       "the stub can load torch's compiled modules only for the same 3.X (PYTHON=python3.$vver ...)" >&2
  exit 1
fi
tdir="$("$vpy" -c 'import os, pytriton; print(os.path.join(os.path.dirname(pytriton.__file__), "tritonserver"))')"
vsite="$("$vpy" -c 'import site; print(site.getsitepackages()[0])')"
echo "seed_pattern/setup: ready: torch + transformers from $site, Triton in $venv" >&2
echo "SEED_PYTHONPATH=$site"
echo "TRITONSERVER=$tdir/bin/tritonserver"
echo "BACKENDS=$tdir/backends"
echo "PYTHONPATH=$vsite"
