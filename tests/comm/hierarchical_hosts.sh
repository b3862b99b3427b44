#!/usr/bin/env bash
# The hierarchical algorithms across real (emulated) hosts: 3 network namespaces x 2
# ranks on a bridge (bench/cluster.sh), ranks numbered round robin over the hosts
# (launch --rank-order cyclic), no COMM_FAKE_HOSTS: the hosts come from the namespaces.
#   1. allreduce (float sum, int32 max, bfloat16 avg), reduce_scatter (float sum, int32
#      max), allgather and broadcast with --algo hierarchical, sizes 4 B..4 MiB, every
#      element checked exactly (comm_bench -c 1);
#   2. bytes each host sent for 4 allreduces, reduce-scatters and allgathers of N = 4 MiB
#      (the whole buffer): hierarchical within 0.95-1.2 of its formula, 2 (H-1)/H x N for
#      allreduce and (H-1)/H x N for the others (so the host groups were found: with the
#      flat ring the same runs send L x (P-1)/P times as much, 2.5x), and the flat
#      ring's at least 2x hierarchical's.
# Needs root for the namespaces: exits 77 (skipped) with the reason otherwise.
#   hierarchical_hosts.sh BUILD_BIN
set -uo pipefail
bin=$1
source "$(dirname "$0")/../../bench/cluster.sh"
fail() { echo "FAIL: $*"; exit 1; }
export COMM_JOB_TOKEN=hierarchical-hosts-test-$$-secret COMM_RENDEZVOUS_TIMEOUT_S=30 COMM_TIMEOUT_S=60
cluster_up 3 "" || { rc=$?; ((rc == 77)) && echo "SKIP: emulated hosts unavailable"; exit $rc; }
work=$(mktemp -d /tmp/hier_hosts.XXXXXX)
port=$((21000 + $$ % 20000))
for args in "--coll allreduce -d float -o sum" "--coll allreduce -d int32 -o max" "--coll allreduce -d bfloat16 -o avg" \
            "--coll reduce_scatter -d float -o sum" "--coll reduce_scatter -d int32 -o max" "--coll allgather -d float" \
            "--coll broadcast -d float -r 3"; do
  port=$((port + 1))
  cluster_launch "$bin" 2 cyclic $port "$work/c" "$bin/comm_bench" --backend tcp --algo hierarchical -b 4 -e 4M -f 8 \
    -n 2 -w 1 -c 1 $args || { tail -5 "$work"/c.h*; fail "hierarchical $args: wrong result or failure"; }
  echo "ok: hierarchical $args, 4 B..4 MiB exact on 3 hosts x 2 ranks (cyclic numbering)"
done
sent() {  # ALGO COLL -> bytes each host sent for 4 COLLs of 4 MiB (3 timed + 1 warm-up)
  local before=() i
  for i in 0 1 2; do before[i]=$(cluster_tx_bytes $i); done
  port=$((port + 1))
  cluster_launch "$bin" 2 cyclic $port "$work/b" "$bin/comm_bench" --backend tcp --algo "$1" --coll "$2" -b 4M -e 4M -n 3 -w 1 -c 0 ||
    fail "$1 $2 bytes run"
  for i in 0 1 2; do echo $(($(cluster_tx_bytes $i) - before[i])); done
}
n=$((4 << 20))
for coll in allreduce reduce_scatter allgather; do
  passes=1; [[ $coll == allreduce ]] && passes=2  # reduce-scatter then allgather
  want=$((4 * passes * 2 * n / 3))  # 4 ops x passes x (H-1)/H x N, H = 3
  hier=($(sent hierarchical $coll))
  ring=($(sent ring $coll))
  for i in 0 1 2; do
    echo "$coll host $i: hierarchical sent ${hier[i]} bytes (formula $want), ring ${ring[i]}"
    awk -v s=${hier[i]} -v w=$want 'BEGIN{exit !(s >= 0.95 * w && s <= 1.2 * w)}' ||
      fail "$coll host $i: hierarchical sent ${hier[i]} bytes, formula $want (0.95-1.2x)"
    awk -v r=${ring[i]} -v h=${hier[i]} 'BEGIN{exit !(r >= 2 * h)}' ||
      fail "$coll host $i: the flat ring sent ${ring[i]}, not 2x hierarchical's ${hier[i]}"
  done
done
rm -rf "$work"
echo "PASS"
