#!/usr/bin/env bash
# resnet_step.sh: a ResNet-18 training step, ours against PyTorch 2.x (the .venv), in one run.
#
#   bench/resnet_step.sh [--threads 2] [--batch 32] [--steps 30] [--rounds 3]
#                        [--stem imagenet|cifar] [--build build] [--no-conv]
#                        [--variants "im2col onednn onednn-bf16 torch torch-bf16"]
#
# Both train torchvision's resnet18(num_classes=10) (our --model resnet18) with SGD
# (momentum 0.9) on batches of 3x32x32 CIFAR-10-format images (random bytes written
# here), on the same number of threads (OPENBLAS_NUM_THREADS for us, torch.set_num_threads
# for PyTorch), one process at a time, every variant once per round for --rounds rounds
# (A B C ... A B C ...) so that all see the same machine load. Variants:
#   im2col, onednn, auto   ours, DPT_CONV=that (Conv2d's kernel, models/kernels/cpu/conv_engine.h)
#   <one of those>-bf16    the same with train_local --precision bf16 (bf16 operands, fp32
#                          accumulation and master weights)
#   torch, torch-bf16      PyTorch fp32; under torch.autocast("cpu", dtype=torch.bfloat16)
# Figure: samples / summed step time (data loading excluded on both sides), each round's
# value and the median, and each median over PyTorch fp32's. Then conv_bench: Conv2d
# forward/backward FLOP/s as a fraction of sgemm's on the same shapes (--no-conv skips it).
set -euo pipefail
threads=2 batch=32 steps=30 rounds=3 stem=imagenet build=build conv=1
variants="im2col onednn onednn-bf16 torch torch-bf16"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --stem) stem=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --no-conv) conv=0; shift ;;
    --variants) variants=$2; shift 2 ;;
    *) echo "resnet_step.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
py=${DPT_PYTHON:-$here/../.venv/bin/python}  # PyTorch 2.x (tools/install_deps.sh)
for bin in train_local conv_bench; do
  [[ -x $build/bin/$bin ]] || { echo "resnet_step.sh: $build/bin/$bin not built" >&2; exit 2; }
done
"$py" -c "import torch, torchvision" 2>/dev/null ||
  { echo "resnet_step.sh: $py cannot import torch and torchvision (tools/install_deps.sh makes .venv with them)" >&2; exit 2; }

data=$(mktemp -d /tmp/resnet_step.XXXXXX)
trap 'rm -rf "$data"' EXIT
# Enough records for every step of a run without wrapping: 5 files, plus a small test file.
"$py" - "$data" "$((batch * steps / 5 + batch))" <<'EOF'
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
for v in $variants; do
  case "$v" in
    im2col|onednn|auto|im2col-bf16|onednn-bf16|auto-bf16|torch|torch-bf16) ;;
    *) echo "resnet_step.sh: unknown variant '$v' (im2col, onednn, auto, each with -bf16; torch, torch-bf16)" >&2
       exit 2 ;;
  esac
done
throughput() { sed -n 's/.*training throughput *: *\([0-9.]*\) samples\/s.*/\1/p'; }
run_variant() {
  case "$1" in
    torch|torch-bf16)
      OMP_NUM_THREADS=$threads "$py" "$here/resnet_step.py" --threads "$threads" --batch "$batch" \
        --steps "$steps" --stem "$stem" --data "$data" $([[ $1 == torch-bf16 ]] && echo --bf16) | throughput ;;
    *)
      DPT_CONV=${1%-bf16} OPENBLAS_NUM_THREADS=$threads "$build/bin/train_local" --model resnet18 \
        --resnet-stem "$stem" --dataset cifar10 --data-dir "$data" --batch-size "$batch" --steps "$steps" \
        --optimizer sgd --lr 0.01 --momentum 0.9 --max-eval-samples 32 \
        --precision "$([[ $1 == *-bf16 ]] && echo bf16 || echo fp32)" | throughput ;;
  esac
}
# The kernels each side runs, once.
OPENBLAS_NUM_THREADS=$threads "$build/bin/train_local" --model resnet18 --resnet-stem "$stem" --dataset cifar10 \
  --data-dir "$data" --batch-size "$batch" --steps 1 --max-eval-samples 32 --precision bf16 2>&1 |
  grep -E '^(conv:|--precision bf16:)' || true
"$py" -c "import torch; print('pytorch', torch.__version__, 'oneDNN (mkldnn)', torch.backends.mkldnn.is_available())"
declare -A results
for r in $(seq 1 "$rounds"); do
  line="round $r:"
  for v in $variants; do
    x=$(run_variant "$v")
    results[$v]+="$x "
    line+=$(printf "  %s %7.1f" "$v" "$x")
  done
  echo "$line"
done
median() { printf "%s\n" "$@" | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
# shellcheck disable=SC2086
base=$([[ " $variants " == *" torch "* ]] && median ${results[torch]} || echo 0)
for v in $variants; do
  # shellcheck disable=SC2086
  m=$(median ${results[$v]})
  printf "median %-12s %8.1f samples/s" "$v" "$m"
  [[ $base != 0 ]] && printf "   %.2fx pytorch fp32" "$(awk -v a="$m" -v b="$base" 'BEGIN {print a / b}')"
  echo
done
if [[ $conv == 1 ]]; then
  echo
  OPENBLAS_NUM_THREADS=$threads "$build/bin/conv_bench" --batch "$batch" --size 32 --stem "$stem" --seconds 1
fi
