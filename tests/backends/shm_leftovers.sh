#!/usr/bin/env bash
# Shared memory of the tcp backend at 32 ranks on one host, in a private /dev/shm of 64 MiB
# (a default container's) made in a mount namespace, so other jobs on the machine neither
# disturb nor see it (backends/tcp/shm_channel.h, comm/net/shm_names.h):
#   bound  - a 32-rank job runs all its pairs and its arena over shared memory (no "no
#            shared memory" fallback) with a peak /dev/shm use under 40 MiB: one inbox per
#            rank whose rings take pages only when a pair talks. (Pair rings of 2 MiB
#            made up front need 992 MiB here.)
#   rank   - one rank SIGKILLed at a random moment (during setup or the collectives), 4
#            times (RANK_KILLS): once launch returns, /dev/shm holds nothing of the job.
#   job    - every process of the job, launch included, SIGKILLed at a random moment, 2
#            times (JOB_KILLS): `launch --cleanup-shm` then leaves nothing.
# The moments alternate between start-up (50-700 ms) and the collectives (700-2500 ms for a
# rank, 300-1500 ms for the job). The CTest runs the defaults; the 20-times run of issue 58:
#   RANK_KILLS=20 JOB_KILLS=20 tests/backends/shm_leftovers.sh build/bin/launch build/bin/comm_bench
# Exit 77 (SKIP) when a mount namespace cannot be made (not root, no unshare).
# Usage: shm_leftovers.sh LAUNCH COMM_BENCH
set -u
launch=$1 bench=$2
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
if [[ -z "${SHM_LEFTOVERS_INSIDE:-}" ]]; then
  command -v unshare >/dev/null || skip "no unshare(1)"
  unshare -m true 2>/dev/null || skip "cannot create a mount namespace (not root?)"
  exec env SHM_LEFTOVERS_INSIDE=1 unshare -m bash -c 'mount -t tmpfs -o size=64M tmpfs /dev/shm && exec bash "$0" "$@"' \
    "$0" "$@"
fi
export COMM_RENDEZVOUS_TIMEOUT_S=20
ranks=32
left() { ls /dev/shm | grep -c '^dpt-'; }
used_kib() { df -k --output=used /dev/shm | tail -1; }
# exec: $! is then launch itself, whose children are the ranks.
run_job() { exec "$launch" -n $ranks --grace-s 1 "$bench" --backend tcp "$@"; }

# --- bound
peak=0
run_job -b 4K -e 1M -f 4 -n 20 -w 2 >/tmp/shm_leftovers.$$ 2>&1 &
job=$!
while kill -0 $job 2>/dev/null; do
  u=$(used_kib); ((u > peak)) && peak=$u
  sleep 0.02
done
wait $job
rc=$?
echo "== bound: exit $rc, peak /dev/shm use $((peak / 1024)) MiB with $ranks ranks"
grep -q "Out of bounds values : 0 OK" /tmp/shm_leftovers.$$ || { tail -20 /tmp/shm_leftovers.$$; fail "the job failed"; }
if grep -m3 "no shared memory\|cannot map\|no shared-memory collective arena" /tmp/shm_leftovers.$$; then
  fail "shared memory did not fit a 64 MiB /dev/shm"
fi
rm -f /tmp/shm_leftovers.$$
((peak < 40 * 1024)) || fail "peak /dev/shm use $((peak / 1024)) MiB at $ranks ranks, over 40 MiB"
[[ $(left) -eq 0 ]] || fail "a clean run left $(left) objects"

# Milliseconds: a random moment in [lo, hi).
moment() { echo "$(($1 + RANDOM % ($2 - $1)))"; }
sleep_ms() { sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"; }

rank_kills=${RANK_KILLS:-4} job_kills=${JOB_KILLS:-2}
[[ $rank_kills =~ ^[0-9]+$ && $job_kills =~ ^[0-9]+$ ]] || fail "RANK_KILLS and JOB_KILLS must be counts"
rank_windows=("50 700" "50 700" "700 2500" "700 2500") job_windows=("50 700" "300 1500")

# --- rank: one random rank SIGKILLed at a random moment
for ((k = 0; k < rank_kills; ++k)); do
  at=$(moment ${rank_windows[k % 4]})
  run_job -b 4K -e 1M -f 4 -n 200 -w 2 >/dev/null 2>&1 &
  job=$!
  sleep_ms "$at"
  mapfile -t pids < <(pgrep -P $job)
  victim=${pids[RANDOM % ${#pids[@]}]:-}
  [[ -n "$victim" ]] && kill -9 "$victim"
  wait $job
  echo "== rank: pid $victim of ${#pids[@]} SIGKILLed at $at ms: launch exit $?, $(left) objects left"
  [[ $(left) -eq 0 ]] || { ls /dev/shm | head; fail "$(left) objects left after a rank was SIGKILLed at $at ms"; }
done

# --- job: launch and every rank SIGKILLed at once
for ((k = 0; k < job_kills; ++k)); do
  at=$(moment ${job_windows[k % 2]})
  run_job -b 4K -e 1M -f 4 -n 200 -w 2 >/dev/null 2>&1 &
  job=$!
  sleep_ms "$at"
  mapfile -t pids < <(pgrep -P $job)
  kill -9 $job "${pids[@]}" 2>/dev/null
  wait $job 2>/dev/null
  sleep 0.2  # the kernel finishes tearing the processes down
  before=$(left)
  "$launch" --cleanup-shm
  echo "== job: launch and ${#pids[@]} ranks SIGKILLed at $at ms: $before objects left, $(left) after --cleanup-shm"
  [[ $(left) -eq 0 ]] || { ls /dev/shm | head; fail "$(left) objects left after launch --cleanup-shm"; }
done
echo "PASS: bounded, and nothing left behind ($rank_kills rank kills, $job_kills job kills)"
