#!/usr/bin/env bash
# ab_builds.sh: two builds of the project, A and B, timed on the same jobs in one run,
# interleaved (A B, then B A, ...) so that both see the same machine load: a GPT-2 124M
# training step (build/bin/gpt2_step) and a ResNet-18 training step (train_local on
# CIFAR-10-format random records). For a change that must not move speed (a refactor, a
# move of files): keep a copy of the old build's bin/ and lib/, build the new one, run
#
#   cp -a build/bin build/lib /tmp/old/    # before the change
#   bench/ab_builds.sh /tmp/old build [--rounds 3] [--threads 1]
#
# and read the ratio of medians. A FOLDER is a build folder or any folder with bin/ and
# lib/ (the programs find their libraries by rpath $ORIGIN/../lib).
# Figures: GPT-2 ms per step (gpt2_step's step_ms, batch 4 x 64, Adam,
# dropout 0) and ResNet-18 samples/s (train_local's training throughput, batch 32, SGD
# momentum, 10 steps); per round and the median, then B's median over A's.
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,16p' "$0"; exit 2; }
a=$1 b=$2
shift 2
rounds=3 threads=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) echo "ab_builds.sh: unknown option '$1' (--rounds N, --threads N)" >&2; exit 2 ;;
  esac
done
for d in "$a" "$b"; do
  for p in gpt2_step train_local; do
    [[ -x $d/bin/$p ]] || { echo "ab_builds.sh: $d/bin/$p is missing (build it, or pass a folder with bin/ and lib/)" >&2; exit 2; }
  done
done
data=$(mktemp -d /tmp/ab_builds.XXXXXX)
trap 'rm -rf "$data"' EXIT
/usr/bin/python3 - "$data" <<'EOF'
import os, sys
import numpy as np
rng = np.random.default_rng(0)
for name, n in [(f"data_batch_{i}.bin", 96) for i in range(1, 6)] + [("test_batch.bin", 32)]:
    rec = rng.integers(0, 256, (n, 3073), dtype=np.uint8)
    rec[:, 0] = rng.integers(0, 10, n)
    rec.tofile(os.path.join(sys.argv[1], name))
EOF
gpt2() {
  OPENBLAS_NUM_THREADS=$threads "$1/bin/gpt2_step" --size 124M --batch 4 --seq 64 --steps 3 --warmup 1 \
    --dropout 0 --no-gemm | sed -n 's/^result .* step_ms=\([0-9.]*\).*/\1/p'
}
resnet() {
  OPENBLAS_NUM_THREADS=$threads "$1/bin/train_local" --model resnet18 --dataset cifar10 --data-dir "$data" \
    --batch-size 32 --steps 10 --optimizer sgd --lr 0.01 --momentum 0.9 --max-eval-samples 32 |
    sed -n 's/.*training throughput *: *\([0-9.]*\) samples\/s.*/\1/p'
}
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo "A = $a, B = $b; $rounds rounds, $threads thread(s); $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A got
for ((r = 1; r <= rounds; r++)); do
  order="a b"
  ((r % 2 == 0)) && order="b a"
  for job in gpt2 resnet; do
    for side in $order; do
      dir=$a
      [[ $side == b ]] && dir=$b
      v=$($job "$dir")
      [[ -n $v ]] || { echo "ab_builds.sh: $job on $dir printed no figure" >&2; exit 1; }
      got[$job.$side]+="$v "
      echo "round $r  $job  ${side^^}  $v"
    done
  done
done
for job in gpt2 resnet; do
  ma=$(tr ' ' '\n' <<< "${got[$job.a]}" | grep . | median)
  mb=$(tr ' ' '\n' <<< "${got[$job.b]}" | grep . | median)
  unit="ms/step (lower is faster)"
  [[ $job == resnet ]] && unit="samples/s (higher is faster)"
  echo "$job: median A $ma, B $mb $unit; B/A $(awk -v x="$mb" -v y="$ma" 'BEGIN {printf "%.3f", x / y}')"
done
