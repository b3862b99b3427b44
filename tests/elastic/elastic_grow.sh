#!/usr/bin/env bash
# Elastic growth and the minimum:
#   * launch --elastic -n 2:4 --max-restarts 1, rank 1 killed in step 30: the survivors
#     go on at 3, the launcher restarts the slot, the new process joins at a step
#     boundary (generation with joined 1, world size 4), takes the members' state and the
#     run finishes at world size 4;
#   * -n 3:4 without restarts, ranks 1 and 2 killed in one step: the group would shrink
#     below 3, so the job ends with an error naming the lost ranks (and no hang).
#   elastic_grow.sh <bin dir>
set -euo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export COMM_TIMEOUT_S=20 COMM_RENDEZVOUS_TIMEOUT_S=30 OPENBLAS_NUM_THREADS=1
args=(--backend tcp --model mlp --optimizer adam --lr 1e-3 --lr-schedule constant --no-shuffle --batch-size 64
      --log-every 5 --max-eval-samples 64)
fail() { echo "FAIL: $*"; exit 1; }

"$bin/launch" --elastic -n 2:4 --max-restarts 1 "$bin/train" --elastic "${args[@]}" --steps 400 \
  --metrics-out "$work/grow.jsonl" --debug-signal 1:30:sync > "$work/grow.log" 2>&1 ||
  { tail -n 30 "$work/grow.log"; fail "grow: the job failed"; }
grep -q "restarting slot 1 as n0.l1.i1" "$work/grow.log" || fail "grow: the launcher did not restart slot 1"
awk '/"event":"membership"/ && /"joined":1/ { found = 1 } END { exit !found }' "$work/grow.jsonl" || { grep membership "$work/grow.jsonl"; fail "grow: nobody joined"; }
final=$(grep "final:" "$work/grow.log")
for want in "steps=400 " "world_size=4 " "recoveries=1 " "lost_steps=0"; do
  grep -q -- "$want" <<< "$final" || { echo "$final"; fail "grow: the final line lacks '$want'"; }
done
grep -E "elastic: generation" "$work/grow.log" | sed 's/^/  /'
echo "grow: rank 1 killed, 3 went on, the restarted process joined, finished at world size 4"

if "$bin/launch" --elastic -n 3:4 "$bin/train" --elastic "${args[@]}" --steps 400 \
     --debug-signal "1:20:backward,2:20:backward" > "$work/min.log" 2>&1; then
  fail "min: the job went on below its minimum"
fi
grep -q "below the minimum of 3; lost: \[n0.l1.i0, n0.l2.i0\]" "$work/min.log" ||
  { tail -n 20 "$work/min.log"; fail "min: no error naming the lost ranks"; }
grep -q "launch: job failed" "$work/min.log" || fail "min: launch did not report the failure"
echo "min: two of 4 killed with minimum 3: every survivor stopped with the lost ranks named"
