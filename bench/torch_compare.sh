#!/usr/bin/env bash
# dpt against gloo under PyTorch, in one run: torch.distributed.all_reduce busbw from
# 4 KiB to 64 MiB at 2 and 4 ranks on this host, and DDP samples/s on the Fashion-MNIST
# MLP and on a 22.10M-parameter MLP at 2 ranks. Each measurement interleaves the two
# backends inside one job (bench/torch_allreduce.py, bench/torch_ddp.py), so both see
# the same load. Writes bench/results/torch/*.json and prints the tables.
#   bench/torch_compare.sh [build]        (about 10 minutes on 2 cores)
set -euo pipefail
build=${1:-build}
out=bench/results/torch
mkdir -p "$out"
export PYTHONPATH=$build/python OMP_NUM_THREADS=1
py=${DPT_PYTHON:-.venv/bin/python}  # PyTorch 2.x (tools/install_deps.sh)
for n in 2 4; do
  echo "== all_reduce float32, $n ranks"
  "$build/bin/launch" -n "$n" $py bench/torch_allreduce.py --out "$out/allreduce_np$n.json" | sed 's/^\[rank 0\] //'
done
for model in mlp large; do
  echo "== DDP $model, 2 ranks"
  "$build/bin/launch" -n 2 $py bench/torch_ddp.py --model "$model" --out "$out/ddp_$model.json" | sed 's/^\[rank 0\] //'
done
