#!/usr/bin/env bash
# llmc_build.sh: builds llm.c's train_gpt2cu (github.com/karpathy/llm.c) here, for the
# "llm.c anchor" of docs/gpu.md: our GPT-2 124M against llm.c on the same card in the same
# device script. The GPU machine has no network and no nvcc, so the binary is built here
# and travels in the bundle (tools/gpu_bundle.sh carries OUT_DIR when it is under BUILD_DIR).
#
# usage: tools/llmc_build.sh LLMC_SRC [OUT_DIR]        (default OUT_DIR: build/llmc)
#   LLMC_SRC: an llm.c source tree, or a git directory of it (the fetch mirror,
#   e.g. /work/.mirror/karpathy+llm.c/repo; its HEAD is built).
# Environment: NVCC (default /usr/local/cuda/bin/nvcc, else the wheels' build/cuda-from-wheels/bin/nvcc), SM (default 90), JOBS (default 2),
# BUILD_LOCK (default /tmp/dpt-build.lock, shared with the project's builds).
#
# Their tree is never edited: it is copied to a scratch directory and built there with
# make's own switches. What the switches do and why:
#   GPU_COMPUTE_CAPABILITY=$SM  code for sm_$SM (+ PTX), not the (absent) local GPU's
#   USE_CUDNN=0                 llm.c's own attention kernels (no cuDNN here)
#   NO_MULTI_GPU=1 NO_USE_MPI=1 one GPU: no NCCL, no MPI (the anchor runs one process)
#   PRECISION=BF16              bf16 activations and weights (llm.c's default, stated)
#   NVCC_LDFLAGS=-lcublas -lcublasLt
#       the Makefile adds -lnvidia-ml, but CUDA 13 here ships neither nvml.h (so llm.c
#       compiles its NVML code out: llmc/mfu.h tests __has_include(<nvml.h>)) nor
#       libnvidia-ml, and the link fails; without nvml.h nothing calls NVML, so the
#       library is not needed.
set -euo pipefail
src=${1:?usage: tools/llmc_build.sh LLMC_SRC [OUT_DIR]  (LLMC_SRC: an llm.c source tree or a git directory of one)}
out=${2:-build/llmc}
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
[[ -n ${NVCC:-} || -x $nvcc ]] || nvcc=build/cuda-from-wheels/bin/nvcc  # docs/gpu.md: the toolkit from NVIDIA's wheels
sm=${SM:-90}
jobs=${JOBS:-2}
lock=${BUILD_LOCK:-/tmp/dpt-build.lock}

[[ -x $nvcc ]] || { echo "llmc_build: no nvcc at $nvcc (set NVCC=...)" >&2; exit 2; }
scratch=$(mktemp -d /tmp/llmc_build.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
if [[ -f $src/train_gpt2.cu ]]; then
  cp -a "$src/." "$scratch/"
  commit=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)
elif git --git-dir="$src" rev-parse --verify -q HEAD >/dev/null 2>&1; then
  git --git-dir="$src" archive HEAD | tar -x -C "$scratch"
  commit=$(git --git-dir="$src" rev-parse HEAD)
else
  echo "llmc_build: $src is neither an llm.c source tree (no train_gpt2.cu) nor a git directory of one" >&2
  exit 2
fi
[[ -f $scratch/train_gpt2.cu && -f $scratch/Makefile ]] || { echo "llmc_build: $src has no train_gpt2.cu/Makefile: not llm.c?" >&2; exit 2; }

cuda_version=$("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
echo "llmc_build: llm.c $commit, nvcc $cuda_version, sm_$sm"
# CUDA 13 removed cudaMemAdvise's int-device overload (only the cudaMemLocation one is
# left), and llm.c's out-of-memory fallback (llmc/cuda_utils.cuh) passes cudaCpuDeviceId.
# The one patch: the same advice, "prefer host memory", as a cudaMemLocation. It touches
# only the path taken when cudaMalloc runs out of memory.
if (( ${cuda_version%%.*} >= 13 )); then
  f=$scratch/llmc/cuda_utils.cuh
  old='cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)'
  new='cudaMemAdviseSetPreferredLocation, cudaMemLocation{cudaMemLocationTypeHost, 0})'
  grep -qF "$old" "$f" || { echo "llmc_build: $f no longer has '$old': check the CUDA 13 patch against this llm.c" >&2; exit 2; }
  sed -i "s/$old/$new/" "$f"
  echo "llmc_build: patched llmc/cuda_utils.cuh for CUDA 13 (cudaMemAdvise takes a cudaMemLocation)"
fi
start=$(date +%s)
# CI=true: the Makefile would otherwise ask nvidia-smi for the local GPU's capability.
flock "$lock" make -C "$scratch" -j"$jobs" train_gpt2cu CI=true \
  NVCC="$nvcc" GPU_COMPUTE_CAPABILITY="$sm" USE_CUDNN=0 NO_MULTI_GPU=1 NO_USE_MPI=1 PRECISION=BF16 \
  NVCC_LDFLAGS="-lcublas -lcublasLt" FORCE_NVCC_O=3
mkdir -p "$out"
cp "$scratch/train_gpt2cu" "$out/"
echo "llm.c $commit sm_$sm bf16 no-cudnn no-mpi nvcc $("$nvcc" --version | tail -1)" >"$out/train_gpt2cu.version"
echo "llmc_build: $out/train_gpt2cu ($(du -h "$out/train_gpt2cu" | cut -f1)) built in $(( $(date +%s) - start )) s"
