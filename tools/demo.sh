#!/usr/bin/env bash
# The demo: installs what is missing, builds, writes a tiny random CodeGen model with the real
# CodeGen tokenizer, and generates from a text prompt on 2 ranks (tensor parallel, TP=2).
# The weights are random, so the completion is noise: the point is the pipeline.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
python3 -c "import numpy" 2>/dev/null || python3 -m pip install -q numpy
bash tools/build.sh
if [ ! -f demo-model/model.safetensors ]; then
  python3 tools/make_random_model.py configs/tiny-demo.json demo-model --dtype f16 --tokenizer tests/data/tokenizer/codegen
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
launcher/tpgen-mpirun -np 2 generate --model demo-model \
  --prompt $'def fibonacci(n):\n    ' --max-new-tokens 24 --temperature 0.8 --top-k 40 --seed 1 --json
