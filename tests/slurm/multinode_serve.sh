#!/usr/bin/env bash
# `tpgen serve` across the two nodes of the test cluster: served from node1 to the submitting
# side, scancel drains, a node lost ends the job (tests/slurm/multinode_serve.py says what).
# usage: multinode_serve.sh TPGEN FIXTURE TOKDIR WORKDIR   (SLURM_CONF: the two-node cluster)
source "$(dirname "$0")/lib.sh"
multinode
tpgen=$(realpath "$1") fixture=$(realpath "$2") tokdir=$(realpath "$3") work=$4
mkdir -p "$work" && work=$(realpath "$work") && cd "$work"
make_model "$fixture" "$tokdir" "$work/model"
# the one-node answer the served completion must equal
"$tpgen" generate --model "$work/model" --prompt "a b c d e" --max-new-tokens 12 --ignore-eos --json --backend cpu \
  --threads 1 >"$work/ref.json" 2>"$work/ref.err" || { echo "FAIL: tpgen generate failed:"; cat "$work/ref.err"; exit 1; }
export node1_addr node2_addr
exec python3 "$repo/tests/slurm/multinode_serve.py" "$tpgen" "$work/model" "$work" "$(dirname "$(dirname "$SLURM_CONF")")" \
  "$work/ref.json"
