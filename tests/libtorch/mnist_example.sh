#!/bin/bash
# examples/libtorch/ddp_mnist.cpp on 2 ranks, 150 batches of 64 per rank from Fashion-MNIST
# (unpacked into MNIST's IDX files, which libtorch's dataset reads), tested on the 10000
# test images: it must learn (test accuracy >= 0.6; chance is 0.1) and save the model
# with torch::save.
#   mnist_example.sh BIN_DIR PYTHON
set -euo pipefail
bin=$1 py=$2
src=/usr/share/datasets/fashion-mnist
[[ -f $src/train-images-idx3-ubyte.gz ]] || { echo "SKIP: no Fashion-MNIST at $src (tools/install_deps.sh)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in "$src"/*-ubyte.gz; do zcat "$f" > "$tmp/$(basename "$f" .gz)"; done
"$bin/launch" -n 2 "$bin/libtorch_ddp_mnist" "$tmp" 1 150 | tee "$tmp/log"
acc=$(sed -n 's/.*test_acc //p' "$tmp/log")
[[ -f $tmp/mnist_net.pt ]] || { echo "FAIL: no saved model"; exit 1; }
"$py" -c "import sys; a = float('$acc'); print('test accuracy', a); sys.exit(0 if a >= 0.6 else 1)"
