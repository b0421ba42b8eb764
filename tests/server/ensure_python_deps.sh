#!/usr/bin/env bash
# Setup of the server tests: the `openai` client must be importable; installs
# tools/dev/requirements-test.txt with pip when it is not. Fails (never skips) when it cannot.
set -euo pipefail
req="$(cd "$(dirname "$0")/../.." && pwd)/tools/dev/requirements-test.txt"
if python3 -c 'import openai; print("openai", openai.__version__, "present")' 2>/dev/null; then
  command -v curl >/dev/null || { echo "FAIL: curl is missing (tools/dev/install-deps.sh installs it)"; exit 1; }
  exit 0
fi
echo "installing $req"
python3 -m pip install -q -r "$req" 2>/dev/null || python3 -m pip install -q --break-system-packages -r "$req"
python3 -c 'import openai' || { echo "FAIL: cannot import openai after pip install -r $req"; exit 1; }
command -v curl >/dev/null || { echo "FAIL: curl is missing (tools/dev/install-deps.sh installs it)"; exit 1; }
