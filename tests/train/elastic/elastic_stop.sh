#!/usr/bin/env bash
# A hung rank: rank 2 of 4 stops itself with SIGSTOP inside a step (not dead: its
# sockets stay open). The others time out after COMM_TIMEOUT_S, and since it neither
# arrives nor is seen dead, the next generation forms without it after the settle time.
# Then it is woken (SIGCONT): it must not rejoin the old generation. It finds itself
# excluded and exits saying so, and its late messages are never mixed into the new
# group's collectives: the final parameters equal, bit for bit, those of a 3-rank run
# resumed from a checkpoint of the step the group went on from.
#   elastic_stop.sh <bin dir>
set -euo pipefail
bin=$1
source "$(dirname "$0")/resume_reference.sh"
work=$(mktemp -d)
launcher=""
trap '[[ -n $launcher ]] && kill "$launcher" 2>/dev/null; wait; rm -rf "$work"' EXIT
export COMM_TIMEOUT_S=5 COMM_ELASTIC_SETTLE_S=3 COMM_RENDEZVOUS_TIMEOUT_S=30 OPENBLAS_NUM_THREADS=1
args=(--backend tcp --algo ring --model mlp --optimizer adam --lr 1e-3 --lr-schedule constant --no-shuffle
      --batch-size 64 --log-every 1 --max-eval-samples 64)
steps=120
fail() { echo "FAIL: $*"; exit 1; }
source "$(dirname "$0")/elastic_procs.sh"

"$bin/launch" --elastic -n 3:4 "$bin/train" --elastic "${args[@]}" --steps $steps --metrics-out "$work/m.jsonl" \
  --checkpoint-dir "$work/ck" --debug-signal 2:25:sync:STOP > "$work/log" 2>&1 &
launcher=$!
for _ in $(seq 1 600); do grep -q '"event":"membership"' "$work/m.jsonl" 2>/dev/null && break; sleep 0.1; done
event=$(grep '"event":"membership"' "$work/m.jsonl") || { tail -n 20 "$work/log"; fail "the group never re-formed"; }
pid=$(child_with_id "$launcher" n0.l2.i0)
[[ -n $pid ]] || fail "the stopped rank is gone"
grep -q "^State:.*T (stopped)" "/proc/$pid/status" || fail "rank 2 is not stopped"
kill -CONT "$pid"
wait "$launcher" || { tail -n 30 "$work/log"; fail "the job failed"; }
launcher=""
grep -q '"lost":\["n0.l2.i0"\]' <<< "$event" || fail "the new generation did not leave out n0.l2.i0: $event"
grep -qE "(within|after) 5000 ms" <<< "$event" || fail "the survivors did not time out on the stopped rank: $event"
grep -E "^\[rank 2\] .*excluded from generation 1" "$work/log" ||
  { grep "rank 2\]" "$work/log" | tail; fail "the woken rank did not find itself excluded"; }
final=$(grep "final:" "$work/log")
for want in "steps=$steps " "world_size=3 " "recoveries=1 "; do
  grep -q -- "$want" <<< "$final" || { echo "$final"; fail "the final line lacks '$want'"; }
done
k=$(sed -nE 's/.*"resumed_after_step":([0-9]+).*/\1/p' <<< "$event")
equals_resume "$bin" "$work" "$k" "$steps" "hung rank" "${args[@]}"
rec=$(sed -nE 's/.*"recovery_s":([0-9.]+).*/\1/p' <<< "$event")
echo "stopped rank 2 in step 25: the others re-formed at 3 after the timeout (recovery $rec s after it), it woke" \
     "excluded, and the result equals the 3-rank resume of step $k bit for bit"

# The same stop, woken only after the others finished (chaos seed 3403: host 0's rank 0,
# left out while it was stopped, exited 1 after the job was done and its launcher, which
# serves the store, ended the whole job as failed). The woken rank must find the job done
# and exit 0, and the launcher too.
"$bin/launch" --elastic -n 3:4 "$bin/train" --elastic "${args[@]}" --steps 60 --debug-signal 2:25:sync:STOP \
  > "$work/late.log" 2>&1 &
launcher=$!
for _ in $(seq 1 600); do grep -q "final:" "$work/late.log" && break; sleep 0.1; done
grep -q "final:" "$work/late.log" || { tail -n 20 "$work/late.log"; fail "late wake: the 3 others never finished"; }
pid=$(child_with_id "$launcher" n0.l2.i0)
[[ -n $pid ]] || fail "late wake: the stopped rank is gone"
grep -q "^State:.*T (stopped)" "/proc/$pid/status" || fail "late wake: rank 2 is not stopped"
kill -CONT "$pid"
wait "$launcher" || { launcher=""; tail -n 30 "$work/late.log"; fail "late wake: the launcher failed the finished job"; }
launcher=""
grep -qE "^\[rank 2\] elastic: the job finished without this process \(excluded from generation 1" "$work/late.log" ||
  { grep "rank 2\]" "$work/late.log" | tail; fail "late wake: the woken rank did not say the job finished without it"; }
echo "woken after the others finished: rank 2 found the job done and exited 0, the launcher too"
