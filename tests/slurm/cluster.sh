#!/usr/bin/env bash
# A one-node Slurm cluster for the tests, from Debian's slurm-wlm and munge packages.
#
#   tests/slurm/cluster.sh start [DIR]   # DIR (default build/slurm-cluster) holds everything
#   tests/slurm/cluster.sh stop  [DIR]
#   tests/slurm/cluster.sh env   [DIR]   # prints `export SLURM_CONF=DIR/etc/slurm.conf`
#
# start writes a munge key and a slurm.conf for this machine (`hostname -s`, `nproc`, its memory;
# select/cons_tres, one partition "tpgen", MpiDefault=none, proctrack/linuxproc), starts munged,
# slurmctld and slurmd in the foreground mode of each (so $! is the daemon's own pid, recorded in
# DIR/pids), and returns once `sinfo` shows the node idle. Nothing outside DIR is written or read
# (the conf through SLURM_CONF, the munge socket through AuthInfo=socket=, ports picked free), so
# a Slurm already running on the machine is left alone. stop cancels the jobs of this cluster,
# then ends exactly the recorded pids (TERM, then KILL after 10 s). start first stops a cluster
# left in DIR by an interrupted run. Needs root: slurmd starts job steps as the submitting user.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cmd="${1:-}"
dir="${2:-$here/../../build/slurm-cluster}"
mkdir -p "$dir" && dir="$(cd "$dir" && pwd)"
conf="$dir/etc/slurm.conf"
say() { echo "cluster.sh: $*" >&2; }
die() { say "error: $*"; exit 1; }

# a recorded pid is ours only while it still runs the daemon we started (pids get reused)
alive() { [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -q "$2"; }

stop() {
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
    alive "$pid" "$name" || continue
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do alive "$pid" "$name" || break; sleep 0.1; done
    if alive "$pid" "$name"; then say "$name (pid $pid) ignored TERM for 10 s; killing it"; kill -KILL "$pid" 2>/dev/null || true; fi
    say "stopped $name (pid $pid)"
  done
  rm -f "$dir/pids"
}

start() {
  [ "$(id -u)" -eq 0 ] || die "needs root (slurmd starts job steps as the submitting user)"
  for b in munged munge slurmctld slurmd sinfo python3; do
    command -v "$b" >/dev/null || die "$b not found: install slurm-wlm and munge (bash tools/dev/install-deps.sh)"
  done
  stop
  rm -rf "$dir"/{etc,munge,state,spool,log,tmp}
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

  local host cpus mem ports
  host=$(hostname -s)
  cpus=$(nproc)
  mem=$(awk '/MemTotal/ { printf "%d", $2 / 1024 * 0.9 }' /proc/meminfo)  # MB, some left for the OS
  ports=$(python3 -c 'import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("", 0))
print(*[s.getsockname()[1] for s in ss])')
  read -r ctld_port d_port <<<"$ports"
  cat >"$conf" <<EOF
# Written by tests/slurm/cluster.sh for a one-node test cluster; every path is under $dir.
ClusterName=tpgentest
# Job ids start from this cluster's port: Open MPI names its shared-memory files after the PMIx
# namespace (slurm.pmix.JOBID.STEP), so two test clusters on one machine must not both run job 2
FirstJobId=$(( (ctld_port % 60000) * 1000 + 1 ))
SlurmctldHost=$host
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/slurmd
# jobs' scratch, and the PMIx plugin's client directories (named by job id: two test clusters
# on one machine would collide in /tmp)
TmpFS=$dir/tmp
SlurmctldPidFile=$dir/state/slurmctld.pid
SlurmdPidFile=$dir/spool/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
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
# GPUs are a known resource type, so jobs may ask for --gpus-per-node (this node has none)
GresTypes=gpu
ReturnToService=2
# scancel: TERM, then KILL after KillWait seconds; short so cancellation tests are quick
KillWait=5
MinJobAge=300
InactiveLimit=0
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=tpgen Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF="$conf"
  slurmctld -D -i </dev/null >>"$dir/log/slurmctld.out" 2>&1 &
  echo "slurmctld $!" >>"$dir/pids"
  slurmd -D </dev/null >>"$dir/log/slurmd.out" 2>&1 &
  echo "slurmd $!" >>"$dir/pids"

  local state=""
  for _ in $(seq 60); do
    state=$(timeout 5 sinfo -h -n "$host" -o %T 2>/dev/null || true)
    [ "$state" = idle ] && break
    sleep 0.5
  done
  if [ "$state" != idle ]; then
    say "node $host is \"${state:-not reported}\" after 30 s; logs:"
    tail -n 15 "$dir"/log/*.log "$dir"/log/*.out >&2 || true
    stop
    die "the cluster did not come up"
  fi
  # Debian's mpi/pmix plugin dlopens libpmix.so, which only libpmix-dev ships
  if ! out=$(timeout 20 srun --mpi=pmix -n1 true 2>&1); then
    echo "$out" >&2
    stop
    die "srun --mpi=pmix does not work here; on Debian install libpmix-dev (Slurm's PMIx plugin loads its libpmix.so)"
  fi
  say "node $host idle ($cpus CPUs, $mem MB); export SLURM_CONF=$conf"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  env) echo "export SLURM_CONF=$conf" ;;
  *) echo "usage: $0 start|stop|env [DIR]" >&2; exit 2 ;;
esac
