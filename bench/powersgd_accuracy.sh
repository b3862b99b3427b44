#!/usr/bin/env bash
# powersgd_accuracy.sh: what PowerSGD costs in accuracy and buys in bytes. One epoch of
# Fashion-MNIST at 2 ranks (tcp backend, the same global batch, seed and steps), fp32
# allreduce against --grad-compress powersgd, and the final test accuracy on all 10000
# test images, the last loss, samples/s and gradient bytes per step of each.
#   bench/powersgd_accuracy.sh [BIN_DIR]     (default build/bin)
# Environment: MODEL (mlp; or cnn), RANK (4), START (10: --powersgd-start-step),
#   EPOCHS (1), EXTRA (more train flags, e.g. "--optimizer sgd --lr 0.05").
# Prints one line per run and the accuracy difference; exits 1 when PowerSGD's accuracy
# is more than MAX_DROP (default 0.01, the issue's 1%) below the uncompressed run's.
set -euo pipefail
bin=${1:-build/bin}
MODEL=${MODEL:-mlp} RANK=${RANK:-4} START=${START:-10} EPOCHS=${EPOCHS:-1} EXTRA=${EXTRA:-} MAX_DROP=${MAX_DROP:-0.01}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1
# shellcheck disable=SC2086
common=(--model "$MODEL" --epochs "$EPOCHS" --batch-size 32 --backend tcp --log-every 200 --max-eval-samples 0 $EXTRA)
field() { sed -En "s/^\[rank 0\] final:.* $2=([0-9.eE+-]+).*/\1/p" "$work/$1.log"; }
acc() { sed -En 's/^\[rank 0\] final: test_acc=([0-9.]+).*/\1/p' "$work/$1.log"; }
for run in plain powersgd; do
  flags=(); [[ $run == powersgd ]] && flags=(--grad-compress powersgd --powersgd-rank "$RANK" --powersgd-start-step "$START")
  "$bin/launch" -n 2 "$bin/train" "${common[@]}" "${flags[@]}" > "$work/$run.log" 2>&1 || { cat "$work/$run.log"; exit 1; }
  grep -h "PowerSGD rank" "$work/$run.log" | sed 's/^\[rank 0\] //' || true
  steps=$(field $run steps)
  printf "%-9s %s: test_acc %s loss %s steps %s samples/s %s (%.1f steps/s, global batch 64) gradient MiB/step %s\n" "$run" "$MODEL" \
    "$(acc $run)" "$(field $run loss)" "$steps" "$(field $run samples_per_s)" "$(awk -v r="$(field $run samples_per_s)" 'BEGIN { print r / 64 }')" \
    "$(field $run comm_mib_per_step)"
done
awk -v a="$(acc plain)" -v b="$(acc powersgd)" -v m="$MAX_DROP" 'BEGIN {
  printf "accuracy: uncompressed %.4f, PowerSGD %.4f, difference %+.4f (allowed drop %g)\n", a, b, b - a, m
  if (a == "" || b == "" || a - b > m) exit 1 }'
