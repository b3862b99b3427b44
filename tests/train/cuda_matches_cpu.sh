#!/usr/bin/env bash
# The same training job with --device cpu and --device cuda must log the same loss at
# every step and end with the same model (to float32 rounding accumulated over the
# steps), and the cuda run must have computed on the GPU (its final line says
# device=cuda, the cpu run's device=cpu). A wrong kernel, a gradient that never reaches
# the optimizer or a device bucket averaged wrongly moves the losses and the parameters
# by far more.
# usage: cuda_matches_cpu.sh BIN_DIR RANKS BACKEND [train args...]
#   TOL (1e-4): relative difference allowed for each step's loss and, as relative L2, for
#     each tensor of the final model (compare_runs --rtol). On an H100 the final losses of
#     40-step runs differed by 5e-6 (GPT) and 5e-5 (MLP) relative (docs/gpu.md).
#   ATOL (1e-5): a tensor also passes with an RMS difference <= ATOL (compare_runs --atol),
#     for GPT's qkv bias: its key third has an exactly-zero gradient in exact arithmetic
#     (softmax ignores a constant added to a row of scores), so its ~1e-6 values are Adam
#     steps on rounding noise, which differs between cpu and cuda (cpu against cpu with
#     another reduction order already differs by 5e-5 relative L2 in that tensor, 5e-7 in
#     the others; the values the other tensors learn in 20 steps are ~1e-3 to 1e-2).
#   CUDA_ARGS: more train flags for the cuda run only (--optimizer-device cuda, --precision
#     bf16: the cpu run stays the fp32 reference).
#   LOSSES_ONLY=1: compare the losses only (bf16 products move the parameters by more than
#     the losses).
set -euo pipefail
bin=$1 np=$2 backend=$3; shift 3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
read -r -a cuda_args <<< "${CUDA_ARGS:-}"
for dev in cpu cuda; do
  extra=(); [[ $dev == cuda ]] && extra=("${cuda_args[@]}")
  # Every step logged (--log-every 1) to the metrics file; the final model to $work/$dev/model.safetensors.
  mpiexec --oversubscribe --bind-to none -n "$np" "$bin/train" --backend "$backend" --device "$dev" \
    --log-every 1 --metrics-out "$work/$dev.jsonl" --checkpoint-dir "$work/$dev" "$@" "${extra[@]}" >"$work/$dev.log" 2>&1 ||
    { cat "$work/$dev.log"; exit 1; }
  grep -q "^final:.* device=$dev " "$work/$dev.log" ||
    { echo "FAIL: the $dev run's final line does not say device=$dev"; cat "$work/$dev.log"; exit 1; }
  grep -h "^final:" "$work/$dev.log" | cut -c1-200
done
# compare_runs: the same set of steps in both files, every loss finite and within TOL,
# every tensor present in both, finite, and within TOL (or ATOL).
models=(--model "$work/cpu/model.safetensors" "$work/cuda/model.safetensors")
[[ ${LOSSES_ONLY:-0} == 1 ]] && models=()
"$bin/compare_runs" --metrics "$work/cpu.jsonl" "$work/cuda.jsonl" "${models[@]}" --rtol "${TOL:-1e-4}" --atol "${ATOL:-1e-5}"
