#!/usr/bin/env bash
# A restarted process whose first generation fails to build its communicator (a member
# died as it joined) must arrive in the next generation, as the members do, instead of
# exiting and spending a launcher restart (chaos seed 5: 17 of 27 restarts). 4 slots,
# -n 2:4 --max-restarts 1: rank 3 killed in step 10 (its slot restarted as n0.l3.i1,
# held back by hold_newcomer.sh), rank 2 in step 15 (no restart left); ranks 0 and 1
# stop themselves at step GATE. Once the newcomer arrived in the next generation, the
# test registers a phantom newcomer there (phantom_arrival.py) and wakes the members:
# the generation closes with a member that never connects (marked dead, as a launcher
# marks an exited process), so every communicator setup fails at its rendezvous. The newcomer must then join the generation after
# (world size 3, joined 1, resuming after step GATE) and the job finish at world size 3.
#   elastic_newcomer_retry.sh <bin dir>      (ELASTIC_KEEP=1: keep the work directory)
set -euo pipefail
bin=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
launcher=""
cleanup() {
  if [[ -n $launcher ]]; then
    for p in $(pgrep -P "$launcher"); do kill -CONT "$p" 2>/dev/null || true; done
    kill "$launcher" 2>/dev/null || true
  fi
  wait
  [[ -n ${ELASTIC_KEEP:-} ]] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
export COMM_TIMEOUT_S=10 COMM_RENDEZVOUS_TIMEOUT_S=10 COMM_ELASTIC_SETTLE_S=10 OPENBLAS_NUM_THREADS=1
COMM_JOB_TOKEN=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
export COMM_JOB_TOKEN
steps=80 gate=30
fail() { echo "FAIL: $*"; exit 1; }
source "$here/elastic_procs.sh"

export HOLD_NEWCOMER_ID=n0.l3.i1 HOLD_NEWCOMER_GO=$work/go
"$bin/launch" --elastic -n 2:4 --max-restarts 1 "$here/hold_newcomer.sh" "$bin/train" --elastic --backend tcp --model mlp \
  --no-shuffle --batch-size 32 --log-every 1 --max-eval-samples 64 --steps $steps --metrics-out "$work/m.jsonl" \
  --debug-signal "3:10:backward,2:15:backward,0:$gate:forward:STOP,1:$gate:forward:STOP" > "$work/log" 2>&1 &
launcher=$!
wait_stopped "$launcher" "$work/log" "gate at step $gate" n0.l0.i0 n0.l1.i0
members=("${STOPPED_PIDS[@]}")
t_stopped=$(date +%s.%N)
touch "$work/go"
addr=$(env_of "${members[0]}" MASTER_ADDR) port=$(env_of "${members[0]}" MASTER_PORT)
/usr/bin/python3 "$here/store_probe.py" "$addr" "$port" in-job n0.l3.i1 30 ||
  { tail -n 30 "$work/log"; fail "the restarted process never arrived in the job"; }
/usr/bin/python3 "$here/phantom_arrival.py" "$addr" "$port" n0.l9.phantom
# rank 0 asks the store for newcomers at most once a second: keep the members stopped >= 1.2 s
sleep "$(awk -v t="$t_stopped" -v now="$(date +%s.%N)" 'BEGIN { d = 1.2 - (now - t); printf "%.3f\n", (d > 0 ? d : 0) }')"
for p in "${members[@]}"; do kill -CONT "$p"; done
wait "$launcher" || { launcher=""; tail -n 30 "$work/log"; fail "the job failed"; }
launcher=""
grep "elastic: generation\|joining the next one\|train: error" "$work/log" | sed 's/^/  /'
grep -q "train: error" "$work/log" && fail "a process exited with an error (the newcomer gave up on its failed generation?)"
grep -q "n0.l3.i1: generation 3 did not form" "$work/log" || fail "the newcomer's generation 3 (with the phantom) did not fail"
# lost and joined count against generation 2, the last that trained (the phantom never did).
grep -qE "elastic: generation 4: world size 3 \(lost \[\], joined 1\); resuming after step $gate," "$work/log" ||
  fail "the newcomer did not join generation 4 (world size 3) after step $gate"
final=$(grep "final:" "$work/log") || fail "no final line"
for want in "steps=$steps " "world_size=3 " "lost_steps=0"; do
  grep -q -- "$want" <<< "$final" || { echo "$final"; fail "the final line lacks '$want'"; }
done
echo "the newcomer's first generation failed to form; it joined the next one and the job finished at world size 3"
