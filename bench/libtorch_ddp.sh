#!/bin/bash
# libtorch DDP on dpt against the official C++ example's way (one allreduce per gradient
# after backward) and against Python's DDP with gloo, one model and batch, in one run:
#   bench/libtorch_ddp.sh [BUILD_DIR] [RANKS...]        (default: build 2 4)
# Each rank one thread (OMP_NUM_THREADS=1). Prints one line per variant and rank count.
set -euo pipefail
build=${1:-build}
shift || true
ranks=${*:-2 4}
py=${DPT_PYTHON:-$(dirname "$0")/../.venv/bin/python}
args="--layers 8 --width 1024 --batch 32 --steps 30 --warmup 5"
export OMP_NUM_THREADS=1
for n in $ranks; do
  over=(); (( n > $(nproc) )) && over=(--oversubscribe)
  for mode in dpt dpt-view dpt-zero dpt-after per-param; do
    "$build/bin/launch" -n "$n" "$build/bin/libtorch_ddp_step" --mode "$mode" $args --backend tcp
  done
  if [[ -n $(command -v mpirun) ]]; then
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun "${over[@]}" --bind-to none -np "$n" \
      "$build/bin/libtorch_ddp_step" --mode dpt $args --backend mpi
  fi
  "$py" -m torch.distributed.run --standalone --nproc-per-node "$n" "$(dirname "$0")/libtorch_ddp_python.py" $args
done
