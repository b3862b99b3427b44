#!/usr/bin/env bash
# resnet_step.sh: a ResNet-18 training step, ours against PyTorch 1.13, in one run.
#
#   bench/resnet_step.sh [--threads 2] [--batch 32] [--steps 30] [--rounds 3]
#                        [--stem imagenet|cifar] [--build build] [--no-conv]
#
# Both train torchvision's resnet18(num_classes=10) (our --model resnet18) with SGD
# (momentum 0.9) on batches of 3x32x32 CIFAR-10-format images (random bytes written
# here), on the same number of threads (OPENBLAS_NUM_THREADS for us, torch.set_num_threads
# for PyTorch), one process at a time, alternating ours and PyTorch for --rounds rounds
# so that both see the same machine load. Figure: samples / summed step time (data
# loading excluded on both sides), each round's value and the median, and the ratio of
# the medians. Then conv_bench: Conv2d forward/backward FLOP/s as a fraction of sgemm's
# on the same shapes (--no-conv skips it).
set -euo pipefail
threads=2 batch=32 steps=30 rounds=3 stem=imagenet build=build conv=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --stem) stem=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --no-conv) conv=0; shift ;;
    *) echo "resnet_step.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
for bin in train_local conv_bench; do
  [[ -x $build/bin/$bin ]] || { echo "resnet_step.sh: $build/bin/$bin not built" >&2; exit 2; }
done
/usr/bin/python3 -c "import torch, torchvision" 2>/dev/null ||
  { echo "resnet_step.sh: /usr/bin/python3 cannot import torch and torchvision (python3-torch, python3-torchvision)" >&2; exit 2; }

data=$(mktemp -d /tmp/resnet_step.XXXXXX)
trap 'rm -rf "$data"' EXIT
# Enough records for every step of a run without wrapping: 5 files, plus a small test file.
/usr/bin/python3 - "$data" "$((batch * steps / 5 + batch))" <<'EOF'
import os, sys
import numpy as np
d, per_file = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
def write(name, n):
    rec = rng.integers(0, 256, (n, 3073), dtype=np.uint8)
    rec[:, 0] = rng.integers(0, 10, n)
    rec.tofile(os.path.join(d, name))
for i in range(1, 6):
    write(f"data_batch_{i}.bin", per_file)
write("test_batch.bin", 32)
EOF

echo "ResNet-18 training step: batch $batch, 3x32x32, SGD momentum 0.9, $stem stem, $threads threads, $steps steps per run"
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); OpenBLAS core type ${OPENBLAS_CORETYPE:-auto}"
ours=() theirs=()
for r in $(seq 1 "$rounds"); do
  o=$(OPENBLAS_NUM_THREADS=$threads "$build/bin/train_local" --model resnet18 --resnet-stem "$stem" --dataset cifar10 \
        --data-dir "$data" --batch-size "$batch" --steps "$steps" --optimizer sgd --lr 0.01 --momentum 0.9 \
        --max-eval-samples 32 | sed -n 's/.*training throughput *: *\([0-9.]*\) samples\/s.*/\1/p')
  t=$(OMP_NUM_THREADS=$threads /usr/bin/python3 "$here/resnet_step.py" --threads "$threads" --batch "$batch" \
        --steps "$steps" --stem "$stem" --data "$data" | sed -n 's/.*training throughput *: *\([0-9.]*\) samples\/s.*/\1/p')
  printf "round %d: ours %8.1f samples/s   pytorch %8.1f samples/s\n" "$r" "$o" "$t"
  ours+=("$o") theirs+=("$t")
done
median() { printf "%s\n" "$@" | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
mo=$(median "${ours[@]}") mt=$(median "${theirs[@]}")
printf "median:  ours %8.1f samples/s   pytorch %8.1f samples/s   ours/pytorch %.2f\n" "$mo" "$mt" \
  "$(awk -v a="$mo" -v b="$mt" 'BEGIN {print a / b}')"
if [[ $conv == 1 ]]; then
  echo
  OPENBLAS_NUM_THREADS=$threads "$build/bin/conv_bench" --batch "$batch" --size 32 --stem "$stem" --seconds 1
fi
