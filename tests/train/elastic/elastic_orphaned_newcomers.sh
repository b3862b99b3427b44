#!/usr/bin/env bash
# Every member of a generation dies, and only restarted processes are left (chaos: host
# 0's rank 0 among the dead): they must form the next generation themselves and resume
# from the last checkpoint on disk, saying so, instead of waiting forever for members
# that cannot come. 2 slots, -n 1:2 --max-restarts 2, a checkpoint every 10 steps: both
# first processes stop themselves at step 23 and the test SIGKILLs them; the two restarted
# processes must resume from step 20's checkpoint and finish the run, with the parameters
# of a 2-rank run resumed from that checkpoint, bit for bit.
#   elastic_orphaned_newcomers.sh <bin dir>      (ELASTIC_KEEP=1: keep the work directory)
set -euo pipefail
bin=$1
work=$(mktemp -d)
launcher=""
cleanup() {
  [[ -n $launcher ]] && kill "$launcher" 2>/dev/null
  wait
  [[ -n ${ELASTIC_KEEP:-} ]] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
export COMM_TIMEOUT_S=5 COMM_RENDEZVOUS_TIMEOUT_S=10 COMM_ELASTIC_SETTLE_S=2 OPENBLAS_NUM_THREADS=1
steps=60 gate=23
fail() { echo "FAIL: $*"; exit 1; }
source "$(dirname "$0")/elastic_procs.sh"
source "$(dirname "$0")/resume_reference.sh"
# Only the first processes (incarnation 0) stop at the gate; the restarted ones run through.
cat > "$work/first_stop.sh" <<WRAP
#!/usr/bin/env bash
[[ \$DPT_ELASTIC_ID == *.i0 ]] && exec "\$@" --debug-signal "0:$gate:forward:STOP,1:$gate:forward:STOP"
exec "\$@"
WRAP
chmod +x "$work/first_stop.sh"
# A constant learning rate: the reference below runs its first part with --steps 20, and a
# schedule over --steps would differ there.
"$bin/launch" --elastic -n 1:2 --max-restarts 2 "$work/first_stop.sh" "$bin/train" --elastic --backend tcp --model mlp \
  --lr-schedule constant --no-shuffle --batch-size 32 --log-every 1 --max-eval-samples 64 --steps $steps --checkpoint-dir "$work/ckpt" \
  --save-every 10 > "$work/log" 2>&1 &
launcher=$!
wait_stopped "$launcher" "$work/log" "gate at step $gate" n0.l0.i0 n0.l1.i0
first=("${STOPPED_PIDS[@]}")
kill -KILL "${first[@]}"
wait "$launcher" || { launcher=""; tail -n 30 "$work/log"; fail "the job failed: the restarted processes did not go on alone"; }
launcher=""
grep "elastic\|train: error" "$work/log" | sed 's/^/  /'
grep -q "restarting slot 0 as n0.l0.i1" "$work/log" && grep -q "restarting slot 1 as n0.l1.i1" "$work/log" ||
  fail "the launcher did not restart both slots"
grep -q "no member of the new group holds any training state: falling back to the checkpoint of step 20" "$work/log" ||
  fail "the restarted processes did not say they resume from step 20's checkpoint"
final=$(grep "final:" "$work/log") || fail "no final line"
grep -q -- "steps=$steps " <<< "$final" || { echo "$final"; fail "the final line lacks 'steps=$steps'"; }
# Bit for bit a 2-rank run resumed from step 20's checkpoint: the restarted processes go
# on from that step's place in the epoch, not from the epoch's start.
ln -s ckpt "$work/ck"
RESUME_WORLDS="2 2" equals_resume "$bin" "$work" 20 "$steps" "orphaned newcomers" --backend tcp --model mlp \
  --lr-schedule constant --no-shuffle --batch-size 32 --log-every 1 --max-eval-samples 64
echo "both first processes killed after step $((gate - 1)): the restarted ones formed a generation alone, resumed" \
     "from step 20's checkpoint and ended with a 2-rank resume's parameters (bitwise)"
