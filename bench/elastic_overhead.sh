#!/usr/bin/env bash
# What --elastic costs a run without failures: the same 4-rank job with and without it,
# interleaved REPS times, median step time (train's step_ms) of each, and the ratio.
#   DDP MLP (no snapshots: every rank holds everything), and ZeRO-2 with the default
#   neighbour snapshot every 10 steps (an in-memory copy of every shard each 10 steps).
# Usage: bench/elastic_overhead.sh [BIN_DIR] (REPS=5 STEPS=300)
set -euo pipefail
bin=${1:-build/bin}
reps=${REPS:-5} steps=${STEPS:-300}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1
args=(--backend tcp --model mlp --batch-size 64 --log-every 1000 --max-eval-samples 64 --no-shuffle --steps "$steps")
step_ms() { sed -nE 's/.*final:.* step_ms=([0-9.]+).*/\1/p' "$1"; }
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
for case in ddp zero2; do
  extra=(); [[ $case == zero2 ]] && extra=(--zero 2)
  : > "$work/$case.plain"; : > "$work/$case.elastic"
  for r in $(seq 1 "$reps"); do
    "$bin/launch" -n 4 "$bin/train" "${args[@]}" "${extra[@]}" > "$work/p.log" 2>&1
    step_ms "$work/p.log" >> "$work/$case.plain"
    "$bin/launch" --elastic -n 4 "$bin/train" --elastic "${args[@]}" "${extra[@]}" > "$work/e.log" 2>&1
    step_ms "$work/e.log" >> "$work/$case.elastic"
  done
  p=$(median < "$work/$case.plain") e=$(median < "$work/$case.elastic")
  printf "%-6s step_ms median of %d: plain %.3f  elastic %.3f  ratio %.3f  (plain: %s; elastic: %s)\n" "$case" "$reps" "$p" "$e" \
    "$(awk -v a="$e" -v b="$p" 'BEGIN { print a / b }')" "$(tr '\n' ' ' < "$work/$case.plain")" "$(tr '\n' ' ' < "$work/$case.elastic")"
done
