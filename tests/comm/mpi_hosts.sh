#!/usr/bin/env bash
# Open MPI across emulated hosts: mpirun starts 3 network namespaces x 2 ranks
# (bench/cluster.sh's cluster_mpirun, orted in each namespace through
# bench/cluster_mpi_agent.sh), and
#   1. every rank runs in the namespace its mapping puts it in (--map-by node: rank r on
#      host r mod 3; --map-by slot: host r / 2): a wrapper prints the rank's network
#      namespace, hostname and eth0 address before it starts comm_bench;
#   2. Open MPI's own collectives (--backend mpi --algo native: allreduce float sum,
#      reduce_scatter int32 max, allgather, broadcast; 4 B..1 MiB) and our hierarchical
#      allreduce on the mpi backend (4 MiB) give exact results (comm_bench -c 1);
#   3. the bytes went over the links: for 5 native allreduces of N = 4 MiB every host
#      sent at least 5 N (the others learn its whole input only from what it sends), and
#      for 5 of our hierarchical ones 0.95-1.2x its formula 5 x 2 (H-1)/H x N (so the mpi
#      backend also found the 3 hosts from the namespaces).
# Needs root for the namespaces: exits 77 (skipped) with the reason otherwise.
#   mpi_hosts.sh BUILD_BIN MPIEXEC
set -uo pipefail
bin=$1
export MPIRUN=$2
source "$(dirname "$0")/../../bench/cluster.sh"
fail() { echo "FAIL: $*"; exit 1; }
for tool in unshare hostname; do
  command -v $tool >/dev/null || { echo "SKIP: no $tool(1) to give each host its hostname"; exit 77; }
done
export COMM_TIMEOUT_S=60
cluster_up 3 "" || { rc=$?; ((rc == 77)) && echo "SKIP: emulated hosts unavailable"; exit $rc; }
work=$(mktemp -d /tmp/mpi_hosts.XXXXXX)
H=3
for ((i = 0; i < H; i++)); do netns[i]=$(cluster_exec $i readlink /proc/self/ns/net); done

# mpi_job LOG ARGS...: comm_bench ARGS on 6 ranks under cluster_mpirun, each rank first
# printing "where RANK NETNS HOSTNAME ADDRESS"; the job ends within 60 s.
mpi_job() {
  local log=$1
  shift
  cluster_mpirun 2 -n 6 --timeout 60 "$@" >"$log" 2>&1
}
where='echo "where $OMPI_COMM_WORLD_RANK $(readlink /proc/self/ns/net) $(hostname) $(ip -4 -o addr show dev eth0 | awk "{print \$4}")"; exec "$@"'

# Every collective with --map-by node; the block placement with one (a job takes 1-6 s
# on 2 loaded cores).
for map in node slot; do
  colls=("--coll allreduce -d float -o sum")
  [[ $map == node ]] && colls+=("--coll reduce_scatter -d int32 -o max" "--coll allgather -d float" "--coll broadcast -d float -r 3")
  for args in "${colls[@]}"; do
    mpi_job "$work/run" --map-by $map /bin/sh -c "$where" sh "$bin/comm_bench" --backend mpi --algo native \
      -b 4 -e 1M -f 8 -n 2 -w 1 -c 1 $args || { tail -20 "$work/run"; fail "native $args, --map-by $map: mpirun failed"; }
    [[ $(grep -c '^where ' "$work/run") == 6 ]] || { cat "$work/run"; fail "--map-by $map: not 6 ranks reported"; }
    while read -r _ rank ns name addr; do
      if [[ $map == node ]]; then h=$((rank % H)); else h=$((rank / 2)); fi
      [[ $ns == "${netns[h]}" && $addr == "$(cluster_addr $h)/16" && $name == "$CLUSTER_TAG-h$h" ]] ||
        fail "--map-by $map: rank $rank ran in $ns ($name, $addr), not host $h's ${netns[h]} ($CLUSTER_TAG-h$h, $(cluster_addr $h))"
    done < <(grep '^where ' "$work/run")
    read -r rows exact < <(awk '/^ *[0-9]/ {n++; e += ($9 == 0)} END {print n + 0, e + 0}' "$work/run")
    ((rows >= 6 && exact == rows)) || { cat "$work/run"; fail "native $args, --map-by $map: $exact of $rows sizes exact"; }
  done
  echo "ok: --map-by $map, every rank on its host; native $(for a in "${colls[@]}"; do set -- $a; printf '%s ' $2; done)exact"
done

sent() {  # ALGO -> bytes each host sent for 5 allreduces of 4 MiB (3 timed, 1 warm-up, 1 checked)
  local before=() i
  for ((i = 0; i < H; i++)); do before[i]=$(cluster_tx_bytes $i); done
  mpi_job "$work/b" --map-by node "$bin/comm_bench" --backend mpi --algo "$1" -b 4M -e 4M -n 3 -w 1 -c 1 ||
    { tail -20 "$work/b" >&2; fail "$1 allreduce of 4 MiB: failed or inexact" >&2; }
  for ((i = 0; i < H; i++)); do echo $(($(cluster_tx_bytes $i) - before[i])); done
}
n=$((4 << 20))
native=($(sent native)) || exit 1
hier=($(sent hierarchical)) || exit 1
echo "ok: native and our hierarchical allreduce (mpi backend) of 4 MiB exact"
want=$((5 * 2 * (H - 1) * n / H))
for ((i = 0; i < H; i++)); do
  echo "host $i: native sent ${native[i]} bytes (at least $((5 * n))), hierarchical ${hier[i]} (formula $want)"
  ((native[i] >= 5 * n)) || fail "host $i: Open MPI's allreduce sent ${native[i]} bytes over its link, less than $((5 * n))"
  awk -v s=${hier[i]} -v w=$want 'BEGIN{exit !(s >= 0.95 * w && s <= 1.2 * w)}' ||
    fail "host $i: hierarchical sent ${hier[i]} bytes, formula $want (0.95-1.2x)"
done
rm -rf "$work"
echo "PASS"
