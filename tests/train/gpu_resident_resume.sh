#!/usr/bin/env bash
# Device-resident training (--optimizer-device cuda) checkpointed at step 10 and resumed to
# step 20 ends with the model of an uninterrupted 20-step run, bit for bit, and logs the
# same losses from step 11 on. The checkpoint reads the device parameters and AdamW's
# device state through host views (downloaded when read); the restore writes through them
# (uploaded before the next device step). A view that is not refreshed, or a write that
# never reaches the device, changes the bits.
#   gpu_resident_resume.sh <bin dir>   (needs a GPU: run through tests/support/needs_gpu.sh)
set -euo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(--model gpt --backend tcp --device cuda --optimizer-device cuda --optimizer adamw --lr 3e-3
        --weight-decay 0.1 --clip-norm 0.5 --log-every 1 --max-eval-samples 200 --no-shuffle)
run() {  # name, train args...
  local name=$1; shift
  "$bin/launch" -n 2 "$bin/train" "${common[@]}" --metrics-out "$work/$name.jsonl" "$@" > "$work/$name.log" 2>&1 ||
    { cat "$work/$name.log"; exit 1; }
  grep -h "^final:" "$work/$name.log" | cut -c1-160
}
run first --steps 10 --save-every 10 --checkpoint-dir "$work/res"
run resumed --steps 20 --resume --checkpoint-dir "$work/res"
run whole --steps 20 --checkpoint-dir "$work/whole"
"$bin/compare_runs" --metrics "$work/whole.jsonl" "$work/resumed.jsonl" --from-step 10 --rtol 0
"$bin/compare_runs" --model "$work/whole/model.safetensors" "$work/res/model.safetensors" --rtol 0
