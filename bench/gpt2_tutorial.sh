#!/usr/bin/env bash
# The OSLO tutorials' GPT-2 jobs (issue 17, item 5) as written, on the fortunes corpus
# (one fortune = one document, text-docs): GPT-2 124M, Adam lr 3e-5 (constant, as the
# tutorials' torch.optim.Adam), batch 4 per rank, sequence length 64, a checkpoint every
# 50 steps, 4 ranks, with DDP, ZeRO-1 and ZeRO-2; then the per-step losses of ZeRO
# against DDP, and a sample generated from DDP's final checkpoint.
#   bench/gpt2_tutorial.sh [STEPS (100)] [OUT DIR (/tmp/gpt2_tutorial)] [STAGES ("0 1 2")]
# Long (about 10 minutes per job on 2 cores): run it under the shared lock, not in CTest.
set -euo pipefail
steps=${1:-100} out=${2:-/tmp/gpt2_tutorial} stages=${3:-"0 1 2"}
bin=$(cd "$(dirname "$0")/.." && pwd)/build/bin
mkdir -p "$out"
export OPENBLAS_NUM_THREADS=1
for z in $stages; do
  rm -rf "$out/z$z"
  start=$(date +%s.%N)
  "$bin/launch" -n 4 "$bin/train" --model gpt2 --dataset text-docs --batch-size 4 --seq-len 64 --steps "$steps" \
    --optimizer adam --lr 3e-5 --lr-schedule constant --save-every 50 --checkpoint-dir "$out/z$z" --zero "$z" \
    --log-every 1 --max-eval-samples 64 --metrics-out "$out/z$z.jsonl" > "$out/z$z.log" 2>&1
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" -v z="$z" 'BEGIN { printf "zero %s: %.1f s wall\n", z, b - a }' | tee "$out/z$z.time"
  grep "final:" "$out/z$z.log"
done
for z in $stages; do
  [[ $z == 0 ]] && continue
  echo "ZeRO-$z against DDP:"
  "$bin/compare_runs" --metrics "$out/z0.jsonl" "$out/z$z.jsonl" --model "$out/z0/model.safetensors" "$out/z$z/model.safetensors" \
    --rtol 1e-6 || true
done
"$bin/generate" --init-from "$out/z0/model.safetensors" --prompt "The meaning of life is" --max-tokens 40 \
  --temperature 0.8 --top-k 40 --seed 1 | tee "$out/sample.txt"
