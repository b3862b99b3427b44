#!/usr/bin/env bash
# Several hosts: two network namespaces ("hosts" A and B, unique names per run) joined by
# a veth pair that exists only inside them (10.231.X.1 and .2), a 2-rank tcp job across
# them: demo (both ranks print a checked allreduce) and a few training steps. The shm
# transport must not pair the ranks (namespaces share /dev/shm and the boot id but are
# separate hosts): both must report 0 peers over shared memory with COMM_TCP_SHM left on.
# Then the link is cut mid-run: both ranks must fail naming the unreachable peer.
# Exit 77 (SKIP) when namespaces cannot be made (not root, no CAP_NET_ADMIN, no `ip`).
# Usage: fault_netns_hosts.sh DEMO TRAIN RELIABILITY_HELPER
set -u
demo=$1 train=$2 helper=$3
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
source "$(dirname "$0")/../support/two_hosts.sh"
port=29500
work=$(mktemp -d)
cleanup() { delete_two_hosts; rm -rf "$work"; }
trap cleanup EXIT
two_hosts dpt 10.231

token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
# on NS RANK IFNAME CMD...: one rank in its own namespace; the secret goes by environment.
# COMM_TCP_SHM=1: shared memory allowed, so the same-host decision is what is tested.
on() { local ns=$1 rank=$2 ifname=$3; shift 3
  ip netns exec "$ns" env RANK="$rank" WORLD_SIZE=2 MASTER_ADDR="$net.1" MASTER_PORT=$port \
    COMM_JOB_TOKEN="$token" COMM_TCP_IFNAME="$ifname" COMM_TCP_SHM=1 COMM_LOG_LEVEL=debug "$@"; }
pair() {  # pair NAME CMD...: both ranks, logs in $work/NAME.{0,1}; fails unless both exit 0
  local name=$1; shift
  on "$a" 0 "$va" "$@" >"$work/$name.0" 2>&1 & local p0=$!
  on "$b" 1 "$vb" "$@" >"$work/$name.1" 2>&1 & local p1=$!
  local rc=0; wait $p0 || rc=1; wait $p1 || rc=1
  if ((rc)); then tail -n 15 "$work/$name".*; fail "$name across the namespaces failed"; fi
}

pair demo "$demo" --backend tcp
for r in 0 1; do
  grep -q "rank $r/2 backend=tcp.*: correct" "$work/demo.$r" || { cat "$work/demo.$r"; fail "rank $r: no correct result"; }
  grep -q "0 of 1 peers over shared memory" "$work/demo.$r" ||
    { cat "$work/demo.$r"; fail "rank $r: the ranks in different namespaces were paired over shared memory"; }
done
grep -q "listening on $net.1" "$work/demo.0" || { cat "$work/demo.0"; fail "rank 0 does not listen on its veth address"; }

pair train "$train" --backend tcp --model mlp --steps 20 --log-every 10 --max-eval-samples 256
grep -h "final:.*steps=20 " "$work/train.0" || { tail "$work/train.0"; fail "no final line from the training run"; }

# Cut the link in the middle of a long collective loop: both ranks must end non-zero
# within the timeout, each naming the other.
COMM_TIMEOUT_S=5 on "$a" 0 "$va" "$helper" --backend tcp --iters 100000000 --count 1024 >"$work/cut.0" 2>&1 & p0=$!
COMM_TIMEOUT_S=5 on "$b" 1 "$vb" "$helper" --backend tcp --iters 100000000 --count 1024 >"$work/cut.1" 2>&1 & p1=$!
sleep 2
ip -n "$b" link set "$vb" down
cut=$(date +%s%N)
timeout 30 tail --pid=$p0 -f /dev/null; timeout 30 tail --pid=$p1 -f /dev/null
end=$(date +%s%N)
kill -KILL $p0 $p1 2>/dev/null
wait $p0; rc0=$?; wait $p1; rc1=$?
secs=$(awk -v a="$cut" -v b="$end" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
for r in 0 1; do grep -iE "error|fail|timeout" "$work/cut.$r" | tail -n 2 | sed "s/^/  rank $r | /"; done
((rc0 != 0 && rc1 != 0)) || { tail "$work"/cut.*; fail "after the cut: exit codes $rc0 and $rc1 (both must fail)"; }
awk -v s="$secs" 'BEGIN { exit !(s < 10) }' || fail "the ranks did not end within 10 s of the cut (timeout 5 s)"
# The error line (after the "[rank r/2 tcp]" prefix) must name the other rank.
for r in 0 1; do
  grep -iE "timed out|failed|error" "$work/cut.$r" | sed 's/\[rank [0-9]*\/2 tcp\]//' | grep -qE "(peer|rank)s? \[?$((1 - r))\b" ||
    { tail "$work/cut.$r"; fail "rank $r's error does not name rank $((1 - r))"; }
done
echo "several hosts: demo and 20 training steps across 2 namespaces over tcp, no shm pairing;" \
     "link cut -> both ranks failed naming the other after $secs s (COMM_TIMEOUT_S=5)"
echo ok
