#!/bin/bash
# The straggler watch (train/straggler_watch.h) on 2 ranks, each bound to its own core
# (launch --bind cores), training the CNN (steps of about 15 ms: a step of the tiny MLP is
# too short to compare): a clean run names nobody; with a busy loop pinned beside rank 1
# (it gets about half of its core), rank 1 is named within 20 steps with a ratio >= 1.5.
#   straggler.sh BIN_DIR
set -euo pipefail
bin=$1
(( $(nproc) >= 2 )) || { echo "SKIP: needs 2 CPUs (one per rank), this process has $(nproc)"; exit 77; }
tmp=$(mktemp -d)
busy=
trap '[[ -n $busy ]] && kill $busy 2>/dev/null; rm -rf "$tmp"' EXIT
run() { "$bin/launch" -n 2 --bind cores "$bin/train" --model cnn --steps 120 --log-every 40 > "$tmp/$1.log" 2>&1 || { cat "$tmp/$1.log"; exit 1; }; }

run clean
if grep -q 'straggler:' "$tmp/clean.log"; then grep 'straggler:' "$tmp/clean.log"; echo "FAIL: a straggler named in a clean run"; exit 1; fi
grep -q 'straggler_rank=-1 ' "$tmp/clean.log" || { echo "FAIL: the clean run's final line names a straggler"; exit 1; }

cpu1=$(sed -n 's/.*rank 1: CPU \([0-9]*\).*/\1/p' "$tmp/clean.log" | head -1)
[[ -n $cpu1 ]] || { echo "FAIL: launch did not say rank 1's CPU"; cat "$tmp/clean.log"; exit 1; }
taskset -c "$cpu1" sh -c 'while :; do :; done' &
busy=$!
run slowed
kill $busy; busy=
line=$(grep -m1 'straggler: rank' "$tmp/slowed.log" || true)
echo "slowed: ${line#*] }"
[[ $line =~ straggler:\ rank\ 1\ computes\ ([0-9.]+)x.*since\ step\ ([0-9]+)\) ]] || { echo "FAIL: rank 1 not named"; exit 1; }
ratio=${BASH_REMATCH[1]} since=${BASH_REMATCH[2]}
awk -v r="$ratio" -v s="$since" 'BEGIN { exit !(r >= 1.5 && s + 8 <= 20) }' || {
  echo "FAIL: named at ratio $ratio after step $((since + 8)) (>= 1.5 within 20 steps expected)"; exit 1; }
echo "clean run: no straggler; slowed rank 1 named at ${ratio}x after step $((since + 8))"
