#!/usr/bin/env bash
# Kill during save: a 2-rank tcp GPT run saving every step is SIGKILLed (rank 0, the
# writer) while a checkpoint file is being written, ROUNDS times at random moments, each
# round resuming from what the previous one left. Each kill lands while one of rank 0's
# temp files exists (rank 0 is frozen with SIGSTOP first and the file checked again).
# After every kill, `latest` must name a complete checkpoint from which the next round
# resumes at the following step; at the end
# a `--resume --steps N+1` run must finish. Left-over temp files (and a planted decoy)
# must never be taken for a checkpoint.
# Usage: fault_kill_during_save.sh LAUNCH TRAIN [ROUNDS]
set -u
launch=$1 train=$2 rounds=${3:-5}
work=$(mktemp -d)
launcher=""
# On a failure mid-round the launcher is still running: SIGTERM makes it stop its ranks.
trap '[[ -n $launcher ]] && kill "$launcher" 2>/dev/null; wait; rm -rf "$work"' EXIT
ckpt=$work/ckpt
# Small batches: the step is short and most of the run's time is the fsync'd save, so a
# kill at a random moment lands in a save; the temp-file wait below makes sure it does.
args=(--backend tcp --model gpt --gpt-layers 6 --batch-size 2 --max-eval-samples 8 --log-every 1
      --save-every 1 --checkpoint-dir "$ckpt")
fail() { echo "FAIL: $*"; exit 1; }
named_step() { local s; s=$(cat "$ckpt/latest" 2>/dev/null) || return 1
  [[ $s =~ ^step_([0-9]+)$ ]] || { echo "latest holds '$s', not a step directory" >&2; return 1; }
  echo "${BASH_REMATCH[1]}"; }
rank0_of() {  # the launched child with RANK=0 in its environment
  for p in $(pgrep -P "$1"); do tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx RANK=0 && { echo "$p"; return; }; done; }

prev=0
for round in $(seq 1 "$rounds"); do
  resume=(); ((prev > 0)) && resume=(--resume)
  # --steps prev+40: a round never runs out of steps before its kill, however fast it saves.
  "$launch" -n 2 "$train" "${args[@]}" --steps $((prev + 40)) "${resume[@]}" >"$work/r$round.log" 2>&1 &
  launcher=$!
  # Wait for this round's first save (latest moves past prev), then a random 0.1-1.5 s.
  for _ in $(seq 1 300); do s=$(named_step) && ((s > prev)) && break; sleep 0.1; done
  ((s > prev)) || { cat "$work/r$round.log"; fail "round $round: no checkpoint saved within 30 s"; }
  sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", 0.1 + 1.4 * r / 32767 }')"
  pid=$(rank0_of "$launcher")
  [[ -n $pid ]] || fail "round $round: rank 0 is not running"
  # Then the moment one of its temp files (named <file>.<random>.tmp.<pid>) exists: a save is in flight.
  # Freeze rank 0 (SIGSTOP) and look again: only a kill while a temp file still exists
  # lands inside a save; otherwise let it run on and wait for the next one.
  inflight=""
  for _ in $(seq 1 5000); do
    mapfile -t tmps < <(compgen -G "$ckpt/step_*/*.tmp.$pid")
    if ((${#tmps[@]} > 0)); then
      kill -STOP "$pid"
      mapfile -t tmps < <(compgen -G "$ckpt/step_*/*.tmp.$pid")
      ((${#tmps[@]} > 0)) && { inflight=${tmps[-1]#"$ckpt"/}; break; }
      kill -CONT "$pid"
    fi
    sleep 0.002
  done
  [[ -n $inflight ]] || { kill -CONT "$pid"; fail "round $round: rank 0 was never caught with a temp file (no save in flight)"; }
  kill -KILL "$pid"
  wait "$launcher" && fail "round $round: the job exited 0 after rank 0 was killed"
  launcher=""
  now=$(named_step) || fail "round $round: no latest after the kill"
  [[ -f $ckpt/step_$now/model.safetensors && -f $ckpt/step_$now/model.optim.safetensors ]] ||
    fail "round $round: latest names step_$now, which lacks a file"
  # The resume of this round (rounds > 1) started right after the previous one's latest.
  if ((prev > 0)) && ! grep -qE "^(\[rank 0\] )?step +$((prev + 1)) " "$work/r$round.log"; then
    tail -n 20 "$work/r$round.log"; fail "round $round: the resume did not continue at step $((prev + 1))"; fi
  echo "round $round: killed rank 0 writing $inflight; latest -> step_$now"
  prev=$now
done

# Leftovers of the kills, plus a decoy: a newer-looking step with only a temp file, and a
# latest.tmp naming it. The resume must take `latest` (step_$prev), nothing else.
mapfile -t left < <(cd "$ckpt" && compgen -G "step_*/*.tmp.*"; compgen -G "latest.*.tmp.*")
echo "temp files left by the kills: ${#left[@]} ${left[*]}"
mkdir -p "$ckpt/step_999" && head -c 100 /dev/urandom > "$ckpt/step_999/model.safetensors.tmp.1"
echo step_999 > "$ckpt/latest.tmp"
"$launch" -n 2 "$train" "${args[@]}" --steps $((prev + 1)) --resume >"$work/final.log" 2>&1 ||
  { tail -n 20 "$work/final.log"; fail "resume from step_$prev failed"; }
if ! grep -qE "^(\[rank 0\] )?step +$((prev + 1)) " "$work/final.log" ||
   ! grep -q "final:.*steps=$((prev + 1)) " "$work/final.log"; then
  tail -n 20 "$work/final.log"; fail "the resume did not run exactly step $((prev + 1))"; fi
echo "kill during save: $rounds kills, each left a loadable checkpoint; resumed step_$prev -> $((prev + 1))"
echo ok
