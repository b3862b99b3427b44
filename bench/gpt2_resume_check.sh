#!/usr/bin/env bash
# A tutorial job resumed at its middle checkpoint continues bit for bit (issue 17, item 5),
# at the real size: GPT-2 124M, 4 ranks x batch 4 x 64 tokens, Adam 3e-5, on fortunes.
# Runs STEPS steps with a checkpoint at STEPS/2 and STEPS, then a second run that resumes
# from a copy holding only the middle checkpoint; compare_runs checks the losses of the
# second half and the final parameters for equality (rtol 0).
#   bench/gpt2_resume_check.sh [STEPS (100)] [ZERO STAGE (0)] [OUT DIR (/tmp/gpt2_resume)]
# Long (about 15 minutes on 2 cores): run it under the shared lock, not in CTest.
set -euo pipefail
steps=${1:-100} zero=${2:-0} out=${3:-/tmp/gpt2_resume}
half=$((steps / 2))
bin=$(cd "$(dirname "$0")/.." && pwd)/build/bin
rm -rf "$out" && mkdir -p "$out"
export OPENBLAS_NUM_THREADS=1
job=(--model gpt2 --dataset text-docs --batch-size 4 --seq-len 64 --steps "$steps" --optimizer adam --lr 3e-5
     --lr-schedule constant --save-every "$half" --zero "$zero" --log-every 1 --max-eval-samples 64)
"$bin/launch" -n 4 "$bin/train" "${job[@]}" --checkpoint-dir "$out/full" --metrics-out "$out/full.jsonl" > "$out/full.log" 2>&1
mkdir -p "$out/resumed"
cp -r "$out/full/step_$half" "$out/resumed/"
echo "step_$half" > "$out/resumed/latest"
"$bin/launch" -n 4 "$bin/train" "${job[@]}" --checkpoint-dir "$out/resumed" --resume --metrics-out "$out/resumed.jsonl" \
  > "$out/resumed.log" 2>&1
grep "final:" "$out/full.log" "$out/resumed.log"
# --from-step: the resumed run logs only the steps after $half; every one of them must match.
"$bin/compare_runs" --metrics "$out/full.jsonl" "$out/resumed.jsonl" --from-step "$half" --model "$out/full/model.safetensors" \
  "$out/resumed/model.safetensors" --rtol 0
