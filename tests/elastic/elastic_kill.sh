#!/usr/bin/env bash
# Elastic DDP: a 4-rank MLP job under launch --elastic loses one rank to SIGKILL at a
# random point of a random step (forward, backward, with gradients in flight, or before
# the update), ROUNDS times (round 1 kills rank 0, the others a random rank). Each round:
#   * the job completes all its steps on 3 ranks: final line steps=N world_size=3
#     recoveries=1 lost_steps=0;
#   * recovery: from the last step logged before the kill to the next completed step
#     (metrics unix_time) <= 5 s;
#   * every sample of the epoch trained on exactly once (check_samples.py);
#   * the final parameters equal, bit for bit, those of a 3-rank run resumed from a
#     checkpoint a 4-rank run took at the step the group went on from (same algorithm).
#   elastic_kill.sh <bin dir> [ROUNDS]
set -euo pipefail
bin=$1 rounds=${2:-5}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
launcher=""
trap '[[ -n $launcher ]] && kill "$launcher" 2>/dev/null; wait; rm -rf "$work"' EXIT
export COMM_TIMEOUT_S=20 COMM_RENDEZVOUS_TIMEOUT_S=30 OPENBLAS_NUM_THREADS=1
steps=150   # 150 x 4 x 96 samples: within the first epoch
args=(--backend tcp --algo ring --model mlp --optimizer adam --lr 1e-3 --lr-schedule constant --no-shuffle
      --batch-size 96 --log-every 1 --max-eval-samples 64)
fail() { echo "FAIL: $*"; exit 1; }

phases=(forward backward sync update)
for round in $(seq 1 "$rounds"); do
  victim=$((round == 1 ? 0 : RANDOM % 4))
  at=$((5 + RANDOM % 56))
  phase=${phases[RANDOM % 4]}
  d=$work/r$round
  mkdir -p "$d"
  # The victim SIGKILLs itself inside step $at, at $phase (train --debug-sigkill): a real
  # death at a chosen point, whatever the machine's load.
  "$bin/launch" --elastic -n 3:4 "$bin/train" --elastic "${args[@]}" --steps $steps --metrics-out "$d/m.jsonl" \
    --checkpoint-dir "$d/ck" --debug-sample-log "$d/samples" --debug-sigkill "$victim:$at:$phase" > "$d/log" 2>&1 &
  launcher=$!
  wait "$launcher" || { tail -n 30 "$d/log"; fail "round $round: the job failed after rank $victim was killed"; }
  launcher=""
  final=$(grep -E "final:" "$d/log") || fail "round $round: no final line"
  for want in "steps=$steps " "world_size=3 " "recoveries=1 " "lost_steps=0"; do
    grep -q -- "$want" <<< "$final" || { echo "$final"; fail "round $round: the final line lacks '$want'"; }
  done
  event=$(grep '"event":"membership"' "$d/m.jsonl") || fail "round $round: no membership event in the metrics"
  k=$(sed -nE 's/.*"resumed_after_step":([0-9]+).*/\1/p' <<< "$event")
  [[ $k =~ ^[0-9]+$ ]] || fail "round $round: no resumed_after_step"
  # From the last step logged before the kill (an upper bound on the kill's time) to
  # the first step the 3-rank group completed.
  grep -q "rank $victim (n0.l$victim.i0) killed by signal 9" "$d/log" || fail "round $round: rank $victim was not killed"
  t_kill=$(grep '"world_size":4' "$d/m.jsonl" | grep '"sample_begin"' | tail -1 | sed -nE 's/.*"unix_time":([0-9.]+).*/\1/p')
  t_next=$(grep '"world_size":3' "$d/m.jsonl" | grep '"sample_begin"' | head -1 | sed -nE 's/.*"unix_time":([0-9.]+).*/\1/p')
  [[ -n $t_kill && -n $t_next ]] || fail "round $round: no step logged before the kill, or none by the 3-rank group"
  rec=$(awk -v a="$t_kill" -v b="$t_next" 'BEGIN { printf "%.2f", b - a }')
  awk -v r="$rec" 'BEGIN { exit !(r <= 5.0) }' || fail "round $round: recovery took $rec s (> 5 s)"
  /usr/bin/python3 "$here/check_samples.py" "$d/m.jsonl" "$d/samples" "$steps" || fail "round $round: samples"
  # The reference: 4 ranks to step k with a checkpoint, then 3 ranks resumed from it.
  "$bin/launch" -n 4 "$bin/train" "${args[@]}" --steps "$k" --save-every "$k" --checkpoint-dir "$d/ref" > "$d/ref4.log" 2>&1 ||
    { tail "$d/ref4.log"; fail "round $round: reference 4-rank run"; }
  "$bin/launch" -n 3 "$bin/train" "${args[@]}" --steps $steps --resume --checkpoint-dir "$d/ref" > "$d/ref3.log" 2>&1 ||
    { tail "$d/ref3.log"; fail "round $round: reference 3-rank resume"; }
  "$bin/compare_runs" --model "$d/ck/model.safetensors" "$d/ref/model.safetensors" --rtol 0 > "$d/cmp.log" ||
    { cat "$d/cmp.log"; fail "round $round: parameters differ from the 3-rank resume of step $k"; }
  echo "round $round: rank $victim killed in step $at ($phase); the 3 survivors went on after step $k," \
       "recovery $rec s, 0 steps lost, samples exact, parameters = 3-rank resume (bitwise)"
done
echo "elastic kill: $rounds rounds passed"
