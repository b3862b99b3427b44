#!/usr/bin/env bash
# A rank that leaves before anyone connected to it on demand (backends/tcp/connector.h)
# is still found dead: its lower ring neighbour's dial is refused, the communicator fails
# naming it, and abort frames carry the failure round the ring, so every survivor fails
# within seconds, not at COMM_TIMEOUT_S (60 s here).
#   tcp_dead_peer_on_demand.sh LAUNCH PROBE
# The 8 ranks are started here, one process each with the variables launch would give
# them, not under launch: launch stops every rank once one fails, which would end the
# survivors whether or not an abort frame reached them. Each survivor must fail by itself
# within 8 s of the start (the connect window is about 3 s, docs/tcp_engine.md): ranks 2
# and 4 (rank 3's ring neighbours: a refused dial, a probe of its listener) naming rank 3
# or aborted, and at least 4 of the 7 with "rank N failed its communicator" (an abort
# frame's text; a connection closed instead reads "connection closed by peer rank N").
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
work=$(mktemp -d)
trap 'rm -rf "$work" "$log"' EXIT
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
n=8 gone=3 token=$(od -An -tx1 -N32 /dev/urandom | tr -d " \n")
start=$(date +%s.%N)
for ((r = 0; r < n; ++r)); do
  (
    COMM_JOB_TOKEN=$token COMM_TCP_SHM=0 COMM_FAKE_HOSTS=$n COMM_TIMEOUT_S=60 COMM_RENDEZVOUS_TIMEOUT_S=30 RANK=$r WORLD_SIZE=$n \
      LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      timeout 40 "$probe" --algo ring --exit-rank $gone > "$work/$r.log" 2>&1
    echo "$? $(date +%s.%N)" > "$work/$r.end"
  ) &
done
wait
for ((r = 0; r < n; ++r)); do  # every rank's output first: a failure shows them all
  read -r rc end < "$work/$r.end"
  sed "s/^/[rank $r] /" "$work/$r.log" >> "$log"
  echo "[rank $r] exit $rc after $(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", b - a}') s" >> "$log"
done
aborted=0 own=""
for ((r = 0; r < n; ++r)); do
  read -r rc end < "$work/$r.end"
  took=$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", b - a}')
  if ((r == gone)); then
    [[ $rc -eq 0 ]] || fail "rank $gone, which leaves, exited $rc"
    continue
  fi
  [[ $rc -ne 0 ]] || fail "rank $r finished its allreduces without rank $gone"
  [[ $rc -ne 124 ]] || fail "rank $r was still waiting after 40 s (COMM_TIMEOUT_S is 60)"
  awk -v t="$took" 'BEGIN {exit !(t <= 8)}' || fail "rank $r took $took s to fail (expected within 8 s: connect window about 3 s)"
  if grep -qE "rank [0-9]+ failed its communicator" "$work/$r.log"; then
    aborted=$((aborted + 1))
  else
    own+=" $r"
  fi
done
# Ranks 2 and 4 find rank 3 gone themselves (a refused dial, a probe of its listener), or
# hear it from the other first.
for r in $((gone - 1)) $((gone + 1)); do
  grep -qE "peer rank $gone|rank [0-9]+ failed its communicator" "$work/$r.log" ||
    fail "rank $r, rank $gone's neighbour, neither names it nor got an abort frame"
done
# Everyone else hears it in an abort frame. One more rank may fail on its own: the one whose
# connection to a failing rank was still in its handshake when that rank exited (no frame
# can travel on it). An engine that closed its connections instead of sending the frame
# would leave every rank failing on its own ("connection closed by peer rank N").
((aborted >= n - 1 - 3)) ||
  fail "only $aborted of $((n - 1)) survivors got an abort frame ('rank N failed its communicator'); failed on their own:$own"
echo "ok: every survivor failed within 8 s; $aborted of $((n - 1)) by an abort frame, on their own:$own"
grep -E "exit [0-9]+ after" "$log" | tr '\n' ';' | cut -c1-400; echo
grep -m2 "peer rank $gone" "$log" | cut -c1-300
