#!/usr/bin/env bash
# gpu_bundle.sh: packs a build made here so that it runs on a GPU machine that has the
# NVIDIA driver, CUDA and NCCL but none of our Debian packages (Open MPI, Boost, OpenBLAS,
# fmt, ...), and cannot install them (no network).
#
# What travels: build/{bin,lib} and the CTest files (so `ctest -L gpu` runs there), every
# shared library our programs and Open MPI's plugins load that is not part of glibc, the
# C++ runtime or CUDA/NCCL/cuBLAS (those come from the GPU machine, whose versions match
# its driver), and Open MPI's launcher, daemon, plugins and help texts. Open MPI is
# relocated with OPAL_PREFIX, which re-derives every install path from the prefix.
#
# The llm.c anchor (docs/gpu.md) travels inside the build: BUILD_DIR/llmc holds llm.c's
# train_gpt2cu when tools/llmc_build.sh made it, and the fortunes as llm.c token files
# (made here with build/bin/llmc_data when the binary is there and the files are not).
#
# usage: tools/gpu_bundle.sh [BUILD_DIR] [OUT_DIR]     (defaults: build, .gpu)
# On the GPU machine: source OUT_DIR/env.sh (from the repository root), then run
# tools/gpu_verify.sh.
set -euo pipefail
build=${1:-build}
out=${2:-.gpu}
[[ -x $build/bin/train ]] || { echo "gpu_bundle: no build at $build (build/bin/train missing)" >&2; exit 2; }
rm -rf "$out"; mkdir -p "$out/lib" "$out/ompi"

# llm.c's data, B=16 T=1024: each file needs at least B*T+1 tokens.
if [[ -x $build/llmc/train_gpt2cu && ! -f $build/llmc/fortunes_val.bin && -x $build/bin/llmc_data ]]; then
  "$build/bin/llmc_data" --out "$build/llmc/fortunes" --min-tokens 16385
fi
if [[ -x $build/llmc/train_gpt2cu ]]; then
  echo "gpu_bundle: llm.c anchor included: $(ls "$build/llmc" | paste -sd' ')"
else
  echo "gpu_bundle: no $build/llmc/train_gpt2cu: the llmc step of gpu_verify.sh will say so (tools/llmc_build.sh builds it)"
fi

# The build, without objects, archives, the fuzzers' corpora, the models that test runs
# wrote (*.safetensors: 1 GB after the torch reference tests; every test writes its own) and
# the links to .venv's CUDA wheels (cuda-from-wheels: the GPU machine's own CUDA is used).
tar -C "$build/.." -czf "$out/build.tgz" \
  --exclude='*.o' --exclude='*.a' --exclude='CMakeFiles' --exclude='fuzz' --exclude='Testing' --exclude='*.safetensors' \
  --exclude='cuda-from-wheels' \
  "$(basename "$build")"

# Open MPI's runtime, laid out as under /usr so that OPAL_PREFIX=$out/ompi/usr relocates it.
ompi_lib=/usr/lib/x86_64-linux-gnu/openmpi
mkdir -p "$out/ompi/usr/bin" "$out/ompi$ompi_lib" "$out/ompi/usr/share"
cp -L /usr/bin/orterun /usr/bin/orted "$out/ompi/usr/bin/"
ln -s orterun "$out/ompi/usr/bin/mpiexec"; ln -s orterun "$out/ompi/usr/bin/mpirun"
cp -a "$ompi_lib/lib" "$out/ompi$ompi_lib/"
cp -a /usr/share/openmpi "$out/ompi/usr/share/"
rm -rf "$out/ompi$ompi_lib/lib/"{*java*,pkgconfig,liboshmem*,*mpifh*,*usempi*,*common_ucx*,*common_ofi*,*common_verbs*}
# A single machine needs only shared memory and TCP: no InfiniBand, OFI, UCX or PSM plugins
# (and none of their libraries).
rm -f "$out/ompi$ompi_lib/lib/openmpi3/"mca_*_{ucx,ofi,openib,psm,psm2,usnic,portals4}.so
rm -f "$out/ompi$ompi_lib/lib/openmpi3/"mca_{spml,sshmem,atomic,scoll}_*.so

# Every library those programs need that the GPU machine is not expected to have.
is_provided() {  # glibc, the compiler's runtime and the CUDA stack come from the GPU machine
  [[ $1 =~ ^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libstdc\+\+|libgcc_s|libcuda|libcudart|libnccl|libcublas|libnvidia|libdpt_) ]]
}
# (gloo_bench, the Gloo reference, stays behind: it is a CPU benchmark.)
scan=("$build/bin" "$build/lib"); [[ -d $build/llmc ]] && scan+=("$build/llmc")
mapfile -t elves < <(find "${scan[@]}" "$out/ompi" -type f \( -perm -u+x -o -name '*.so*' \) ! -name gloo_bench -print)
for f in "${elves[@]}"; do
  file -b "$f" | grep -q ELF || continue
  ldd "$f" 2>/dev/null | awk '/=> \// {print $1, $3}'
