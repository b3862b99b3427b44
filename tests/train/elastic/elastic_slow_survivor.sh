#!/usr/bin/env bash
# A survivor slower than the collective timeout to reach the next generation (issue 31:
# a join during a stop killed 4-host chaos runs this way). 3 ranks, -n 2:3: after step 20
# rank 1 is stopped (SIGSTOP) and rank 2 killed (SIGKILL); rank 1 is woken 2x
# COMM_TIMEOUT_S + 1 s later. Rank 0 alone is below the minimum of 2, so the next generation must wait for
# rank 1 (up to the rendezvous timeout) instead of giving up after COMM_TIMEOUT_S: the
# job must finish at world size 2 with one recovery and no step lost.
#   elastic_slow_survivor.sh <bin dir>
set -euo pipefail
bin=$1
work=$(mktemp -d)
launcher=""
trap '[[ -n $launcher ]] && kill "$launcher" 2>/dev/null; wait; rm -rf "$work"' EXIT
# COMM_TIMEOUT_S=4, not less: every wait of a step is bounded by it, and with 3 ranks on 2
# loaded cores a shorter one can time out a healthy step (a second recovery).
export COMM_TIMEOUT_S=4 COMM_ELASTIC_SETTLE_S=1 COMM_RENDEZVOUS_TIMEOUT_S=30 OPENBLAS_NUM_THREADS=1
steps=400
fail() { echo "FAIL: $*"; exit 1; }
source "$(dirname "$0")/elastic_procs.sh"

"$bin/launch" --elastic -n 2:3 "$bin/train" --elastic --backend tcp --algo ring --model mlp --no-shuffle \
  --batch-size 32 --log-every 1 --max-eval-samples 64 --steps $steps --metrics-out "$work/m.jsonl" \
  > "$work/log" 2>&1 &
launcher=$!
for _ in $(seq 1 600); do grep -q '"step":20,' "$work/m.jsonl" 2>/dev/null && break; sleep 0.1; done
pid=$(child_with_id "$launcher" n0.l1.i0) victim=$(child_with_id "$launcher" n0.l2.i0)
[[ -n $pid && -n $victim ]] || { tail -n 20 "$work/log"; fail "no step 20, or ranks 1 and 2 are gone"; }
kill -STOP "$pid"
kill -KILL "$victim"
sleep $((2 * COMM_TIMEOUT_S + 1))
kill -CONT "$pid"
wait "$launcher" || { tail -n 20 "$work/log"; launcher=""; fail "the job failed: the survivors gave up on the stopped one"; }
launcher=""
final=$(grep "final:" "$work/log")
for want in "steps=$steps " "world_size=2 " "recoveries=1 " "lost_steps=0 "; do
  grep -q -- "$want" <<< "$final" || { echo "$final"; fail "the final line lacks '$want'"; }
done
echo "rank 2 killed while rank 1 was stopped $((2 * COMM_TIMEOUT_S + 1)) s (> COMM_TIMEOUT_S=$COMM_TIMEOUT_S): rank 0 waited" \
     "for it, and the job finished at world size 2 with no step lost"
