#!/usr/bin/env bash
# Elastic growth and the minimum:
#   * launch --elastic -n 2:4 --max-restarts 1, rank 1 killed in step 30: the survivors
#     go on at 3 (generation 1), the launcher restarts the slot, the new process
#     (n0.l1.i1) joins at a step boundary (generation 2: world size 4, joined 1), takes
#     the members' state and the run finishes at world size 4. The join is deterministic,
#     whatever the machine's speed:
#       - the three survivors stop themselves (SIGSTOP, --debug-signal) at the start of
#         step GATE;
#       - the newcomer is held back (hold_newcomer.sh) until then, so it cannot slip
#         into generation 1 nor join at some other step;
#       - the test waits until the rendezvous store shows it arrived in generation 2
#         (store_probe.py), keeps the survivors stopped >= 1.2 s (rank 0 asks the store
#         at most once a second) and wakes them: the next step boundary takes it in,
#         "resuming after step GATE", long before the run ends.
#     Checked besides: every sample dealt exactly once over the five processes' logs, the
#     newcomer's included (check_samples.py), and every rank's final parameters, the
#     newcomer's by name, equal to rank 0's bit for bit (--debug-state-dump, compare_runs
#     --rtol 0);
#   * -n 3:4 without restarts, ranks 1 and 2 killed in one step: the group would shrink
#     below 3, so the job ends with an error naming the lost ranks (and no hang).
#   elastic_grow.sh <bin dir> [join-fault]   (ELASTIC_KEEP=1: keep the work directory)
# join-fault: the same growth, but the survivor started as rank 2 dies (--debug-signal
# 2:GATE+1:adopt) while generation 2 takes the group's state, so the newcomer's state
# transfer fails: it re-forms with the others (generation 3: world size 3, lost
# [n0.l2.i0], joined 1) instead of exiting with its slot's one restart spent (before:
# the job ended at world size 2); samples and parameters checked as above.
set -euo pipefail
bin=$1 mode=${2:-grow}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
launcher=""
cleanup() {
  if [[ -n $launcher ]]; then  # a failure while the survivors are stopped: wake them, end the job
    for p in $(pgrep -P "$launcher"); do kill -CONT "$p" 2>/dev/null || true; done
    kill "$launcher" 2>/dev/null || true
  fi
  wait
  [[ -n ${ELASTIC_KEEP:-} ]] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
export COMM_TIMEOUT_S=20 COMM_RENDEZVOUS_TIMEOUT_S=30 OPENBLAS_NUM_THREADS=1
# The job's token set here (launch keeps one it is given), so store_probe.py can read the store.
COMM_JOB_TOKEN=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
export COMM_JOB_TOKEN
args=(--backend tcp --model mlp --optimizer adam --lr 1e-3 --lr-schedule constant --no-shuffle --batch-size 64
      --log-every 1 --max-eval-samples 64)
steps=120 gate=40   # 120 steps of <= 4 x 64 samples: within the first epoch
fail() { echo "FAIL: $*"; exit 1; }
source "$here/elastic_procs.sh"

extra_signal="" final_world=4 ids=n0.l0.i0,n0.l1.i0,n0.l2.i0,n0.l3.i0,n0.l1.i1 killed=(--killed n0.l1.i0:30)
case $mode in
  grow) ;;
  join-fault) extra_signal=",2:$((gate + 1)):adopt" final_world=3 killed+=(--killed "n0.l2.i0:$((gate + 1))");;
  *) fail "unknown mode '$mode' (grow or join-fault)";;
esac
export HOLD_NEWCOMER_ID=n0.l1.i1 HOLD_NEWCOMER_GO=$work/go
"$bin/launch" --elastic -n 2:4 --max-restarts 1 "$here/hold_newcomer.sh" "$bin/train" --elastic "${args[@]}" --steps $steps \
  --metrics-out "$work/grow.jsonl" --debug-sample-log "$work/samples" --debug-state-dump "$work/dump" \
  --debug-signal "1:30:sync,0:$gate:forward:STOP,2:$gate:forward:STOP,3:$gate:forward:STOP$extra_signal" > "$work/grow.log" 2>&1 &
launcher=$!
# The gate: the survivors (started as ranks 0, 2, 3) stopped at step $gate.
wait_stopped "$launcher" "$work/grow.log" "grow (gate at step $gate)" n0.l0.i0 n0.l2.i0 n0.l3.i0
survivors=("${STOPPED_PIDS[@]}")
t_stopped=$(date +%s.%N)
touch "$work/go"   # the newcomer starts now
addr=$(env_of "${survivors[0]}" MASTER_ADDR) port=$(env_of "${survivors[0]}" MASTER_PORT)
/usr/bin/python3 "$here/store_probe.py" "$addr" "$port" in-job n0.l1.i1 30 ||
  { tail -n 30 "$work/grow.log"; fail "grow: the restarted process never arrived in the job"; }
