#!/usr/bin/env bash
# A rank that leaves before anyone connected to it on demand (backends/tcp/connector.h)
# is still found dead: its lower ring neighbour's dial is refused, the communicator fails
# naming it, and abort frames carry the failure round the ring, so every survivor fails
# within seconds, not at COMM_TIMEOUT_S (60 s here).
#   tcp_dead_peer_on_demand.sh LAUNCH PROBE
# With "higher-waits" as a third argument: 3 ranks, rank 1 leaves, rank 2 alone waits
# for it (a receive; rank 1 would dial rank 2, nobody dials rank 1) and rank 0 waits for
# rank 2: only rank 2's probe of rank 1's listener (connector.h, "watch") can find it
# gone, within seconds, where it used to wait out COMM_TIMEOUT_S (30 s here).
set -uo pipefail
launch=$1 probe=$2 mode=${3:-ring}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fail() { echo "FAIL: $*"; cat "$log"; exit 1; }
if [[ $mode == higher-waits ]]; then
  start=$(date +%s)
  COMM_TCP_SHM=0 COMM_FAKE_HOSTS=3 COMM_TIMEOUT_S=30 COMM_RENDEZVOUS_TIMEOUT_S=30 \
    timeout 120 "$launch" -n 3 "$probe" --exit-rank 1 --only-higher-waits >"$log" 2>&1
  rc=$? took=$(($(date +%s) - start))
  [[ $rc -ne 0 ]] || fail "the job succeeded although rank 1 left"
  [[ $took -le 12 ]] || fail "rank 2 took ${took} s to fail (expected a few seconds, well under COMM_TIMEOUT_S=30)"
  grep -q "^\[rank 2\] .*peer rank 1: it never dialed this rank, and its listener at .* has refused connections" "$log" ||
    fail "rank 2's error does not say that rank 1's listener refuses connections"
  echo "ok: job failed (rc $rc) in ${took} s, rank 2 naming rank 1"
  grep -m1 "^\[rank 2\].*recv (peer 1)" "$log" | cut -c1-300
  exit 0
fi
start=$(date +%s)
COMM_TCP_SHM=0 COMM_FAKE_HOSTS=8 COMM_TIMEOUT_S=60 COMM_RENDEZVOUS_TIMEOUT_S=30 \
  timeout 120 "$launch" -n 8 "$probe" --algo ring --exit-rank 3 >"$log" 2>&1
rc=$?
took=$(($(date +%s) - start))
[[ $rc -ne 0 ]] || fail "the job succeeded although rank 3 left"
[[ $took -le 20 ]] || fail "the survivors took ${took} s to fail (expected well under COMM_TIMEOUT_S=60)"
grep -q "peer rank 3" "$log" || fail "no error names the departed rank 3"
ok=$(grep -c " probe rank " "$log" || true)
[[ $ok -eq 0 ]] || fail "$ok rank(s) finished their allreduces without rank 3"
echo "ok: job failed (rc $rc) in ${took} s, naming rank 3"
grep -m2 "peer rank 3" "$log" | cut -c1-300
