# Sourced by tests/slurm/cluster.sh: the nodes of a two-node test cluster on this one machine.
#
# Each node is a network namespace with its own UTS namespace (its hostname is the node name) and
# mount namespace (its own /tmp and /dev/shm: node-local scratch; every other path is shared, as
# on a cluster with a shared file system), and one address on a private bridge that the root
# namespace holds:
#
#   root namespace: bridge $net_br, 10.203.S.1/24 (slurmctld, munged, the submitting side)
#     veth $net_br-I  <->  eth0 in namespace tpgen-TAG-nodeI, 10.203.S.(10+I)/24 (slurmd -N nodeI)
#
# TAG and S come from DIR's path, so two build directories get two networks, and a start finds by
# name what an interrupted run left. Needs root with CAP_NET_ADMIN and CAP_SYS_ADMIN (ip netns,
# unshare): net_check says why not. Uses: dir, say, die (cluster.sh).

# net_names: the names for this DIR (net_tag, net_br, net_sub = "10.203.S")
net_names() {
  local sum
  sum=$(printf '%s' "$dir" | cksum | cut -d' ' -f1)
  net_tag=$(printf '%06x' $((sum % 16777216)))
  net_br="tpgb$net_tag"                     # 12 bytes with the "-I" of each veth (at most 15)
  net_sub="10.203.$((1 + sum % 250))"
}
net_ns() { echo "tpgen-$net_tag-$1"; }        # NODE -> its namespace's name
node_addr() { echo "$net_sub.$((10 + ${1#node}))"; } # nodeI -> 10.203.S.(10+I)

# net_check: empty when namespaces and links can be made here, else the reason on stdout
net_check() {
  local c t="tpgc$net_tag"
  for c in ip unshare nsenter mount; do command -v "$c" >/dev/null || { echo "$c not found (iproute2, util-linux)"; return; }; done
  [ "$(id -u)" -eq 0 ] || { echo "not root (ip netns and unshare need CAP_NET_ADMIN and CAP_SYS_ADMIN)"; return; }
  if ! out=$(ip netns add "$t" 2>&1); then echo "cannot create a network namespace: $out"; return; fi
  out=$(ip netns exec "$t" unshare --uts --mount true 2>&1) || { ip netns del "$t" 2>/dev/null; echo "cannot unshare UTS and mount namespaces: $out"; return; }
  ip netns del "$t" 2>/dev/null || true
  if ! out=$(ip link add "$t" type bridge 2>&1); then echo "cannot create a bridge: $out"; return; fi
  ip link del "$t" 2>/dev/null || true
}

# net_up NODE...: the bridge, and per node its namespace, veth pair, address and hosts file
net_up() {
  local n ns hosts="$dir/nodes/hosts"
  ip link add "$net_br" type bridge
  ip addr add "$net_sub.1/24" dev "$net_br"
  ip link set "$net_br" up
  mkdir -p "$dir/nodes"
  { echo "127.0.0.1 localhost"; echo "$net_sub.1 $(hostname -s)"; } >"$hosts"
  for n in "$@"; do
    ns=$(net_ns "$n")
    ip netns add "$ns"
    ip link add "$net_br-${n#node}" type veth peer name eth0 netns "$ns"
    ip link set "$net_br-${n#node}" master "$net_br" up
    ip -n "$ns" addr add "$(node_addr "$n")/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    echo "$(node_addr "$n") $n" >>"$hosts"
    mkdir -p "$dir/nodes/$n/tmp" "$dir/spool/$n"
    chmod 1777 "$dir/nodes/$n/tmp"
  done
}

# net_down: every process left in this DIR's namespaces (jobs' slurmstepd and ranks: all ours),
# then the namespaces (their veth ends go with them) and the bridge. Safe when nothing is there.
net_down() {
  local ns pids l
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^tpgen-$net_tag-" || true); do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    if [ -n "$pids" ]; then
      say "killing what is left in $ns: $(echo $pids)"
      kill -KILL $pids 2>/dev/null || true
    fi
    ip netns del "$ns" 2>/dev/null || say "warning: could not delete namespace $ns"
  done
  # a namespace goes (and its veth pair with it) once the kernel has dropped its last reference,
  # a moment after `ip netns del`: delete the root ends now, so a start right after finds the names free
  for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep "^$net_br-" || true); do
    ip link del "$l" 2>/dev/null || true
  done
  if ip link show "$net_br" >/dev/null 2>&1; then
    ip link del "$net_br" || say "warning: could not delete bridge $net_br"
  fi
}

# node_start NODE: slurmd -N NODE in its namespaces, its pid appended to DIR/pids. nsenter and
# unshare exec in place, so $! is slurmd's own pid (seen from the root namespace). nsenter, not
# `ip netns exec`: that mounts a fresh /sys without /sys/fs/cgroup, and slurmd's cgroup plugin
# then fails to start ("No filesystem mounted on /sys/fs/cgroup").
node_start() {
  local n=$1
  nsenter --net="/run/netns/$(net_ns "$n")" unshare --uts --mount --propagation slave sh -c '
    set -e
    hostname "$1"
    mount --bind "$2/nodes/hosts" /etc/hosts
    mount -t tmpfs -o size=256m,mode=1777 tmpfs /dev/shm
    mount --bind "$2/nodes/$1/tmp" /tmp
    exec slurmd -D -N "$1"' sh "$n" "$dir" </dev/null >>"$dir/log/slurmd-$n.out" 2>&1 &
  echo "slurmd-$n $!" >>"$dir/pids"
}

# node_kill NODE [all|but-stepd]: SIGKILL to every process of the node (slurmd, slurmstepd, the
# ranks), as in a crash of the machine, or to all but its slurmstepd processes (slurmd and the
# job's tasks die, the step daemons live to report it). The node's address stays: peers see
# their connections reset, not a silent network.
node_kill() {
  local p pids="" what=${2:-all}
  for p in $(ip netns pids "$(net_ns "$1")"); do
    [ "$what" = but-stepd ] && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = slurmstepd ] && continue
    pids+=" $p"
  done
  [ -n "$pids" ] && kill -KILL $pids
  say "killed ($what) the processes of $1:$pids"
}
