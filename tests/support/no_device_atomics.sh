#!/usr/bin/env bash
# docs/gpu.md says none of our CUDA kernels uses atomics (so a step repeats bit for bit with
# deterministic cuBLAS/cuDNN algorithms). The CPU emulation (tests/support/cuda_emulation.h)
# cannot show that, since it has no atomics to run; this reads the device sources instead:
# no atomicAdd/atomicCAS/... call and no cuda::atomic in any .cu or .cuh file of the project.
# Usage: no_device_atomics.sh SOURCE_DIR        (--selftest: a planted call must be caught)
set -u
if [[ ${1:-} == --selftest ]]; then
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/models/kernels/cuda"
  echo '__global__ void k(float* x) { x[0] += 1; }' > "$tmp/models/kernels/cuda/ok.cu"
  "$0" "$tmp" > /dev/null || { echo "selftest: a clean tree fails"; exit 1; }
  echo '__global__ void k(float* x) { atomicAdd(x, 1.0f); }' > "$tmp/models/kernels/cuda/bad.cuh"
  if "$0" "$tmp" > /dev/null; then echo "selftest: atomicAdd not caught"; exit 1; fi
  echo "selftest: a planted atomicAdd is caught"
  exit 0
fi
src=${1:?usage: no_device_atomics.sh SOURCE_DIR | --selftest}
files=$(cd "$src" && find . -path ./build -prune -o -path ./third_party -prune -o -path ./.venv -prune -o \( -name '*.cu' -o -name '*.cuh' \) -print)
[[ -n $files ]] || { echo "no .cu or .cuh file under $src: nothing checked"; exit 1; }
hits=$(cd "$src" && echo "$files" | xargs grep -nE '\batomic[A-Z][A-Za-z_]*[[:space:]]*\(|cuda::atomic|__nv_atomic' /dev/null | grep -vE ':[0-9]+:[[:space:]]*//')
if [[ -n $hits ]]; then echo "device code uses atomics (docs/gpu.md says it does not):"; echo "$hits"; exit 1; fi
echo "no atomics in $(echo "$files" | wc -l) device source files"
