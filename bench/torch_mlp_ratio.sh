#!/usr/bin/env bash
# The Quick start's job against PyTorch DDP (gloo) on the same MLP, data and per-rank
# batch, 2 ranks, interleaved in one run: each round runs ours (build/bin/train, one
# epoch) then PyTorch's (bench/torch_mlp_ddp.py, one epoch, the torch in DPT_PYTHON or
# .venv), so a busy spell hits both. Prints every round's samples/s and the median ratio.
#
#   bench/torch_mlp_ratio.sh [build] [ROUNDS (default 3)]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${2:-3}
py=${DPT_PYTHON:-.venv/bin/python}
"$py" -c "import torch" 2>/dev/null || { echo "torch_mlp_ratio: $py has no torch (tools/install_deps.sh)" >&2; exit 2; }
echo "torch $("$py" -c 'import torch; print(torch.__version__)'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
ours=() theirs=()
for r in $(seq 1 "$rounds"); do
  o=$("$build/bin/launch" -n 2 "$build/bin/train" --epochs 1 2>&1 | grep -o 'samples_per_s=[0-9.]*' | tail -1 | cut -d= -f2)
  t=$("$build/bin/launch" -n 2 "$py" bench/torch_mlp_ddp.py 2>&1 | grep -o 'samples_per_s=[0-9.]*' | tail -1 | cut -d= -f2)
  [[ -n $o && -n $t ]] || { echo "torch_mlp_ratio: round $r: a run printed no samples_per_s" >&2; exit 1; }
  echo "round $r: dpt $o samples/s, torch DDP (gloo) $t samples/s, ratio $(echo "$o / $t" | bc -l | cut -c1-5)"
  ours+=("$o") theirs+=("$t")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
mo=$(median "${ours[@]}") mt=$(median "${theirs[@]}")
echo "median: dpt $mo, torch $mt samples/s: $(echo "$mo / $mt" | bc -l | cut -c1-5)x"
