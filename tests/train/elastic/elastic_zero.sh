#!/usr/bin/env bash
# Elastic ZeRO: 4 ranks under launch --elastic with neighbour snapshots every K=5 steps.
#   * stages 1, 2 and 3, one rank SIGKILLed at a random point of a random step: the 3
#     survivors assemble the state of the last snapshot from their own and neighbour
#     copies and go on: steps=N world_size=3 recoveries=1 lost_steps <= K, and the final
#     parameters equal, bit for bit, a 3-rank run resumed from a checkpoint of that step;
#   * two adjacent ranks killed in one step (ZeRO-2; both stop themselves in step 23's
#     backward and are then SIGKILLed together, so neither can outlive the other into a
#     re-formed group): rank 2's shard has no copy left, so
#     the 2 survivors fall back to the last checkpoint on disk, say so, and end with the
#     parameters of a 2-rank run resumed from that checkpoint, bit for bit;
#   * the same with --elastic-snapshot-replicas 2 (each shard also on its second ring
#     predecessor): no disk, lost steps <= K, parameters bitwise a 2-rank resume.
#   elastic_zero.sh <bin dir>
set -euo pipefail
bin=$1
source "$(dirname "$0")/resume_reference.sh"
source "$(dirname "$0")/elastic_procs.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export COMM_TIMEOUT_S=20 COMM_RENDEZVOUS_TIMEOUT_S=30 OPENBLAS_NUM_THREADS=1
steps=40 k=5
args=(--backend tcp --algo ring --model mlp --optimizer adam --lr 1e-3 --lr-schedule constant --no-shuffle
      --batch-size 64 --log-every 1 --max-eval-samples 64 --bucket-mb 0.25 --first-bucket-mb 0.05)
fail() { echo "FAIL: $*"; exit 1; }
phases=(forward backward sync update)
field() { sed -nE "s/.*\"$2\":([0-9]+).*/\1/p" <<< "$1"; }
# kill_adjacent LOG WHAT ARGS...: runs ARGS (a launch) in the background with ranks 1 and 2
# stopping themselves in step 23's backward, then SIGKILLs both at once. Two --debug-signal
# KILLs at the same point are not one death: a rank still finishing step 23's agreement
# when the other dies can see the failure first, survive into the next generation and die
# only in its re-run of step 23 (CI saw recoveries=2 this way, once in ~30 loaded runs).
kill_adjacent() {
  local log=$1 what=$2
  shift 2
  "$@" --debug-signal "1:23:backward:STOP,2:23:backward:STOP" > "$log" 2>&1 &
  local launcher=$!
  wait_stopped "$launcher" "$log" "$what" n0.l1.i0 n0.l2.i0
  kill -KILL "${STOPPED_PIDS[@]}"
  wait "$launcher" || { tail -n 30 "$log"; fail "$what: the job failed"; }
}

for z in 1 2 3; do
  victim=$((RANDOM % 4)) at=$((6 + RANDOM % 25)) phase=${phases[RANDOM % 4]}
  d=$work/z$z
  mkdir -p "$d"
  "$bin/launch" --elastic -n 3:4 "$bin/train" --elastic --zero $z --elastic-snapshot-every $k "${args[@]}" --steps $steps \
    --metrics-out "$d/m.jsonl" --checkpoint-dir "$d/ck" --debug-signal "$victim:$at:$phase" > "$d/log" 2>&1 ||
    { tail -n 30 "$d/log"; fail "ZeRO-$z: the job failed after rank $victim was killed"; }
  final=$(grep "final:" "$d/log") || fail "ZeRO-$z: no final line"
  for want in "steps=$steps " "world_size=3 " "recoveries=1 "; do
    grep -q -- "$want" <<< "$final" || { echo "$final"; fail "ZeRO-$z: the final line lacks '$want'"; }
  done
  lost=$(sed -nE 's/.* lost_steps=([0-9]+).*/\1/p' <<< "$final")
  [[ $lost =~ ^[0-9]+$ ]] && ((lost <= k)) || fail "ZeRO-$z: lost_steps '$lost' is not <= $k"
  event=$(grep '"event":"membership"' "$d/m.jsonl") || fail "ZeRO-$z: no membership event"
  s=$(field "$event" resumed_after_step)
  ((s % k == 0 && s < at)) || fail "ZeRO-$z: resumed after step $s, not a snapshot step before the kill in step $at"
  equals_resume "$bin" "$d" "$s" "$steps" "ZeRO-$z" --zero $z "${args[@]}"
  echo "ZeRO-$z: rank $victim killed in step $at ($phase); 3 survivors rebuilt step $s from the neighbour copies" \
       "($lost steps lost), parameters = 3-rank resume (bitwise)"
done

# Two adjacent ranks in one step: old rank 2's shard was held by 2 and by 1 only.
d=$work/adjacent
mkdir -p "$d"
kill_adjacent "$d/log" adjacent "$bin/launch" --elastic -n 2:4 "$bin/train" --elastic --zero 2 --elastic-snapshot-every $k \
  "${args[@]}" --steps $steps --save-every 10 --checkpoint-dir "$d/ck" --metrics-out "$d/m.jsonl"
grep -q "shard state of old rank(s) \[2\] is gone.*falling back to the checkpoint of step 20" "$d/log" ||
  { grep -E "elastic" "$d/log"; fail "adjacent: no disk fallback in the log"; }
final=$(grep "final:" "$d/log")
for want in "steps=$steps " "world_size=2 " "recoveries=1 " "lost_steps=2"; do
  grep -q -- "$want" <<< "$final" || { echo "$final"; fail "adjacent: the final line lacks '$want'"; }
done
# What the fallback trains must be a 2-rank resume of step 20's checkpoint, bit for bit:
# the epoch's order goes on from step 20's position, not from the epoch's start.
RESUME_WORLDS="4 2" equals_resume "$bin" "$d" 20 "$steps" "adjacent" --zero 2 "${args[@]}"
echo "adjacent ranks 1 and 2 killed in step 23: the 2 survivors fell back to the checkpoint of step 20 and finished," \
     "parameters = 2-rank resume of step 20 (bitwise)"

# The same kill with two copies of every shard: old rank 2's second copy is on rank 0.
d=$work/replicas2
mkdir -p "$d"
kill_adjacent "$d/log" "replicas 2" "$bin/launch" --elastic -n 2:4 "$bin/train" --elastic --zero 2 --elastic-snapshot-every $k \
  --elastic-snapshot-replicas 2 "${args[@]}" --steps $steps --checkpoint-dir "$d/ck" --metrics-out "$d/m.jsonl"
! grep -q "falling back to the checkpoint" "$d/log" || fail "replicas 2: fell back to disk although every shard had a second copy"
final=$(grep "final:" "$d/log")
for want in "steps=$steps " "world_size=2 " "recoveries=1 "; do
  grep -q -- "$want" <<< "$final" || { echo "$final"; fail "replicas 2: the final line lacks '$want'"; }
done
event=$(grep '"event":"membership"' "$d/m.jsonl") || fail "replicas 2: no membership event"
s=$(field "$event" resumed_after_step) lost=$(field "$event" lost_steps)
((s == 20 && lost <= k)) || fail "replicas 2: resumed after step $s with $lost steps lost, wanted the snapshot of step 20"
RESUME_WORLDS="4 2" equals_resume "$bin" "$d" "$s" "$steps" "replicas 2" --zero 2 "${args[@]}"
echo "replicas 2: ranks 1 and 2 killed in step 23: the 2 survivors rebuilt step 20 from the second copies, = 2-rank resume (bitwise)"
echo "elastic ZeRO: passed"
