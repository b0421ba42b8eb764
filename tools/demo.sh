#!/usr/bin/env bash
# The demo: installs what is missing, builds, and has models/codegen-tiny-py (a small CodeGen
# trained on the Python standard library, shipped in the repo; tools/fixtures/train_tiny.py) complete a
# method of a Python class on 2 ranks (tensor parallel, TP=2; tools/demo_generate.sh has the
# prompt and settings). The model is tiny (14M parameters, ~20 min of CPU training): its code
# reads as Python, it is not meant to be right.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/dev/install-deps.sh
bash tools/dev/build.sh
bash tools/demo_generate.sh
