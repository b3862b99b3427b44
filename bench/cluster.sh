# An emulated cluster on one machine, sourced by benches and tests: H "hosts", each a
# network namespace with one interface (eth0, 10.<net>.0.<i+1>/16) on a bridge that
# lives in a namespace of its own (the "switch"), so nothing touches the machine's own
# network. Each host's link is shaped in both directions with tc TBF at RATE (this
# kernel has no netem: no added delay). A namespace is a host for the communicators
# (comm/launch/host_identity.h), so the hierarchical algorithms see H hosts.
#
#   source bench/cluster.sh
#   cluster_up H RATE        e.g. cluster_up 4 1gbit   (RATE "" = unshaped)
#   cluster_exec I CMD...    run CMD on host I (inside its namespace)
#   cluster_addr I           host I's address
#   cluster_tx_bytes I       bytes host I has sent over its link so far
#   cluster_launch BIN LOCAL ORDER PORT LOG PROG ARGS...
#                            one `BIN/launch -n LOCAL --rank-order ORDER` per host (node 0
#                            serves the rendezvous at PORT), host I's output in LOG.hI;
#                            fails when any host's launch does
#   cluster_mpirun SLOTS ARGS...
#                            Open MPI's `mpirun ARGS` across the hosts: mpirun in host 0's
#                            namespace, orted on every other host through
#                            bench/cluster_mpi_agent.sh (its rsh agent), a hostfile of the
#                            hosts' addresses with SLOTS slots each, out-of-band and BTL TCP
#                            traffic on the hosts' eth0 (ARGS add -n, --map-by, the program)
#   cluster_down             remove every namespace (also done on EXIT)
# Needs root (CAP_NET_ADMIN) and ip(8)/tc(8); cluster_up returns 77 with the reason on
# stderr where the machine cannot make namespaces, veth pairs, bridges or tc qdiscs at all
# (cluster_probe), and 1 for any failure once it can.
CLUSTER_BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# What this machine cannot do at all is a skip (77): no ip(8), no network namespaces, no
# bridge, no veth, no tc. It is probed once, on names no other run uses, before the
# cluster is built; after the probe passed, any failure (a name taken by a leftover
# namespace, a veth or qdisc refused) is a failure (1), never a skip, so a broken
# environment cannot hide the tests that need the cluster.
cluster_probe() {
  command -v ip >/dev/null || { echo "cluster: no ip(8)" >&2; return 77; }
  local a=dpt-probe-$$-$RANDOM err rc=0
  err=$(ip netns add "$a" 2>&1) || { echo "cluster: cannot create a network namespace: $err" >&2; return 77; }
  if ! err=$(ip -n "$a" link add br0 type bridge 2>&1); then
    echo "cluster: no bridge support: $err" >&2; rc=77
  elif ! err=$(ip -n "$a" link add v0 type veth peer name v1 2>&1); then
    echo "cluster: cannot create a veth pair: $err" >&2; rc=77
  elif ! err=$(ip -n "$a" link set v0 up 2>&1 && tc -n "$a" qdisc add dev v0 root tbf rate 1gbit burst 256kb latency 50ms 2>&1); then
    echo "cluster: cannot shape with tc: $err" >&2; rc=77
  fi
  ip netns delete "$a" 2>/dev/null
  return $rc
}

