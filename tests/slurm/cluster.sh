#!/usr/bin/env bash
# A Slurm cluster for the tests on this one machine, from Debian's slurm-wlm and munge packages:
# one node (the machine itself), or two nodes in network namespaces (tests/slurm/nodes.sh).
#
#   tests/slurm/cluster.sh start [DIR] [NODES]  # DIR (default build/slurm-cluster) holds everything;
#                                               # NODES 1 (default) or 2
#   tests/slurm/cluster.sh stop  [DIR]
#   tests/slurm/cluster.sh env   [DIR]          # prints `export SLURM_CONF=DIR/etc/slurm.conf`
#   tests/slurm/cluster.sh kill-node DIR NODE [all|but-stepd]  # two nodes: SIGKILL the processes
#                                               # of NODE (all: a crash; but-stepd: its slurmstepd lives)
#   tests/slurm/cluster.sh start-node DIR NODE  # two nodes: NODE's slurmd again, until it is idle
#
# start writes a munge key and a slurm.conf (select/cons_tres, one partition "tpgen",
# MpiDefault=none, proctrack/linuxproc), starts munged, slurmctld and each slurmd in the
# foreground mode of each (so $! is the daemon's own pid, recorded in DIR/pids), and returns once
# `sinfo` shows every node idle and `srun --mpi=pmix` works. One node: the node is this machine
# (`hostname -s`, `nproc`, its memory). Two nodes: node1 and node2, each `nproc` CPUs, each in its
# own network, UTS and mount namespace with its own address on a bridge the root namespace holds
# (slurmctld listens there; tests/slurm/nodes.sh); where namespaces cannot be made, start writes
# the reason to DIR/unavailable and exits 77 (the tests then report SKIPPED). Nothing outside DIR
# is written or read (the conf through SLURM_CONF, the munge socket through AuthInfo=socket=,
# ports picked free), so a Slurm already running on the machine is left alone. stop cancels the
# jobs of this cluster, then ends exactly the recorded pids (TERM, then KILL after 10 s), then
# removes the namespaces and the bridge. start first stops a cluster left in DIR by an
# interrupted run (namespaces and bridge found by their names, which DIR's path gives). Needs
# root: slurmd starts job steps as the submitting user.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cmd="${1:-}"
dir="${2:-$here/../../build/slurm-cluster}"
mkdir -p "$dir" && dir="$(cd "$dir" && pwd)"
conf="$dir/etc/slurm.conf"
say() { echo "cluster.sh: $*" >&2; }
die() { say "error: $*"; exit 1; }
source "$here/nodes.sh"
net_names