done | sort -u | while read -r name path; do
  is_provided "$name" || cp -Ln "$path" "$out/lib/$name"
done

cat >"$out/env.sh" <<'EOF'
# Sourced on the GPU machine from the repository root: unpacks the build and points the
# loader and Open MPI at the bundled libraries.
b=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[[ -d build/bin ]] || tar -xzf "$b/build.tgz"
[[ -d $b/lib ]] || LD_LIBRARY_PATH=$b/unxz "$b/unxz/xz" -dc "$b/runtime.txz" | tar -C "$b" -xf -
# The CTest files hold the absolute paths of the machine that built them.
built_at=$(sed -n 's/^# Build directory: //p' build/CTestTestfile.cmake | head -1)
if [[ -n $built_at && ! -e $built_at ]]; then mkdir -p "$(dirname "$(dirname "$built_at")")"; ln -sfn "$PWD" "$(dirname "$built_at")"; fi
# cuDNN (opened at run time by the convolutions) is far above the carry budget: the GPU
# machine's own is used when it has one (gpu_verify.sh's probe says whether).
cuda_libs=$(for n in libcudart.so.13 libnccl.so.2 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9; do
  find /usr/local/cuda*/ /usr/lib /opt -name "$n" 2>/dev/null | head -1; done | xargs -r -n1 dirname | sort -u | paste -sd:)
export OPAL_PREFIX=$b/ompi/usr
export PATH=$b/ompi/usr/bin:$PATH
export LD_LIBRARY_PATH=$b/lib:$b/ompi/usr/lib/x86_64-linux-gnu/openmpi/lib:$cuda_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[[ -e /usr/bin/mpiexec ]] || ln -s "$b/ompi/usr/bin/orterun" /usr/bin/mpiexec
mkdir -p /usr/share/datasets /usr/share/games
[[ -e /usr/share/datasets/fashion-mnist || ! -d $b/data/fashion-mnist ]] || ln -s "$b/data/fashion-mnist" /usr/share/datasets/
[[ -e /usr/share/games/fortunes || ! -d $b/data/fortunes ]] || ln -s "$b/data/fortunes" /usr/share/games/
# The GPU machine's own PMIx plugins do not fit the bundled libpmix: silence their notes.
export PMIX_MCA_pcompress_base_silence_warning=1 PMIX_MCA_mca_base_component_show_load_errors=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
EOF
# The datasets the trainers read by default (Debian's paths), when this machine has them.
# Fashion-MNIST travels as its first FMNIST_TRAIN (10000) training and FMNIST_TEST (2000)
# test images, in the same IDX format: the whole set is 30 MB of already-compressed data,
# and a device run's budget (64 MiB for everything carried) cannot hold it; the GPU checks
# train for at most a few thousand samples.
mkdir -p "$out/data"
[[ -d /usr/share/games/fortunes ]] && cp -a /usr/share/games/fortunes "$out/data/"
if [[ -d /usr/share/datasets/fashion-mnist ]]; then
  mkdir -p "$out/data/fashion-mnist"
  python3 - /usr/share/datasets/fashion-mnist "$out/data/fashion-mnist" "${FMNIST_TRAIN:-10000}" "${FMNIST_TEST:-2000}" <<'PY'
import gzip, struct, sys
src, dst, n_train, n_test = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
for split, n in (("train", n_train), ("t10k", n_test)):
    for kind in ("images-idx3", "labels-idx1"):
        name = f"{split}-{kind}-ubyte.gz"
        raw = gzip.open(f"{src}/{name}").read()
        dims = raw[3]                      # IDX: 0, 0, type, number of dimensions
        shape = struct.unpack(f">{dims}I", raw[4:4 + 4 * dims])
        keep = min(n, shape[0])
        per = 1
        for d in shape[1:]: per *= d
        head = raw[:4] + struct.pack(f">{dims}I", keep, *shape[1:])
        with gzip.open(f"{dst}/{name}", "wb", compresslevel=9) as f:
            f.write(head + raw[4 + 4 * dims:4 + 4 * dims + keep * per])
PY
fi

# One archive for the libraries, Open MPI and the data, xz-compressed (gzip left it at
# 75 MB, over the budget; xz at 35), with this machine's xz and liblzma beside it
# uncompressed, so unpacking needs nothing from the GPU machine.
tar -C "$out" -cf - lib ompi data | xz -T2 -6 > "$out/runtime.txz"
rm -rf "$out/lib" "$out/ompi" "$out/data"
mkdir -p "$out/unxz"
cp -L "$(command -v xz)" "$out/unxz/xz"
cp -L "$(ldd "$(command -v xz)" | awk '/liblzma/ {print $3}')" "$out/unxz/"
du -sh "$out"
total=$(du -sb "$out" | cut -f1)
((total < 60 * 1024 * 1024)) ||
  echo "gpu_bundle: WARNING: $out is $((total / 1024 / 1024)) MiB: over the 60 MiB that leaves room for the source tree in a device run's 64 MiB" >&2
