#!/usr/bin/env bash
# A /dev/shm too small for the tcp backend's shared memory (a default container has
# 64 MiB): in a private mount namespace with a tiny tmpfs on /dev/shm, a 2-rank job must
# still run and give correct results, saying what it fell back to, never die of SIGBUS.
#   8 KiB:  not even the rings' headers fit          -> "no shared memory with rank 1 ... using TCP"
#   1 MiB:  the rings shrink to fit, the arena does not -> "no shared-memory collective arena ..."
#   (backends/tcp/shm_channel.h, "ring size": rings are sized to what /dev/shm has free)
# Exit 77 (SKIP) when a mount namespace cannot be made (not root, no unshare).
# Usage: fault_small_dev_shm.sh LAUNCH COMM_BENCH
set -u
launch=$1 bench=$2
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
command -v unshare >/dev/null || skip "no unshare(1)"
unshare -m true 2>/dev/null || skip "cannot create a mount namespace (not root?)"
check() { local size=$1 expect=$2 out
  out=$(unshare -m sh -c "mount -t tmpfs -o size=$size tmpfs /dev/shm && \
        exec \"$launch\" -n 2 \"$bench\" --backend tcp -b 4K -e 4M -f 16 -n 3 -w 1 -c 1" 2>&1)
  local rc=$?
  echo "== /dev/shm of $size: exit $rc"
  echo "$out" | grep -v '^\[rank [01]\] *[0-9]'
  [[ $rc -eq 0 ]] || fail "the job failed with /dev/shm of $size"
  grep -q "Out of bounds values : 0 OK" <<<"$out" || fail "wrong results with /dev/shm of $size"
  grep -q "$expect" <<<"$out" || fail "no '$expect' warning with /dev/shm of $size"
}
check 8k "no shared memory with rank 1 .*is /dev/shm full or too small"
check 1M "no shared-memory collective arena .*is /dev/shm full or too small"
echo "PASS: both fall-backs ran with correct results"
