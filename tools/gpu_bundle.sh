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
# usage: tools/gpu_bundle.sh [BUILD_DIR] [OUT_DIR]     (defaults: build, .gpu)
# On the GPU machine: source OUT_DIR/env.sh (from the repository root), then run
# tools/gpu_verify.sh.
set -euo pipefail
build=${1:-build}
out=${2:-.gpu}
[[ -x $build/bin/train ]] || { echo "gpu_bundle: no build at $build (build/bin/train missing)" >&2; exit 2; }
rm -rf "$out"; mkdir -p "$out/lib" "$out/ompi"

# The build, without objects, archives and the fuzzers' corpora.
tar -C "$build/.." -czf "$out/build.tgz" \
  --exclude='*.o' --exclude='*.a' --exclude='CMakeFiles' --exclude='fuzz' --exclude='Testing' \
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
mapfile -t elves < <(find "$build/bin" "$build/lib" "$out/ompi" -type f \( -perm -u+x -o -name '*.so*' \) ! -name gloo_bench -print)
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
[[ -d $b/lib ]] || tar -C "$b" -xzf "$b/runtime.tgz"
# The CTest files hold the absolute paths of the machine that built them.
built_at=$(sed -n 's/^# Build directory: //p' build/CTestTestfile.cmake | head -1)
if [[ -n $built_at && ! -e $built_at ]]; then mkdir -p "$(dirname "$(dirname "$built_at")")"; ln -sfn "$PWD" "$(dirname "$built_at")"; fi
cuda_libs=$(for n in libcudart.so.13 libnccl.so.2 libcublas.so.13 libcublasLt.so.13; do
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
mkdir -p "$out/data"
for d in /usr/share/datasets/fashion-mnist /usr/share/games/fortunes; do
  [[ -d $d ]] && cp -a "$d" "$out/data/"
done

# One archive for the libraries and Open MPI: it travels compressed.
tar -C "$out" -czf "$out/runtime.tgz" lib ompi data && rm -rf "$out/lib" "$out/ompi" "$out/data"
du -sh "$out"