sleep "$(awk -v t="$t_stopped" -v now="$(date +%s.%N)" 'BEGIN { d = 1.2 - (now - t); printf "%.3f\n", (d > 0 ? d : 0) }')"
for p in "${survivors[@]}"; do kill -CONT "$p"; done
wait "$launcher" || { launcher=""; tail -n 30 "$work/grow.log"; fail "grow: the job failed"; }
launcher=""
grep -q "restarting slot 1 as n0.l1.i1" "$work/grow.log" || fail "grow: the launcher did not restart slot 1"
grep -qE "elastic: generation 1: world size 3 \(lost \[n0.l1.i0\], joined 0\)" "$work/grow.log" ||
  { grep "elastic: generation" "$work/grow.log"; fail "grow: the survivors did not go on at world size 3 (generation 1)"; }
if [[ $mode == grow ]]; then
  grep -qE "elastic: generation 2: world size 4 \(lost \[\], joined 1\); resuming after step $gate," "$work/grow.log" ||
    { grep "elastic: generation" "$work/grow.log"; fail "grow: the newcomer did not join (generation 2, world size 4) after step $gate"; }
  awk '/"event":"membership"/ && /"generation":2/ && /"joined":1/ && /"world_size":4/ { found = 1 } END { exit !found }' "$work/grow.jsonl" ||
    { grep membership "$work/grow.jsonl"; fail "grow: no membership event with the newcomer joined"; }
else
  grep -q "leaving generation 2 as rank 3: taking the group's state:" "$work/grow.log" ||
    { grep "elastic:" "$work/grow.log"; fail "join-fault: the newcomer did not re-form after its state transfer failed"; }
  grep -qE "elastic: generation 3: world size 3 \(lost \[n0.l2.i0\], joined 1\); resuming after step $gate," "$work/grow.log" ||
    { grep "elastic:" "$work/grow.log"; fail "join-fault: no generation 3 of world size 3 with the newcomer, after step $gate"; }
fi
final=$(grep "final:" "$work/grow.log") || fail "grow: no final line"
for want in "steps=$steps " "world_size=$final_world " "recoveries=1 " "lost_steps=0"; do
  grep -q -- "$want" <<< "$final" || { echo "$final"; fail "grow: the final line lacks '$want'"; }
done
/usr/bin/python3 "$here/check_samples.py" "$work/grow.jsonl" "$work/samples" $steps \
  --ids "$ids" "${killed[@]}" || fail "grow: samples"
# The newcomer's final rank: the rank field of its last sample line.
nr=$(tail -n 1 "$work/samples.n0.l1.i1" | cut -d' ' -f3)
[[ $nr =~ ^[1-3]$ && $nr -lt $final_world ]] || fail "grow: the newcomer's final rank is '$nr'"
for ((r = 1; r < final_world; r++)); do
  [[ -s $work/dump.rank$r.safetensors && -s $work/dump.rank0.safetensors ]] || fail "grow: no state dump of rank $r or 0"
  who="rank $r"; [[ $r == "$nr" ]] && who="the newcomer n0.l1.i1 (rank $r)"
  "$bin/compare_runs" --model "$work/dump.rank0.safetensors" "$work/dump.rank$r.safetensors" --rtol 0 > "$work/cmp$r.log" ||
    { cat "$work/cmp$r.log"; fail "grow: the final parameters of $who differ from rank 0's"; }
done
grep -E "elastic: generation" "$work/grow.log" | sed 's/^/  /'
echo "$mode: rank 1 killed, 3 went on, the restarted process joined after step $gate, finished at" \
     "world size $final_world; samples exact; its final parameters (rank $nr) = rank 0's, bitwise"
[[ $mode == grow ]] || exit 0

if "$bin/launch" --elastic -n 3:4 "$bin/train" --elastic "${args[@]}" --steps 400 \
     --debug-signal "1:20:backward,2:20:backward" > "$work/min.log" 2>&1; then
  fail "min: the job went on below its minimum"
fi
grep -q "below the minimum of 3; lost: \[n0.l1.i0, n0.l2.i0\]" "$work/min.log" ||
  { tail -n 20 "$work/min.log"; fail "min: no error naming the lost ranks"; }
grep -q "launch: job failed" "$work/min.log" || fail "min: launch did not report the failure"
echo "min: two of 4 killed with minimum 3: every survivor stopped with the lost ranks named"
