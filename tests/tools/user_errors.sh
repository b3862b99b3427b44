#!/usr/bin/env bash
# A new user's mistakes (issue 29), each run as typed: every one must fail (non-zero exit)
# within seconds, and its output must name the mistake and the flag that fixes it.
#   1. launch --elastic without train --elastic (was: a port collision on rank 0, then
#      rank 1 waiting out the 120 s rendezvous); any other program under launch
#      --elastic; train --elastic under mpirun (was: "needs --backend tcp").
#   2. --model gpt (bytes) on --dataset text-docs (GPT-2 BPE ids): was a token id outside
#      the embedding at the first step.
#   3. --data-file with an image model: was "<file>/train-images-idx3-ubyte.gz: file not found".
#   4. a missing CIFAR-10 or Fashion-MNIST: was "file not found" alone.
#   5. --backend nccl without a GPU: was the CUDA error alone (where there is no GPU).
#   6. --backend mpi under build/bin/launch: the refusal must be the last thing said, with
#      no MPI_ABORT banner after it.
#   7. DPT_CONV=cudnn; train_local --precision fp16.
#   user_errors.sh <bin dir> <mpiexec or "none">
set -uo pipefail
bin=$1 mpiexec=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fails=0
# expect NAME MAX_S REGEX -- COMMAND...: non-zero exit within MAX_S seconds, REGEX in the
# output (stdout and stderr), no MPI_ABORT banner. The output is left in NAME.log.
expect() {
  local name=$1 max_s=$2 want=$3; shift 4
  local t0 t1 rc
  t0=$(date +%s.%N)
  timeout 40 "$@" > "$name.log" 2>&1; rc=$?
  t1=$(date +%s.%N)
  local took; took=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  local why=""
  [[ $rc == 0 ]] && why+=" exit 0;"
  awk -v t="$took" -v m="$max_s" 'BEGIN { exit !(t > m) }' && why+=" took ${took} s (limit $max_s);"
  grep -Eq -- "$want" "$name.log" || why+=" no /$want/ in the output;"
  grep -q "MPI_ABORT" "$name.log" && why+=" an MPI_ABORT banner;"
  if [[ -n $why ]]; then
    echo "FAIL: $name:$why exit $rc; output:"; tail -8 "$name.log"; fails=$((fails + 1))
  else
    echo "ok: $name (exit $rc, ${took} s): $(grep -Em1 -- "$want" "$name.log" | cut -c1-220)"
  fi
}
toy=(--model toy --steps 1)

# 1. Elastic launcher and trainer disagree.
expect elastic_launch_plain_train 15 "add --elastic to train's flags" -- \
  "$bin/launch" --elastic -n 2 "$bin/train" "${toy[@]}"
expect elastic_launch_demo 15 "only train --elastic and programs whose dpt::init is given InitOptions::elastic.*plain build/bin/launch -n N" -- \
  "$bin/launch" --elastic -n 2 "$bin/demo" --backend tcp
expect plain_launch_elastic_train 15 "started by a plain launch or torchrun.*build/bin/launch --elastic -n MIN:MAX" -- \
  "$bin/launch" -n 2 "$bin/train" --elastic "${toy[@]}"
if [[ $mpiexec != none ]]; then
  expect mpirun_elastic_train 15 "started by mpirun.*build/bin/launch --elastic -n MIN:MAX" -- \
    "$mpiexec" --oversubscribe --bind-to none -n 2 "$bin/train" --elastic "${toy[@]}"
fi

# 2. A byte-level model on GPT-2's tokens.
expect gpt_on_text_docs 15 "vocabulary of 256 .* 50257.*--model gpt2 .*--dataset text" -- \
  "$bin/train" --model gpt --dataset text-docs --steps 1
expect gpt_on_text_docs_local 15 "vocabulary of 256 .* 50257.*--model gpt2 .*--dataset text" -- \
  "$bin/train_local" --model gpt --dataset text-docs --steps 1

# 3. --data-file for an image model.
echo "some text of mine" > my.txt
expect data_file_with_mlp 15 "--data-file 'my.txt' is the text of --dataset text .*--dataset text-docs.*--data-dir DIR holding train-images-idx3-ubyte.gz" -- \
  "$bin/train" --model mlp --data-file my.txt --steps 1

# 4. Image datasets that are not there: the dataset, its files, where, how to get them.
mkdir empty
expect cifar10_default_dir 15 "--dataset cifar10: 'cifar-10-batches-bin' .*has none of its files.*--data-dir names another.*data_batch_1.bin.*test_batch.bin.*cannot download CIFAR-10.*point --data-dir" -- \
  "$bin/train" --model resnet18 --dataset cifar10 --steps 1
expect cifar10_empty_dir 15 "--dataset cifar10: 'empty' \($work/empty\) has none of its files.*cannot download CIFAR-10.*point --data-dir" -- \
  "$bin/train_local" --model cnn --dataset cifar10 --data-dir empty --steps 1
expect fashion_mnist_empty_dir 15 "--dataset fashion-mnist \(--model mlp's default\): 'empty' .*t10k-labels-idx1-ubyte.gz.*dataset-fashion-mnist.*--data-dir" -- \
  "$bin/train" --model mlp --data-dir empty --steps 1

# 5. nccl without a GPU (where there is one, the gpu.* tests run the backend instead).
if "$bin/device_info" > /dev/null 2>&1; then
  echo "not applicable here: nccl_without_gpu (a GPU exists)"
else
  expect nccl_without_gpu 15 "(no usable CUDA device|not built).*--backend tcp" -- \
    "$bin/launch" -n 2 "$bin/train" --backend nccl "${toy[@]}"
fi

# 6. mpi under launch: the refusal is the ranks' last line, no MPI_ABORT banner (expect).
if [[ $mpiexec != none ]]; then
  expect mpi_under_launch 15 "say 2 processes, but MPI sees a world of 1.*mpirun -np 2" -- \
    "$bin/launch" -n 2 "$bin/train" --backend mpi "${toy[@]}"
  last=$(grep '^\[rank' mpi_under_launch.log | tail -1)
  if [[ $last != *"train: error:"*"mpirun -np 2"* ]]; then
    echo "FAIL: mpi_under_launch: the ranks' last line is not the refusal: $last"; fails=$((fails + 1))
  fi
fi

# 7. Kernel choices (issue 27): a DPT_CONV value that is none of the three, and a
#    train_local --precision it does not have, refused before any data is read.
expect dpt_conv_unknown 15 "DPT_CONV=cudnn: expected im2col, onednn or auto" -- \
  env DPT_CONV=cudnn "$bin/train_local" --model resnet18 --dataset cifar10 --data-dir empty --steps 1
expect train_local_precision 15 "--precision: expected fp32 or bf16, got 'fp16'" -- \
  "$bin/train_local" --model resnet18 --precision fp16 --steps 1

echo "$fails failure(s)"
[[ $fails == 0 ]]
