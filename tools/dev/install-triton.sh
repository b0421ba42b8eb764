#!/usr/bin/env bash
# Installs NVIDIA Triton Inference Server from the PyPI wheel `nvidia-pytriton` (it carries a
# `tritonserver` binary, Triton 2.51, with the Python backend and its stubs) and the Triton
# clients (`tritonclient[grpc,http]`) into a Python venv, then prints the `tritonserver` command
# for launcher/triton/model_repository. Reuses the venv when it already has both.
#
# usage: tools/dev/install-triton.sh [VENV]      (default: build/triton-venv)
# The Python backend needs a stub built for the Python that runs model.py: the wheel ships one
# per Python version under pytriton/tritonserver/python_backend_stubs/3.X/; the one matching the
# venv's Python is copied next to libtriton_python.so (backends/python/), where Triton looks.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="${1:-$root/build/triton-venv}"
PYTRITON_VERSION="${PYTRITON_VERSION:-0.7.0}"
py="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
  echo "install-triton: creating venv $venv" >&2
  "$py" -m venv "$venv" || { echo "install-triton: FAIL: cannot create a venv with $py -m venv" \
                                   "(apt-get install python3-venv)" >&2; exit 1; }
fi
vpy="$venv/bin/python"
if ! "$vpy" -c 'import pytriton, tritonclient.grpc, tritonclient.http' 2>/dev/null; then
  echo "install-triton: installing nvidia-pytriton==$PYTRITON_VERSION and tritonclient[grpc,http] into $venv" >&2
  "$vpy" -m pip install -q --disable-pip-version-check "nvidia-pytriton==$PYTRITON_VERSION" "tritonclient[grpc,http]" >&2 \
    || { echo "install-triton: FAIL: pip install nvidia-pytriton==$PYTRITON_VERSION failed" >&2; exit 1; }
fi
tdir="$("$vpy" -c 'import os, pytriton; print(os.path.join(os.path.dirname(pytriton.__file__), "tritonserver"))')"
server="$tdir/bin/tritonserver"
backends="$tdir/backends"
[ -x "$server" ] || { echo "install-triton: FAIL: no tritonserver binary at $server" >&2; exit 1; }
[ -f "$backends/python/libtriton_python.so" ] || { echo "install-triton: FAIL: no Python backend at $backends/python" >&2; exit 1; }
pyver="$("$vpy" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
stub="$tdir/python_backend_stubs/$pyver/triton_python_backend_stub"
if [ ! -x "$backends/python/triton_python_backend_stub" ] || ! cmp -s "$stub" "$backends/python/triton_python_backend_stub"; then
  [ -f "$stub" ] || { echo "install-triton: FAIL: the wheel has no Python backend stub for Python $pyver" \
                           "(looked for $stub; the wheel ships: $(ls "$tdir/python_backend_stubs" 2>/dev/null | tr '\n' ' '))" >&2; exit 1; }
  cp "$stub" "$backends/python/triton_python_backend_stub"
  chmod +x "$backends/python/triton_python_backend_stub"
fi
# The stub embeds the system's libpython3.X (apt: libpython3.X); the Python backend's utilities
# import numpy, which the venv has (a dependency of tritonclient): PYTHONPATH gives it to the stub.
"$vpy" -c 'import numpy' || { echo "install-triton: FAIL: numpy missing from $venv" >&2; exit 1; }
site="$("$vpy" -c 'import site; print(site.getsitepackages()[0])')"
echo "install-triton: ready ($venv, Python $pyver)" >&2
echo "PYTHONPATH=$site $server --model-repository $root/launcher/triton/model_repository --backend-directory $backends"
