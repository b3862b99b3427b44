#!/usr/bin/env bash
# The suite (or part of it) under each kernel path this CPU can run, so a test whose
# tolerance holds only for the kernels this machine happens to pick is caught here, not
# on a user's machine with another CPU (issues 25, 27). Tests and CI never set these
# variables; this benchmark does, one path at a time:
#   - each OpenBLAS kernel this CPU can run (OPENBLAS_CORETYPE; DPT_GEMM left at auto, so
#     Prescott, the fallback of 0.3.21 on a CPU it does not know, runs what a user there
#     gets: oneDNN where built);
#   - where oneDNN is built (EXTRA_PATHS): OpenBLAS Prescott forced (DPT_GEMM=openblas), oneDNN forced
#     (DPT_GEMM=onednn), oneDNN capped at AVX2 (ONEDNN_MAX_CPU_ISA=AVX2: an AVX2-only CPU,
#     where bf16 products are emulated), and the convolutions forced to each kernel
#     (DPT_CONV=im2col, DPT_CONV=onednn).
#
#   bench/kernels_check.sh [BUILD_DIR] [-- CTEST_ARGS...]
#     KERNELS="Haswell SkylakeX Cooperlake" to choose the OpenBLAS kernels; default: each of
#     Prescott (SSE3), Haswell (AVX2), SkylakeX and Cooperlake (AVX-512) that this CPU can
#     run. EXTRA_PATHS="" to skip the others, or a list of NAME=VAR=VALUE[,VAR=VALUE] words.
#     CTEST_ARGS default to the tests that compare numbers against a reference:
#     -R 'models_|training\.|gpt2|torch|bn\.|ddp\.equivalence|zero\.(equivalence|mixed)|fp16'
# Prints one line per kernel (the kernel OpenBLAS reports it ran, tests, failures) and
# exits non-zero when any kernel had a failure.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
[[ ${1:-} && $1 != -- ]] && { build=$1; shift; }
[[ ${1:-} == -- ]] && shift
args=("$@")
((${#args[@]})) || args=(-R 'models_|training\.|gpt2|torch|bn\.|ddp\.equivalence|zero\.(equivalence|mixed)|fp16' -j2)
flags=$(grep -m1 '^flags' /proc/cpuinfo)
has() { [[ " $flags " == *" $1 "* ]]; }
if [[ -z ${KERNELS+set} ]]; then  # KERNELS="" runs no OpenBLAS kernel, only EXTRA_PATHS
  KERNELS="Prescott"
  has avx2 && has fma && KERNELS+=" Haswell"
  has avx512f && has avx512bw && has avx512vl && KERNELS+=" SkylakeX"
  has avx512_bf16 && KERNELS+=" Cooperlake"
fi
# Which kernel OpenBLAS really runs under each setting (it falls back silently).
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '#include <stdio.h>\nchar* openblas_get_corename(void);\nint main(void) { puts(openblas_get_corename()); return 0; }\n' > "$probe/p.c"
cc "$probe/p.c" -o "$probe/p" -lopenblas || { echo "kernels_check: cannot build the OpenBLAS probe"; exit 2; }
echo "kernels_check: CPU $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), default kernel $(env -u OPENBLAS_CORETYPE "$probe/p")"
# NAME=VAR=VALUE[,VAR=VALUE...]: the paths beyond OpenBLAS's kernels.
if [[ -z ${EXTRA_PATHS+set} ]]; then
  EXTRA_PATHS=""
  if grep -q "DPT_HAVE_ONEDNN" "$build/models/CMakeFiles/dpt_models.dir/flags.make" 2>/dev/null; then
    EXTRA_PATHS="openblas-prescott=DPT_GEMM=openblas,OPENBLAS_CORETYPE=Prescott onednn=DPT_GEMM=onednn"
    EXTRA_PATHS+=" onednn-avx2=DPT_GEMM=onednn,ONEDNN_MAX_CPU_ISA=AVX2 conv-im2col=DPT_CONV=im2col"
    EXTRA_PATHS+=" conv-onednn=DPT_CONV=onednn"
  fi
fi
status=0
run_path() {  # NAME DESCRIPTION VAR=VALUE...
  local name=$1 what=$2 log=$probe/$1.log start rc summary
  shift 2
  start=$(date +%s)
  env "$@" ctest --test-dir "$build" --output-on-failure "${args[@]}" > "$log" 2>&1
  rc=$?
  summary=$(grep -E 'tests passed|tests failed' "$log" | tail -1)
  echo "$name ($what): $summary ($(($(date +%s) - start)) s)"
  if ((rc)); then
    status=1
    sed -n '/The following tests FAILED/,$p' "$log"
    grep -E 'FAIL|MISMATCH|Timeout' "$log" | grep -v 'The following' | head -20
  fi
}
for k in $KERNELS; do
  run_path "kernel $k" "OpenBLAS runs $(OPENBLAS_CORETYPE=$k "$probe/p")" OPENBLAS_CORETYPE=$k
done
for p in $EXTRA_PATHS; do
  run_path "${p%%=*}" "${p#*=}" $(tr ',' ' ' <<< "${p#*=}")
done
exit $status