# a recorded pid is ours only while it still runs the daemon we started (pids get reused)
alive() { [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -q "$2"; }

stop() {
  stop_daemons
  net_down
}

stop_daemons() {
  [ -f "$dir/pids" ] || return 0
  if [ -f "$conf" ] && grep -q slurmctld "$dir/pids"; then
    # end this cluster's jobs first: their slurmstepd processes outlive slurmd otherwise
    local jobs
    jobs=$(SLURM_CONF="$conf" timeout 10 squeue -h -o %i 2>/dev/null || true)
    if [ -n "$jobs" ]; then
      SLURM_CONF="$conf" timeout 10 scancel $jobs 2>/dev/null || true
      for _ in $(seq 20); do
        [ -z "$(SLURM_CONF="$conf" timeout 5 squeue -h -o %i 2>/dev/null || true)" ] && break
        sleep 0.5
      done
    fi
  fi
  # reverse start order: slurmd, slurmctld, munged
  tac "$dir/pids" 2>/dev/null | while read -r name pid; do
    alive "$pid" "${name%%-*}" || continue
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do alive "$pid" "${name%%-*}" || break; sleep 0.1; done
    if alive "$pid" "${name%%-*}"; then say "$name (pid $pid) ignored TERM for 10 s; killing it"; kill -KILL "$pid" 2>/dev/null || true; fi
    say "stopped $name (pid $pid)"
  done
  rm -f "$dir/pids"
}

start() {
  local nodes=${1:-1}
  [ "$nodes" = 1 ] || [ "$nodes" = 2 ] || die "NODES is 1 or 2, not \"$nodes\""
  [ "$(id -u)" -eq 0 ] || die "needs root (slurmd starts job steps as the submitting user)"
  for b in munged munge slurmctld slurmd sinfo python3; do
    command -v "$b" >/dev/null || die "$b not found: install slurm-wlm and munge (bash tools/dev/install-deps.sh)"
  done
  stop
  rm -rf "$dir"/{etc,munge,state,spool,log,tmp,nodes,unavailable}
  if [ "$nodes" = 2 ]; then
    # each node has its own /tmp: what the nodes share (this DIR, the binary, the model) cannot be there
    case "$dir/" in /tmp/* | /dev/shm/*) die "two nodes: DIR $dir is under /tmp or /dev/shm, which each node has its own of; give a DIR elsewhere" ;; esac
    local why
    why=$(net_check)
    if [ -n "$why" ]; then
      echo "two nodes in namespaces cannot be made here: $why" >"$dir/unavailable"
      say "SKIPPED: $(cat "$dir/unavailable")"
      exit 77
    fi
  fi
  mkdir -p "$dir"/{etc,munge,state,spool,log,tmp}
  chmod 700 "$dir" "$dir"/munge
  local sock="$dir/munge/munge.socket"
  ((${#sock} < 100)) || die "munge socket path $sock is too long for a Unix socket; give a shorter DIR"

  # munge: a fresh 1 KiB key, our own socket, pid, log and seed files
  head -c 1024 /dev/urandom >"$dir/munge/munge.key"
  chmod 600 "$dir/munge/munge.key"
  munged -F --force --key-file="$dir/munge/munge.key" --socket="$sock" --pid-file="$dir/munge/munged.pid" \
    --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed" </dev/null >>"$dir/log/munged.log" 2>&1 &
  echo "munged $!" >>"$dir/pids"
  for _ in $(seq 50); do munge -n -S "$sock" 2>/dev/null | unmunge -S "$sock" >/dev/null 2>&1 && break; sleep 0.1; done
  munge -n -S "$sock" | unmunge -S "$sock" >/dev/null || { tail -5 "$dir/log/munged.log" >&2; stop; die "munged did not start"; }

  local host cpus mem ports node_names
  host=$(hostname -s)
  cpus=$(nproc)
  mem=$(awk '/MemTotal/ { printf "%d", $2 / 1024 * 0.9 }' /proc/meminfo)  # MB, some left for the OS
  ports=$(python3 -c 'import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("", 0))
print(*[s.getsockname()[1] for s in ss])')
  read -r ctld_port d_port <<<"$ports"
  write_conf "$nodes"
  export SLURM_CONF="$conf"
  slurmctld -D -i </dev/null >>"$dir/log/slurmctld.out" 2>&1 &
  echo "slurmctld $!" >>"$dir/pids"
  if [ "$nodes" = 1 ]; then
    node_names=$host
    slurmd -D </dev/null >>"$dir/log/slurmd.out" 2>&1 &
    echo "slurmd $!" >>"$dir/pids"
  else
    node_names="node1 node2"
    # shellcheck disable=SC2086
    net_up $node_names
    for n in $node_names; do node_start "$n"; done
    # what jobs on these nodes need from the submitting shell (tests/slurm/lib.sh sources it):
    # Open MPI between the nodes over TCP on the bridge's network only, no shared memory
    cat >"$dir/etc/multinode.env" <<EOF
export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=$net_sub.0/24 OMPI_MCA_oob_tcp_if_include=$net_sub.0/24
node1_addr=$(node_addr node1) node2_addr=$(node_addr node2)
EOF
  fi

  for n in $node_names; do wait_idle "$n" || { stop; die "the cluster did not come up"; }; done
  # Debian's mpi/pmix plugin dlopens libpmix.so, which only libpmix-dev ships
  if ! out=$(timeout 20 srun --mpi=pmix -N "$nodes" -n "$nodes" true 2>&1); then
    echo "$out" >&2
    stop
    die "srun --mpi=pmix does not work here; on Debian install libpmix-dev (Slurm's PMIx plugin loads its libpmix.so)"
  fi
  if [ "$nodes" = 1 ]; then
    say "node $host idle ($cpus CPUs, $mem MB); export SLURM_CONF=$conf"
  else
    say "node1 ($(node_addr node1)) and node2 ($(node_addr node2)) idle, $cpus CPUs each, slurmctld on $net_sub.1 (bridge $net_br); export SLURM_CONF=$conf"
  fi
}

# wait_idle NODE: until sinfo shows NODE idle (30 s; else its logs, and status 1)
wait_idle() {
  local state=""
  for _ in $(seq 60); do
    state=$(timeout 5 sinfo -h -n "$1" -o %T 2>/dev/null || true)
    [ "$state" = idle ] && return 0
    sleep 0.5
  done
  say "node $1 is \"${state:-not reported}\" after 30 s; logs:"
  tail -n 15 "$dir"/log/*.log "$dir"/log/*.out >&2 || true
  return 1
}

# write_conf NODES: DIR/etc/slurm.conf (uses host, cpus, mem, ctld_port, d_port, sock)
write_conf() {
  local ctld_host=$host spool="$dir/spool/slurmd" tmpfs="$dir/tmp" d_log="$dir/log/slurmd.log"
  local d_pid="$dir/spool/slurmd.pid" node_lines d_timeout=300 kill_wait=5
  # one node: 2 GPUs, stood in for by two device files (gres.conf; Slurm counts a GPU per file and
  # refuses a count without files): a job given them runs --backend cuda, which the emulated
  # device serves (tests/slurm/emu.sh, TPGEN_CUDA_MODULE in the job's environment)
  node_lines="NodeName=$host CPUs=$cpus RealMemory=$mem Gres=gpu:2 State=UNKNOWN
PartitionName=tpgen Nodes=$host Default=YES MaxTime=INFINITE State=UP"
  rm -f "$(dirname "$conf")/gres.conf"
  [ "$1" = 2 ] || printf 'Name=gpu File=/dev/null,/dev/zero\n' >"$(dirname "$conf")/gres.conf"
  if [ "$1" = 2 ]; then
    # slurmctld on the bridge's address; each slurmd's spool, pid and log by node name (%n);
    # TmpFS is each node's own /tmp (nodes.sh mounts DIR/nodes/NODE/tmp there)
    ctld_host="$host($net_sub.1)"
    spool="$dir/spool/%n" d_pid="$dir/spool/%n/slurmd.pid" d_log="$dir/log/slurmd-%n.log" tmpfs=/tmp
    # a node that stops answering is DOWN (its jobs NODE_FAIL) after this many seconds: the
    # node-loss test waits for it (Slurm's default, 300 s, is what a real cluster waits)
    d_timeout=6
    # scancel: SIGKILL this long after SIGTERM; a server's drain must end within it (the drain
    # test's 16 streams take ~2 s, more on a loaded machine). srun, once a node is lost, waits
    # KillWait + 2 s for that node's tasks before it gives up (the node-loss test's bound)
    kill_wait=10
    node_lines="NodeName=node1 NodeAddr=$(node_addr node1) CPUs=$cpus RealMemory=$((mem / 2)) State=UNKNOWN
NodeName=node2 NodeAddr=$(node_addr node2) CPUs=$cpus RealMemory=$((mem / 2)) State=UNKNOWN
PartitionName=tpgen Nodes=node1,node2 Default=YES MaxTime=INFINITE State=UP"
  fi
  cat >"$conf" <<EOF
# Written by tests/slurm/cluster.sh for a $1-node test cluster; every path is under $dir.
ClusterName=tpgentest
# Job ids start from this cluster's port: Open MPI names its shared-memory files after the PMIx
# namespace (slurm.pmix.JOBID.STEP), so two test clusters on one machine must not both run job 2
FirstJobId=$(( (ctld_port % 60000) * 1000 + 1 ))
SlurmctldHost=$ctld_host
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$spool
# jobs' scratch, and the PMIx plugin's client directories (named by job id: two test clusters
# on one machine would collide in /tmp)
TmpFS=$tmpfs
SlurmctldPidFile=$dir/state/slurmctld.pid
SlurmdPidFile=$d_pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$d_log
SlurmdDebug=info
SlurmctldDebug=info
SwitchType=switch/none
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
# schedule a job as soon as it is submitted (the default batches submissions over 3 s)
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
# GPUs are a known resource type, so jobs may ask for --gpus-per-node (one node: 2, no devices)
GresTypes=gpu
ReturnToService=2
# scancel: TERM, then KILL after KillWait seconds; short so cancellation tests are quick
KillWait=$kill_wait
MinJobAge=300
InactiveLimit=0
SlurmdTimeout=$d_timeout
$node_lines
EOF
}

case "$cmd" in
  start) start "${3:-1}" ;;
  kill-node) node_kill "${3:?usage: $0 kill-node DIR NODE [all|but-stepd]}" "${4:-all}" ;;
  start-node)
    n=${3:?usage: $0 start-node DIR NODE}
    export SLURM_CONF="$conf"
    node_start "$n"
    wait_idle "$n" || die "$n did not come back" ;;
  stop) stop ;;
  env)
    echo "export SLURM_CONF=$conf"
    [ ! -f "$dir/etc/multinode.env" ] || grep '^export ' "$dir/etc/multinode.env" ;;
  *) echo "usage: $0 start|stop|env|kill-node|start-node [DIR] [NODES|NODE]" >&2; exit 2 ;;
esac
