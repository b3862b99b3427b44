#!/usr/bin/env bash
# The suite (or part of it) under each OpenBLAS kernel this CPU can run, so a test whose
# tolerance holds only for the kernel this machine happens to pick is caught here, not
# on a user's machine with another CPU (issue 25). Tests and CI never set
# OPENBLAS_CORETYPE; this benchmark does, one kernel at a time.
#
#   bench/kernels_check.sh [BUILD_DIR] [-- CTEST_ARGS...]
#     KERNELS="Haswell SkylakeX Cooperlake" to choose; default: each of Prescott (SSE3,
#     what 0.3.21 falls back to on a CPU it does not know), Haswell (AVX2), SkylakeX and
#     Cooperlake (AVX-512) that this CPU can run.
#     CTEST_ARGS default to the tests that compare numbers against a reference:
#     -R 'models_|training\.|gpt2|torch|bn\.|ddp\.equivalence|zero\.(equivalence|mixed)|fp16'
# Prints one line per kernel (the kernel OpenBLAS reports it ran, tests, failures) and
# exits non-zero when any kernel had a failure.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
[[ ${1:-} && $1 != -- ]] && shift
[[ ${1:-} == -- ]] && shift
args=("$@")
((${#args[@]})) || args=(-R 'models_|training\.|gpt2|torch|bn\.|ddp\.equivalence|zero\.(equivalence|mixed)|fp16' -j2)
flags=$(grep -m1 '^flags' /proc/cpuinfo)
has() { [[ " $flags " == *" $1 "* ]]; }
if [[ -z ${KERNELS:-} ]]; then
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
status=0
for k in $KERNELS; do
  ran=$(OPENBLAS_CORETYPE=$k "$probe/p")
  log=$probe/$k.log
  start=$(date +%s)
  OPENBLAS_CORETYPE=$k ctest --test-dir "$build" --output-on-failure "${args[@]}" > "$log" 2>&1
  rc=$?
  summary=$(grep -E 'tests passed|tests failed' "$log" | tail -1)
  echo "kernel $k (OpenBLAS runs $ran): $summary ($(($(date +%s) - start)) s)"
  if ((rc)); then
    status=1
    sed -n '/The following tests FAILED/,$p' "$log"
    grep -E 'FAIL|MISMATCH|Timeout' "$log" | grep -v 'The following' | head -20
  fi
done
exit $status
