#!/bin/bash
# The straggler watch (train/straggler_watch.h) on 2 ranks, each bound to its own core
# (launch --bind cores), training the CNN (steps of about 15 ms: a step of the tiny MLP is
# too short to compare): a clean run names nobody; with rank 1 slowed (slow_rank1.sh: a
# CPU limit of 20% of a core, else a busy loop beside it), rank 1 is named within 20 steps
# with a ratio >= 1.5.
#   straggler.sh BIN_DIR
set -euo pipefail
bin=$1
here=$(cd "$(dirname "$0")" && pwd)
(( $(nproc) >= 2 )) || { echo "SKIP: needs 2 CPUs (one per rank), this process has $(nproc)"; exit 77; }
source "$here/slow_rank1.sh"
tmp=$(mktemp -d)
trap 'slow_rank1_release; rm -rf "$tmp"' EXIT
train=("$bin/launch" -n 2 --bind cores "$bin/train" --model cnn --log-every 40)

"${train[@]}" --steps 120 > "$tmp/clean.log" 2>&1 || { cat "$tmp/clean.log"; exit 1; }
if grep -q 'straggler:' "$tmp/clean.log"; then grep 'straggler:' "$tmp/clean.log"; echo "FAIL: a straggler named in a clean run"; exit 1; fi
grep -q 'straggler_rank=-1 ' "$tmp/clean.log" || { echo "FAIL: the clean run's final line names a straggler"; exit 1; }

slow_rank1_prepare "$bin"
echo "rank 1 slowed by: $slow_how"
rc=0
slow_rank1_run "$tmp/slowed.log" "${train[@]}" --steps 40 || rc=$?  # named within 20 steps: 40 are enough
[[ $rc == 0 ]] || { cat "$tmp/slowed.log"; echo "FAIL: the slowed run exited $rc"; exit 1; }
line=$(grep -m1 'straggler: rank' "$tmp/slowed.log" || true)
echo "slowed: ${line#*] }"
[[ $line =~ straggler:\ rank\ 1\ computes\ ([0-9.]+)x.*since\ step\ ([0-9]+)\) ]] || { echo "FAIL: rank 1 not named"; exit 1; }
ratio=${BASH_REMATCH[1]} since=${BASH_REMATCH[2]}
awk -v r="$ratio" -v s="$since" 'BEGIN { exit !(r >= 1.5 && s + 8 <= 20) }' || {
  echo "FAIL: named at ratio $ratio after step $((since + 8)) (>= 1.5 within 20 steps expected)"; exit 1; }
echo "clean run: no straggler; slowed rank 1 named at ${ratio}x after step $((since + 8))"
