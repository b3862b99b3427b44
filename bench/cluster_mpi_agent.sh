#!/usr/bin/env bash
# Open MPI's remote-shell agent for the emulated cluster (bench/cluster.sh): where ssh
# would log in to HOST, this runs the command inside HOST's network namespace. mpirun
# (plm_rsh) calls it as `cluster_mpi_agent.sh HOST COMMAND...`, HOST being a line of the
# hostfile that cluster_mpirun writes: the address of the cluster's host I,
# 10.<net>.0.<I+1>, so Open MPI never has to resolve a name. CLUSTER_TAG comes from
# cluster_mpirun's environment.
# The command also gets a UTS namespace whose hostname is the namespace's name: all
# namespaces share the machine's hostname otherwise, and Open MPI names per-host files by
# it (shared-memory segments /dev/shm/vader_segment.<hostname>.<uid>.<job>.<local rank>,
# the session directory with the hwloc topology), so ranks of different hosts would
# share them and orted crashes or mixes up another host's memory.
set -u
host=${1:?usage: cluster_mpi_agent.sh HOST COMMAND... (the plm_rsh agent of Open MPI)}
shift
[[ -n ${CLUSTER_TAG:-} ]] || {
  echo "cluster_mpi_agent: CLUSTER_TAG is not set; start mpirun with cluster_mpirun (bench/cluster.sh)" >&2
  exit 1
}
ns=$CLUSTER_TAG-h$((${host##*.} - 1))
ip -n "$ns" -4 -o addr show dev eth0 2>/dev/null | grep -q " $host/" || {
  echo "cluster_mpi_agent: $host is not the address of a host of cluster $CLUSTER_TAG (no $ns with it)" >&2
  exit 1
}
# Open MPI passes one shell command split in words, as ssh would: join and run it.
exec ip netns exec "$ns" unshare --uts /bin/sh -c 'hostname "$0" && exec /bin/sh -c "$1"' "$ns" "$*"
