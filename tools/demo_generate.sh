#!/usr/bin/env bash
# The demo's generation step: models/codegen-tiny-py (a small CodeGen trained on the Python
# standard library, tools/train_tiny.py) completes a Python prompt on 2 ranks (TP=2).
# Prints the prompt, then the completion as tpgen streams it; with --json, only tpgen's JSON.
# usage: tools/demo_generate.sh [more tpgen flags]   (TPGEN_BIN picks the binary)
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
prompt=$'import os\n\n\ndef list_python_files(path):\n    """Return the names of the .py files in path."""\n'
json=0
for arg in "$@"; do [ "$arg" = "--json" ] && json=1; done
[ "$json" = 1 ] || printf '%s' "$prompt"
launcher/tpgen-mpirun -np 2 generate --model models/codegen-tiny-py --prompt "$prompt" \
  --max-new-tokens 64 --temperature 0.2 --top-p 0.95 --seed 1 "$@"
[ "$json" = 1 ] || echo
