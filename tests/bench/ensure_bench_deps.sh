#!/usr/bin/env bash
# Setup of the bench tests: matplotlib (for --plot) must be importable; installs
# tools/bench/requirements-bench.txt with pip when it is not. Fails (never skips) when it cannot.
set -euo pipefail
req="$(cd "$(dirname "$0")/../.." && pwd)/tools/bench/requirements-bench.txt"
if python3 -c 'import matplotlib; print("matplotlib", matplotlib.__version__, "present")' 2>/dev/null; then
  exit 0
fi
echo "installing $req"
python3 -m pip install -q -r "$req" 2>/dev/null || python3 -m pip install -q --break-system-packages -r "$req"
python3 -c 'import matplotlib' || { echo "FAIL: cannot import matplotlib after pip install -r $req"; exit 1; }
