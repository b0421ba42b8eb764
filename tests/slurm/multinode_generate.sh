#!/usr/bin/env bash
# launcher/tpgen-multinode.sbatch across the two nodes of the test cluster (cluster.sh start DIR 2),
# submitted as a user would (sbatch --nodes=2), CPU, the ranks on both nodes talking over TCP on
# the bridge's network only (lib.sh multinode):
#  1. TP 2 (one rank per node) and TP 4 (two per node) by srun --mpi=pmix, TP 2 by mpirun inside
#     the allocation: each job ran on node1 and node2, and its JSON equals `mpirun -np N tpgen
#     generate` on one node; its ids equal `tpgen generate` run directly (TP 1);
#  2. the kernel-choice cache on a shared path (TPGEN_KERNEL_CACHE, attention at D = 64 measured):
#     node1 measures and saves; node2 then measures its own (never node1's choice); node2 again:
#     cached; the file has one line per node.
# usage: multinode_generate.sh TPGEN MPIEXEC FIXTURE TOKDIR D64_CONFIG WORKDIR   (SLURM_CONF: the cluster)
source "$(dirname "$0")/lib.sh"
multinode
tpgen=$(realpath "$1") mpiexec=$2 fixture=$(realpath "$3") tokdir=$(realpath "$4") d64=$(realpath "$5") work=$6
mkdir -p "$work" && work=$(realpath "$work") && cd "$work"
model="$work/model"
make_model "$fixture" "$tokdir" "$model"
prompt="a b c d e"
flags=(--max-new-tokens 12 --ignore-eos --json)
ids() { python3 -c 'import json, sys; print(json.loads(sys.argv[1])["ids"])' "$1"; }
direct=$("$tpgen" generate --model "$model" --prompt "$prompt" --backend cpu --threads 1 "${flags[@]}" 2>"$work/direct.err") ||
  { echo "FAIL: tpgen generate failed:"; cat "$work/direct.err"; exit 1; }

# 1. across the nodes: TP 2 by srun, TP 4 by srun, TP 2 by mpirun
for c in "2 1 srun" "4 2 srun" "2 1 mpirun"; do
  read -r tp per launch <<<"$c"
  # the one-node answer: the same TP on this machine (the root namespace, shared memory)
  ref=$(env -u OMPI_MCA_btl -u OMPI_MCA_btl_tcp_if_include -u OMPI_MCA_oob_tcp_if_include \
        "$mpiexec" --oversubscribe --allow-run-as-root -np "$tp" "$tpgen" generate --model "$model" --prompt "$prompt" \
        --backend cpu --threads 1 "${flags[@]}" 2>"$work/ref$tp.err") ||
    { echo "FAIL: mpirun -np $tp failed:"; cat "$work/ref$tp.err"; exit 1; }
  out="$work/tp$tp-$launch.out"
  TPGEN_LAUNCH=$launch submit "$out" --nodes=2 --ntasks-per-node="$per" "$repo/launcher/tpgen-multinode.sbatch" \
    --tpgen "$tpgen" generate --model "$model" --prompt "$prompt" "${flags[@]}"
  [ "$rc" = 0 ] || { echo "FAIL: TP $tp by $launch, job $job exited $rc:"; cat "$out"; exit 1; }
  nodes=$(job_field "$job" NodeList) n=$(job_field "$job" NumNodes)
  [ "$nodes" = "node[1-2]" ] && [ "$n" = 2 ] || { echo "FAIL: job $job ran on $nodes ($n nodes), not node[1-2]"; exit 1; }
  grep -q "TP=$tp," "$out" || { echo "FAIL: job $job did not run TP=$tp:"; cat "$out"; exit 1; }
  same_json "$(json_of "$out")" "$ref" "TP $tp across node1 and node2 by $launch (job $job)"
  [ "$(ids "$(json_of "$out")")" = "$(ids "$direct")" ] ||
    { echo "FAIL: job $job's ids $(ids "$(json_of "$out")") differ from tpgen generate's $(ids "$direct")"; exit 1; }
done
echo "ids equal tpgen generate's (TP 1): $(ids "$direct")"

# 2. the kernel cache on a shared path: each node its own choice
cache="$work/shared-cache/cpu-kernels.tsv"
rm -rf "$work/shared-cache"
bench_on() { # NODE: the "cpu attention: ..." line of a TP 1 bench job on NODE
  TPGEN_KERNEL_CACHE=$cache submit "$work/bench-$1.out" --nodes=1 --ntasks-per-node=1 -w "$1" \
    "$repo/launcher/tpgen-multinode.sbatch" --tpgen "$tpgen" bench --config "$d64" --random-weights --batch 1 \
    --context 8 --steps 1 --prefill 0 --verbose
  [ "$rc" = 0 ] || { echo "FAIL: bench job $job on $1 exited $rc:" >&2; cat "$work/bench-$1.out" >&2; exit 1; }
  grep "^cpu attention: " "$work/bench-$1.out" || echo "no cpu attention line"
}
expect() { [[ "$2" == *"$3"* ]] && echo "kernel cache: $1: ok ($2)" || { echo "FAIL: kernel cache: $1: '$2', want '$3'"; exit 1; }; }
unset TPGEN_CPU_ISA TPGEN_CPU_ATTN # measured, not capped or forced
expect "node1, first" "$(bench_on node1)" "saved to $cache"
expect "node2, first (the file holds node1's choice)" "$(bench_on node2)" "saved to $cache"
expect "node2, second" "$(bench_on node2)" "cached in $cache"
for n in node1 node2; do
  c=$(grep -c "^$n: .*	attention	" "$cache" || true)
  [ "$c" = 1 ] || { echo "FAIL: kernel cache: $c attention lines for $n in:"; cat "$cache"; exit 1; }
done
echo "kernel cache: one attention line per node in $cache"
echo "1 passed, 0 failed"
