#!/usr/bin/env bash
# A launcher whose rendezvous store is gone (chaos seed 3403: after the job finished,
# node 0's launcher, which serves the store, ended; node 1's launcher went on restarting
# a slot whose process could reach nothing, 49 restarts in 4 minutes, until killed).
# Here node 1's launcher is started with no node 0 at all (nothing serves the store's
# port) and --max-restarts 3: its process waits the rendezvous timeout (2 s), exits 69
# (kExitStoreUnreachable) naming the store, and the launcher ends without a restart.
#   elastic_store_gone.sh <bin dir>
set -uo pipefail
bin=$1
fail() { echo "FAIL: $*"; exit 1; }
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export COMM_RENDEZVOUS_TIMEOUT_S=2 OPENBLAS_NUM_THREADS=1
export COMM_JOB_TOKEN=$(od -An -tx1 -N32 /dev/urandom | tr -d " \n")
start=$(date +%s.%N)
out=$(timeout 60 "$bin/launch" --elastic -n 1:1 --max-restarts 3 --nnodes 2 --node-rank 1 --rdzv-host 127.0.0.1 \
      --master-port "$port" "$bin/train" --elastic --model mlp --steps 5 2>&1)
rc=$?
took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
echo "$out" | tail -n 5
[[ $rc != 0 && $rc != 124 ]] || fail "the launcher exited $rc (want a failure, not a timeout or success)"
grep -q "cannot reach the rendezvous store at 127.0.0.1:$port" <<< "$out" || fail "the process did not name the store it could not reach"
grep -q "not restarting slot 0: n1.l0.i0 could not reach the rendezvous store (exit 69)" <<< "$out" ||
  fail "the launcher did not say why it does not restart"
! grep -q "restarting slot 0 as" <<< "$out" || fail "the launcher restarted a slot whose store is gone"
echo "store gone: the process exited 69 naming it, the launcher ended without a restart (rc $rc, $took s)"
