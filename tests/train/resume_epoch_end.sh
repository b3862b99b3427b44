#!/usr/bin/env bash
# Resume from a checkpoint written at the last step of an epoch whose sampler padded it:
# Fashion-MNIST's 60000 samples over 7 ranks deal 8572 per rank (60004 positions), so
# the checkpoint of step 17 (batch 512 per rank: the epoch's 17th and last step) holds
# sample_position 60004, past the data set by the padding. The resume must take that
# epoch as complete and go on bitwise as the uninterrupted run (to step 20); it was
# refused ("sample_position 60004 is past the dataset's 60000 samples"), which broke the
# chaos verdict's replay of a 7-rank segment.
#   resume_epoch_end.sh <bin dir>
set -euo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export OPENBLAS_NUM_THREADS=1
args=(--backend tcp --model mlp --optimizer adam --lr 1e-3 --lr-schedule constant --no-shuffle --batch-size 512
      --log-every 1 --max-eval-samples 64)
run() { "$bin/launch" -n 7 "$bin/train" "${args[@]}" "$@"; }
run --steps 20 --checkpoint-dir "$work/whole" > "$work/whole.log" 2>&1 || { tail "$work/whole.log"; fail "the uninterrupted run"; }
run --steps 17 --save-every 17 --checkpoint-dir "$work/split" > "$work/first.log" 2>&1 || { tail "$work/first.log"; fail "the run to step 17"; }
pos=$(/usr/bin/python3 - "$work/split/step_17/model.safetensors" <<'PY'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    print(json.loads(f.read(n))["__metadata__"]["sample_position"])
PY
)
((pos > 60000)) || fail "the checkpoint of step 17 holds sample_position $pos: not past the data set, the case is not exercised"
run --steps 20 --resume --checkpoint-dir "$work/split" > "$work/resume.log" 2>&1 || { tail "$work/resume.log"; fail "the resume from step 17 (sample_position $pos)"; }
"$bin/compare_runs" --model "$work/whole/model.safetensors" "$work/split/model.safetensors" --rtol 0 > "$work/cmp.log" ||
  { cat "$work/cmp.log"; fail "the resumed run differs from the uninterrupted one"; }
echo "checkpoint at sample_position $pos (60000 samples, 7 ranks): resumed into the next epoch, bitwise the uninterrupted run"
