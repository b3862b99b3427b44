#!/usr/bin/env bash
# A model and data of the user's (examples/train_residual.cpp: residual blocks with
# BatchNorm, a dataset class of its own) get every feature of build/bin/train through
# dpt::train_main, each checked against an uninterrupted 2-rank run (REF, 12 steps):
#   resume      4 steps, then --resume to 12: the final model bitwise REF's
#   world size  the step-4 checkpoint resumed at 1 and at 3 ranks: the model they start
#               from is the checkpoint's, bit for bit (a resume with nothing left to run
#               writes it back), and each trains on to step 8
#   stop        SIGTERM to rank 1 inside step 6's backward: exit 75 after step 6 with its
#               checkpoint; the same command (--auto-resume) ends bitwise at REF's model
#   switch      --switch-backend 6:mpi under mpirun (tcp before): logged, and the final
#               model bitwise REF's (2 ranks: every sum has one order)
#   elastic     launch --elastic, rank 2 of 3 SIGKILLed inside step 10: the 2 survivors
#               finish all 30 steps with recoveries=1 lost_steps=0
#   zero, diloco  --zero 2 and --strategy diloco run to the end
# Usage: user_trainer.sh BIN_DIR ON|OFF (whether this build has the mpi backend)
set -u
bin=$1 have_mpi=$2
prog=$bin/train_residual
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
args=(--backend tcp --algo ring --optimizer adam --lr 3e-3 --lr-schedule constant --no-shuffle --batch-size 32
      --log-every 1 --max-eval-samples 64 --save-every 4)
final() { grep -E "final:" "$1" || { tail -n 30 "$1"; fail "no final line in $1"; }; }
# Every tensor of two safetensors files bit for bit (the metadata, which names the world
# size and the step, may differ).
same_tensors() {
  /usr/bin/python3 -c '
import sys
sys.path.insert(0, sys.argv[3])
import st_io
a, _ = st_io.read_raw(sys.argv[1]); b, _ = st_io.read_raw(sys.argv[2])
sys.exit(0 if a == b and len(a) > 0 else 1)' "$1" "$2" "$(cd "$(dirname "$0")/../support" && pwd)"
}

"$bin/launch" -n 2 "$prog" "${args[@]}" --steps 12 --checkpoint-dir "$work/ref" > "$work/ref.log" 2>&1 ||
  { tail -n 30 "$work/ref.log"; fail "the uninterrupted run failed"; }
[[ -f $work/ref/model.safetensors ]] || fail "the uninterrupted run wrote no final model"
grep -q "residual_mlp (5028 parameters" "$work/ref.log" || fail "the header does not name the user's model"
echo "ok   reference: $(final "$work/ref.log" | grep -oE 'loss=[0-9.]+ .*steps=12')"

# resume at the same world size
"$bin/launch" -n 2 "$prog" "${args[@]}" --steps 4 --checkpoint-dir "$work/base" > "$work/base.log" 2>&1 ||
  { tail -n 30 "$work/base.log"; fail "the 4-step run failed"; }
cp -r "$work/base" "$work/same"
"$bin/launch" -n 2 "$prog" "${args[@]}" --steps 12 --checkpoint-dir "$work/same" --resume > "$work/same.log" 2>&1 ||
  { tail -n 30 "$work/same.log"; fail "the resumed run failed"; }
cmp -s "$work/ref/model.safetensors" "$work/same/model.safetensors" || fail "resume: the final model differs from REF's"
echo "ok   resume: 4 steps + 8 resumed = REF's model, bit for bit"

