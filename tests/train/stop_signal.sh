#!/usr/bin/env bash
# SIGTERM or SIGUSR1 (what Slurm sends at a time limit, on scancel or preemption, or ahead
# of time with --signal) on ONE rank of a 2-rank ZeRO-2 GPT job with --checkpoint-dir:
# every rank stops at the same step boundary, the checkpoint of that step is written, each
# rank exits 75, and the same command again (--auto-resume) goes on from that step to a
# final model bitwise equal to an uninterrupted run's: no step lost, none repeated. Cases:
#   term-step   SIGTERM to rank 1 inside step 7's backward: stops after step 7
#   usr1-step   SIGUSR1 to rank 0 inside step 12's forward: stops after step 12
#   term-save   two SIGTERMs to rank 0 during step 10's periodic checkpoint (its files
#               written, `latest` not yet moved): that checkpoint completes, no second one
#               is written, and the run stops after step 10
# And without --checkpoint-dir SIGTERM terminates as always (nothing to save: no waiting):
# rank 1 dies of it, and launch exits 143 naming rank 1.
# Usage: stop_signal.sh BIN_DIR
set -u
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
steps=16
args=(--backend tcp --model gpt --gpt-layers 2 --zero 2 --batch-size 4 --log-every 1 --max-eval-samples 8)
ckpt_args=(--steps $steps --save-every 5)

"$bin/launch" -n 2 "$bin/train" "${args[@]}" "${ckpt_args[@]}" --checkpoint-dir "$work/ref" > "$work/ref.log" 2>&1 ||
  { cat "$work/ref.log"; fail "the uninterrupted run failed"; }
[[ -f $work/ref/model.safetensors ]] || fail "the uninterrupted run wrote no final model"

check_case() {  # NAME STOP_STEP DEBUG_SIGNAL
  local name=$1 at=$2 hook=$3 dir=$work/$1 rc
  "$bin/launch" -n 2 "$bin/train" "${args[@]}" "${ckpt_args[@]}" --checkpoint-dir "$dir" --auto-resume \
    --debug-signal "$hook" > "$work/$name.1.log" 2>&1
  rc=$?
  [[ $rc -eq 75 ]] || { cat "$work/$name.1.log"; fail "$name: the signalled job exited $rc, not 75 (launch passes its ranks' 75 on)"; }
  grep -q "stopped by a signal after step $at: checkpoint in" "$work/$name.1.log" ||
    { cat "$work/$name.1.log"; fail "$name: no 'stopped by a signal after step $at'"; }
  # launch sees the first rank to end exit 75 and stops the other (train's own "(exit 75)"
  # in its message must not pass for it).
  grep -qE "^launch: rank [01] exited with code 75$" "$work/$name.1.log" ||
    { cat "$work/$name.1.log"; fail "$name: no rank exited 75"; }
  [[ $(cat "$dir/latest") == "step_$at" ]] || fail "$name: latest is '$(cat "$dir/latest")', not step_$at"
  ! grep -qE "^\[rank 0\] step +$((at + 1)) \|" "$work/$name.1.log" || fail "$name: step $((at + 1)) ran before the stop"
  # The same command: the hook's step is behind it now, so it does not fire again.
  "$bin/launch" -n 2 "$bin/train" "${args[@]}" "${ckpt_args[@]}" --checkpoint-dir "$dir" --auto-resume \
    --debug-signal "$hook" > "$work/$name.2.log" 2>&1 || { cat "$work/$name.2.log"; fail "$name: the resumed run failed"; }
  grep -q "auto-resume: continuing from step $at of" "$work/$name.2.log" ||
    { cat "$work/$name.2.log"; fail "$name: the second run did not continue from step $at"; }
  grep -qE "^\[rank 0\] step +$((at + 1)) \|" "$work/$name.2.log" || fail "$name: the resumed run did not log step $((at + 1))"
  ! grep -qE "^\[rank 0\] step +$at \|" "$work/$name.2.log" || fail "$name: the resumed run repeated step $at"
  cmp -s "$work/ref/model.safetensors" "$dir/model.safetensors" ||
    fail "$name: the final model differs from the uninterrupted run's"
  echo "ok   $name: stopped after step $at (exit 75), resumed there, final model bitwise the uninterrupted run's"
}
check_case term-step 7 "1:7:backward:TERM"
check_case usr1-step 12 "0:12:forward:USR1"
check_case term-save 10 "0:10:save:TERM,0:10:save:TERM"
# Without a checkpoint folder there is nothing to save: SIGTERM ends the rank at once.
start=$(date +%s)
"$bin/launch" -n 2 "$bin/train" "${args[@]}" --steps 100000 --debug-signal "1:3:forward:TERM" \
  > "$work/plain.log" 2>&1
rc=$? took=$(($(date +%s) - start))
# launch names the first rank that failed and passes its death on as 128 + 15; the rank
# it stopped after that (rank 0) died of launch's SIGTERM, which must not pass for rank 1's.
grep -q "^launch: job failed: rank 1 killed by signal 15 (SIGTERM)$" "$work/plain.log" ||
  { cat "$work/plain.log"; fail "without --checkpoint-dir rank 1 did not die of its SIGTERM first"; }
[[ $rc -eq 143 ]] || { cat "$work/plain.log"; fail "without --checkpoint-dir the job exited $rc, not 143 (SIGTERM)"; }
grep -q "stopped by a signal" "$work/plain.log" && fail "without --checkpoint-dir the job claims a checkpoint"
((took < 30)) || fail "without --checkpoint-dir SIGTERM took $took s to end the job"
echo "ok   no --checkpoint-dir: SIGTERM ends the job (rc $rc, $took s)"
