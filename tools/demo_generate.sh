#!/usr/bin/env bash
# The demo's generation step: models/codegen-tiny-py (a small CodeGen trained on the Python
# standard library, tools/fixtures/train_tiny.py) completes a method of a Python class on 2 ranks (TP=2).
# Prints the prompt, then the completion as tpgen streams it; with --json, only tpgen's JSON.
# The settings are chosen for a 14M-parameter model: sampling (temperature 0.5, top-p 0.9) with a
# repetition penalty of 1.3, which keeps it out of the loops greedy decoding falls into
# ("os.path.path.path..."), and a stop at the first blank line, before a model this small loses
# the thread. The result reads like Python; it is not meant to be right.
# usage: tools/demo_generate.sh [more tpgen flags]   (TPGEN_BIN picks the binary)
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
prompt=$'class Stack:\n    """A last-in, first-out stack."""\n\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n        """Put item on top of the stack."""\n'
json=0
for arg in "$@"; do [ "$arg" = "--json" ] && json=1; done
[ "$json" = 1 ] || printf '%s' "$prompt"
launcher/tpgen-mpirun -np 2 generate --model models/codegen-tiny-py --prompt "$prompt" \
  --max-new-tokens 64 --temperature 0.5 --top-p 0.9 --repetition-penalty 1.3 --seed 1 \
  --stop $'\n\n' "$@"
[ "$json" = 1 ] || echo
