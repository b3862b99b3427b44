#!/usr/bin/env bash
# A rank that leaves before anyone connected to it on demand (backends/tcp/connector.h)
# is still found dead: its lower ring neighbour's dial is refused, the communicator fails
# naming it, and abort frames carry the failure round the ring, so every survivor fails
# within seconds, not at COMM_TIMEOUT_S (60 s here).
#   tcp_dead_peer_on_demand.sh LAUNCH PROBE
set -uo pipefail
launch=$1 probe=$2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
COMM_TCP_SHM=0 COMM_FAKE_HOSTS=8 COMM_TIMEOUT_S=60 COMM_RENDEZVOUS_TIMEOUT_S=30 \
  timeout 120 "$launch" -n 8 "$probe" --algo ring --exit-rank 3 >"$log" 2>&1
rc=$?
took=$(($(date +%s) - start))
fail() { echo "FAIL: $*"; cat "$log"; exit 1; }
[[ $rc -ne 0 ]] || fail "the job succeeded although rank 3 left"
[[ $took -le 20 ]] || fail "the survivors took ${took} s to fail (expected well under COMM_TIMEOUT_S=60)"
grep -q "peer rank 3" "$log" || fail "no error names the departed rank 3"
ok=$(grep -c " probe rank " "$log" || true)
[[ $ok -eq 0 ]] || fail "$ok rank(s) finished their allreduces without rank 3"
echo "ok: job failed (rc $rc) in ${took} s, naming rank 3"
grep -m2 "peer rank 3" "$log" | cut -c1-300