# resume at world sizes 1 and 3
for n in 1 3; do
  cp -r "$work/base" "$work/w$n"
  "$bin/launch" -n $n "$prog" "${args[@]}" --steps 4 --checkpoint-dir "$work/w$n" --resume > "$work/w$n.a.log" 2>&1 ||
    { tail -n 30 "$work/w$n.a.log"; fail "resume at $n ranks failed"; }
  same_tensors "$work/base/step_4/model.safetensors" "$work/w$n/model.safetensors" ||
    fail "resume at $n ranks: the model it holds is not the step-4 checkpoint's"
  "$bin/launch" -n $n "$prog" "${args[@]}" --steps 8 --checkpoint-dir "$work/w$n" --resume > "$work/w$n.b.log" 2>&1 ||
    { tail -n 30 "$work/w$n.b.log"; fail "training on at $n ranks failed"; }
  f=$(final "$work/w$n.b.log")
  for want in "steps=8 " "world_size=$n "; do grep -q -- "$want" <<< "$f" || fail "resume at $n ranks: no '$want' in: $f"; done
  grep -qE "^(\[rank 0\] )?step +5 \|" "$work/w$n.b.log" || fail "resume at $n ranks: step 5 not logged"
  echo "ok   resume at $n ranks: starts from the step-4 model bit for bit, trains to step 8"
done

# SIGTERM, --auto-resume
"$bin/launch" -n 2 "$prog" "${args[@]}" --steps 12 --checkpoint-dir "$work/stop" --auto-resume \
  --debug-signal "1:6:backward:TERM" > "$work/stop.1.log" 2>&1
rc=$?
[[ $rc -eq 75 ]] || { tail -n 30 "$work/stop.1.log"; fail "stop: the signalled job exited $rc, not 75"; }
grep -q "train_residual: stopped by a signal after step 6" "$work/stop.1.log" || fail "stop: no 'stopped ... after step 6'"
"$bin/launch" -n 2 "$prog" "${args[@]}" --steps 12 --checkpoint-dir "$work/stop" --auto-resume \
  --debug-signal "1:6:backward:TERM" > "$work/stop.2.log" 2>&1 || { tail -n 30 "$work/stop.2.log"; fail "stop: the resumed run failed"; }
cmp -s "$work/ref/model.safetensors" "$work/stop/model.safetensors" || fail "stop: the final model differs from REF's"
echo "ok   stop: SIGTERM in step 6, exit 75, --auto-resume ends at REF's model bit for bit"

# backend switch (needs the mpi backend and mpirun)
if [[ $have_mpi == ON ]]; then
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe --bind-to none -np 2 "$prog" "${args[@]}" \
    --steps 12 --checkpoint-dir "$work/switch" --switch-backend 6:mpi > "$work/switch.log" 2>&1 ||
    { tail -n 30 "$work/switch.log"; fail "switch: the run failed"; }
  grep -q "switched to backend mpi after step 6" "$work/switch.log" || fail "switch: no switch logged"
  cmp -s "$work/ref/model.safetensors" "$work/switch/model.safetensors" || fail "switch: the final model differs from REF's"
  echo "ok   switch: tcp for 6 steps, mpi for 6, REF's model bit for bit"
else
  echo "skip switch: this build has no mpi backend"
fi

# elastic: a rank killed, the others go on without losing a step
"$bin/launch" --elastic -n 2:3 "$prog" --elastic "${args[@]}" --steps 30 --checkpoint-dir "$work/elastic" \
  --debug-signal "2:10:backward" > "$work/elastic.log" 2>&1 || { tail -n 30 "$work/elastic.log"; fail "elastic: the job failed"; }
f=$(final "$work/elastic.log")
for want in "steps=30 " "world_size=2 " "recoveries=1 " "lost_steps=0"; do
  grep -q -- "$want" <<< "$f" || fail "elastic: no '$want' in: $f"
done
echo "ok   elastic: rank 2 killed in step 10, 2 ranks finished 30 steps, recoveries=1 lost_steps=0"

for strategy in "--zero 2" "--strategy diloco --inner-steps 4"; do
  "$bin/launch" -n 2 "$prog" "${args[@]}" --steps 12 $strategy --checkpoint-dir "$work/s" > "$work/s.log" 2>&1 ||
    { tail -n 30 "$work/s.log"; fail "$strategy: the run failed"; }
  grep -q "steps=12 " <<< "$(final "$work/s.log")" || fail "$strategy: not 12 steps"
  echo "ok   $strategy: 12 steps"
done
