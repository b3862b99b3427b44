#!/usr/bin/env bash
# A rank killed during the evaluation at an epoch's end (chaos seed 3403: a kill there
# made every member exit with the evaluation's error instead of re-forming; the job lost
# all 8 and died below its minimum). 4 ranks, Fashion-MNIST at batch 1000 (15 steps an
# epoch), rank 2 SIGKILLed inside the evaluation after step 15 (--debug-signal
# 2:15:eval). The 3 others must re-form, evaluate again and finish 40 steps at world 3
# with no step lost and every sample of every epoch once (check_samples.py).
#   elastic_eval_kill.sh <bin dir>      (ELASTIC_KEEP=1: keep the work directory)
set -euo pipefail
bin=$1
here=$(cd "$(dirname "$0")" && pwd)
source "$here/elastic_job.sh"
steps=40
"$bin/launch" --elastic -n 3:4 "$bin/train" --elastic --backend tcp --model mlp --no-shuffle --batch-size 1000 \
  --log-every 1 --max-eval-samples 2000 --steps $steps --metrics-out "$work/m.jsonl" --debug-sample-log "$work/samples" \
  --debug-signal 2:15:eval > "$work/log" 2>&1 &
launcher=$!
wait "$launcher" || { launcher=""; grep -v "\] step " "$work/log" | tail -n 20; fail "the job failed after rank 2 died in the evaluation"; }
launcher=""
grep -q "rank 2 (n0.l2.i0) killed by signal 9" "$work/log" || fail "rank 2 was not killed"
grep -qE "elastic: generation 1: world size 3 \(lost \[n0.l2.i0\], joined 0\); resuming after step 15," "$work/log" ||
  { grep "elastic:" "$work/log"; fail "the 3 others did not re-form after step 15"; }
final=$(grep "final:" "$work/log") || fail "no final line"
for want in "steps=$steps " "world_size=3 " "recoveries=1 " "lost_steps=0"; do
  grep -q -- "$want" <<< "$final" || { echo "$final"; fail "the final line lacks '$want'"; }
done
[[ $(grep -c '"eval_loss"' "$work/m.jsonl") -ge 2 ]] || fail "no evaluation after the re-form"
/usr/bin/python3 "$here/check_samples.py" "$work/m.jsonl" "$work/samples" $steps \
  --ids n0.l0.i0,n0.l1.i0,n0.l2.i0,n0.l3.i0 --killed n0.l2.i0:16 --epoch-size 60000 || fail "samples"
echo "rank 2 killed in the evaluation after step 15: the 3 others re-formed, evaluated again and finished at world 3"