# Namespaces left by an earlier run that was killed (its pid gone): removed first.
cluster_reap() {
  local ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^dc[0-9]+-'); do
    pid=${ns#dc}; pid=${pid%%-*}
    [[ -d /proc/$pid ]] || ip netns delete "$ns" 2>/dev/null
  done
}

cluster_fail() { echo "cluster: $*" >&2; }

cluster_up() {
  local hosts=$1 rate=$2 i err
  cluster_probe || return $?
  cluster_reap
  CLUSTER_TAG=dc$$
  CLUSTER_NET=$((100 + $$ % 100))
  CLUSTER_HOSTS=$hosts
  CLUSTER_SWITCH=$CLUSTER_TAG-sw
  err=$(ip netns add "$CLUSTER_SWITCH" 2>&1) || { cluster_fail "cannot create the switch namespace $CLUSTER_SWITCH: $err"; return 1; }
  trap cluster_down EXIT
  err=$(ip -n "$CLUSTER_SWITCH" link add br0 type bridge 2>&1) || { cluster_fail "bridge in $CLUSTER_SWITCH: $err"; return 1; }
  ip -n "$CLUSTER_SWITCH" link set br0 up
  for ((i = 0; i < hosts; i++)); do
    local ns=$CLUSTER_TAG-h$i port=p$i
    err=$(ip netns add "$ns" 2>&1) || { cluster_fail "cannot create $ns: $err"; return 1; }
    err=$(ip link add eth0 netns "$ns" type veth peer name "$port" netns "$CLUSTER_SWITCH" 2>&1) ||
      { cluster_fail "veth pair for $ns: $err"; return 1; }
    ip -n "$ns" addr add "10.$CLUSTER_NET.0.$((i + 1))/16" dev eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
    ip -n "$CLUSTER_SWITCH" link set "$port" master br0
    ip -n "$CLUSTER_SWITCH" link set "$port" up
    if [[ -n $rate ]]; then
      # Upload: the host's eth0; download: the switch port towards it. Bursts of 256 KiB
      # at most, so the rate holds over milliseconds, as a real link's would.
      for side in "$ns eth0" "$CLUSTER_SWITCH $port"; do
        set -- $side
        err=$(tc -n "$1" qdisc add dev "$2" root tbf rate "$rate" burst 256kb latency 50ms 2>&1) ||
          { cluster_fail "shaping $2 in $1 at $rate: $err"; return 1; }
      done
    fi
  done
}

cluster_exec() {
  local i=$1
  shift
  ip netns exec "$CLUSTER_TAG-h$i" "$@"
}

cluster_addr() { echo "10.$CLUSTER_NET.0.$(($1 + 1))"; }

cluster_tx_bytes() { ip netns exec "$CLUSTER_TAG-h$1" cat /sys/class/net/eth0/statistics/tx_bytes; }

cluster_launch() {
  local bin=$1 local_n=$2 order=$3 port=$4 log=$5 i rc=0 pids=()
  shift 5
  for ((i = 0; i < CLUSTER_HOSTS; i++)); do
    cluster_exec $i "$bin/launch" --nnodes "$CLUSTER_HOSTS" --node-rank $i --master-addr "$(cluster_addr 0)" \
      --master-port "$port" -n "$local_n" --rank-order "$order" --no-prefix "$@" >"$log.h$i" 2>&1 &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || rc=1; done
  return $rc
}

cluster_mpirun() {
  local slots=$1 i hostfile=/tmp/$CLUSTER_TAG.hostfile net=10.$CLUSTER_NET.0.0/16
  shift
  for ((i = 0; i < CLUSTER_HOSTS; i++)); do echo "$(cluster_addr $i) slots=$slots"; done >"$hostfile"
  # pml ob1: the BTLs below, not UCX's own transports. Ranks of one host share memory
  # (vader), as on real hosts; ranks of different hosts have different orteds, so Open MPI
  # never uses vader between them. mpirun gets host 0's namespace name as its hostname, as
  # the agent gives every orted its own (see there why).
  CLUSTER_TAG=$CLUSTER_TAG OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    ip netns exec "$CLUSTER_TAG-h0" unshare --uts /bin/sh -c 'hostname "$0" && exec "$@"' "$CLUSTER_TAG-h0" \
    "${MPIRUN:-mpirun}" --hostfile "$hostfile" --mca plm_rsh_agent "$CLUSTER_BENCH_DIR/cluster_mpi_agent.sh" \
    --mca oob_tcp_if_include "$net" --mca btl_tcp_if_include "$net" --mca pml ob1 --mca btl tcp,vader,self \
    --oversubscribe --bind-to none "$@"
}

cluster_down() {
  [[ -n ${CLUSTER_TAG:-} ]] || return 0
  local ns
  for ns in $(ip netns list | awk '{print $1}' | grep "^$CLUSTER_TAG-"); do ip netns del "$ns" 2>/dev/null; done
  rm -f "/tmp/$CLUSTER_TAG.hostfile"
  CLUSTER_TAG=
}
