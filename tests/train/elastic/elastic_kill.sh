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
#   elastic_kill.sh <bin dir> [ROUNDS]       (ELASTIC_KEEP=1: keep the work directory and say where)
# The victims, steps and phases are drawn from bash's RANDOM seeded with SEED (default:
# the clock), printed first; each round prints its victim, step and phase before it
# runs, so a failing round names them. To replay a run (the same rounds, in order):
#   SEED=<the printed seed> elastic_kill.sh <bin dir> [ROUNDS]
#   (under ctest: SEED=<seed> ctest --test-dir build -R elastic.kill_ddp --output-on-failure)
set -euo pipefail
bin=$1 rounds=${2:-5}
SEED=${SEED:-$(date +%s)}
[[ $SEED =~ ^[0-9]+$ ]] || { echo "elastic_kill.sh: SEED must be a non-negative integer, got '$SEED'"; exit 2; }
RANDOM=$SEED
echo "elastic kill: SEED=$SEED, $rounds rounds (replay: SEED=$SEED $0 $bin $rounds)"
here=$(cd "$(dirname "$0")" && pwd)
source "$here/resume_reference.sh"
source "$here/elastic_job.sh"
steps=150   # 150 x 4 x 96 samples: within the first epoch
args=(--backend tcp --algo ring --model mlp --optimizer adam --lr 1e-3 --lr-schedule constant --no-shuffle
      --batch-size 96 --log-every 1 --max-eval-samples 64)
fail() { echo "FAIL: $*"; echo "  (SEED=$SEED; replay: SEED=$SEED $0 $bin $rounds)"; exit 1; }

phases=(forward backward sync update)
for round in $(seq 1 "$rounds"); do
  victim=$((round == 1 ? 0 : RANDOM % 4))
  at=$((5 + RANDOM % 56))
  phase=${phases[RANDOM % 4]}
  echo "round $round: killing rank $victim in step $at at $phase (SEED=$SEED)"
  d=$work/r$round
  mkdir -p "$d"
  # The victim SIGKILLs itself inside step $at, at $phase (train --debug-signal): a real
  # death at a chosen point, whatever the machine's load.
  "$bin/launch" --elastic -n 3:4 "$bin/train" --elastic "${args[@]}" --steps $steps --metrics-out "$d/m.jsonl" \
    --checkpoint-dir "$d/ck" --debug-sample-log "$d/samples" --debug-signal "$victim:$at:$phase" > "$d/log" 2>&1 &
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
  # (awk reads the whole file: a "| head" here would end the grep before it is done
  # writing, and with pipefail that SIGPIPE, exit 141, silently ended the test.)
  step_times() { awk -v ws="\"world_size\":$1" 'index($0, ws) && /"sample_begin"/ {
      if (match($0, /"unix_time":[0-9.]+/)) print substr($0, RSTART + 12, RLENGTH - 12) }' "$d/m.jsonl"; }
  t_kill=$(step_times 4 | tail -n 1)
  t_next=$(step_times 3 | awk 'NR == 1')
  [[ -n $t_kill && -n $t_next ]] || fail "round $round: no step logged before the kill, or none by the 3-rank group"
  rec=$(awk -v a="$t_kill" -v b="$t_next" 'BEGIN { printf "%.2f", b - a }')
  awk -v r="$rec" 'BEGIN { exit !(r <= 5.0) }' || fail "round $round: recovery took $rec s (> 5 s)"
  # Each of the 4 processes left a log; shares may be unlogged only in the step the victim
  # died in (its own; a survivor's that failed that step while another completed it).
  /usr/bin/python3 "$here/check_samples.py" "$d/m.jsonl" "$d/samples" "$steps" \
    --ids n0.l0.i0,n0.l1.i0,n0.l2.i0,n0.l3.i0 --killed "n0.l$victim.i0:$at" || fail "round $round: samples"
  equals_resume "$bin" "$d" "$k" "$steps" "round $round" "${args[@]}"
  echo "round $round: rank $victim killed in step $at ($phase); the 3 survivors went on after step $k," \
       "recovery $rec s, 0 steps lost, samples exact, parameters = 3-rank resume (bitwise)"
done
echo "elastic kill: $rounds rounds passed"
