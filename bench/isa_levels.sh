#!/usr/bin/env bash
# The numerics and engine tests whose paths depend on the CPU's instruction sets, at every
# level at or below this CPU's (DPT_MAX_CPU_ISA, device/cpu_isa.h), so what a lesser CPU
# runs (emulated bf16 products, AVX2 or SSE loops, oneDNN's lower kernels) is tested on
# this one. At each level: DPT_MAX_CPU_ISA=<level>, which caps our kernels and oneDNN
# (dnnl_set_max_cpu_isa), and OPENBLAS_CORETYPE=<that level's OpenBLAS kernel>, which
# OpenBLAS reads only when it loads, so nothing inside can cap it. Tests never set either;
# this benchmark does, one level at a time.
#
#   bench/isa_levels.sh [BUILD_DIR] [-- CTEST_ARGS...]
#     LEVELS="avx2 sse" to choose; default: each of sse avx avx2 avx512 avx512_bf16 amx at
#     or below this CPU's. CTEST_ARGS default to the tests below (targets models_test,
#     cpu_has, reduce_kernels_test, test_training_optim), without the ones that set their
#     own DPT_MAX_CPU_ISA (models_isa.*, *.isa.*).
# Prints a Markdown table (level, the OpenBLAS kernel and oneDNN ISA that ran, bf16
# products, ctest's counts) and exits non-zero when any level had a failure.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
[[ ${1:-} && $1 != -- ]] && { build=$1; shift; }
[[ ${1:-} == -- ]] && shift
args=("$@")
if ((${#args[@]} == 0)); then
  args=(-R '^(models_(gradcheck|contract|gpt2|loss_over_output|resnet|gemm|gemm_bf16|conv_kernels(\.onednn|\.bf16)?|pool\.avx512|cpu_isa|threads\.(openblas|onednn))|comm\.reduce_kernels|training\.optim\.(sgd|adam))$')
fi
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2-) "
has() { local f; for f in "$@"; do [[ $flags == *" $f "* ]] || return 1; done; }
# device/cpu_isa.h's levels, each with its OpenBLAS kernel.
declare -A core=([sse]=Prescott [avx]=Sandybridge [avx2]=Haswell [avx512]=SkylakeX [avx512_bf16]=Cooperlake
                 [amx]=SapphireRapids)
if [[ -z ${LEVELS:-} ]]; then
  LEVELS="sse"
  has avx && LEVELS+=" avx"
  has avx2 fma f16c && LEVELS+=" avx2"
  has avx512f avx512cd avx512bw avx512dq avx512vl && LEVELS+=" avx512"
  has avx512f avx512cd avx512bw avx512dq avx512vl avx512_vnni avx512_bf16 && LEVELS+=" avx512_bf16"
  has amx_tile amx_bf16 amx_int8 avx512_bf16 avx512_fp16 && LEVELS+=" amx"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Which kernel OpenBLAS really runs under each setting (it falls back silently).
printf '#include <stdio.h>\nchar* openblas_get_corename(void);\nint main(void) { puts(openblas_get_corename()); return 0; }\n' > "$work/p.c"
cc "$work/p.c" -o "$work/p" -lopenblas || { echo "isa_levels: cannot build the OpenBLAS probe"; exit 2; }
bin=$build/bin
for t in models_test cpu_has; do
  [[ -x $bin/$t ]] || { echo "isa_levels: $bin/$t is missing (cmake --build $build --target $t)"; exit 2; }
done
echo "isa_levels: CPU$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), levels $LEVELS;" \
     "OpenBLAS default kernel $(env -u OPENBLAS_CORETYPE "$work/p"), $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "| DPT_MAX_CPU_ISA | OpenBLAS kernel | oneDNN ISA | bf16 products | tests | result | time |"
echo "|---|---|---|---|---|---|---|"
status=0
failed_levels=()
for level in $LEVELS; do
  export DPT_MAX_CPU_ISA=$level OPENBLAS_CORETYPE=${core[$level]}
  kernel=$("$work/p")
  # oneDNN says which ISA it dispatches to when a primitive is made (a convolution here).
  onednn=$(ONEDNN_VERBOSE=1 "$bin/models_test" "[conv_kernels]" 2>&1 | sed -n 's/^onednn_verbose,info,cpu,isa://p' |
           head -1)
  if "$bin/cpu_has" bf16_native -- /bin/true > /dev/null; then bf16=native; else bf16=emulated; fi
  start=$(date +%s)
  log=$work/$level.log
  ctest --test-dir "$build" --output-on-failure "${args[@]}" > "$log" 2>&1
  rc=$?
  passed=$(grep -cE 'Test +#[0-9]+: .* +Passed' "$log")
  skipped=$(grep -cE '\*\*\*Skipped|\*\*\*Not Run \(Disabled\)' "$log")
  total=$(grep -oE 'out of [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+')
  failed=$(( ${total:-0} - passed - skipped ))
  result=pass
  if ((rc || failed > 0)); then
    status=1
    failed_levels+=("$level")
    result="FAIL: $(sed -n '/The following tests FAILED/,$p' "$log" | grep -oE ' - [^ ]+ \((Failed|Not Run|Timeout)' |
                    awk '{print $2}' | paste -sd' ')"
  fi
  echo "| $level | $kernel | ${onednn:-none} | $bf16 | $passed passed, $failed failed, $skipped skipped | $result | $(($(date +%s) - start)) s |"
done
unset DPT_MAX_CPU_ISA OPENBLAS_CORETYPE
for level in "${failed_levels[@]}"; do
  echo
  echo "$level:"
  grep -E 'FAILED|with expansion' -A2 "$work/$level.log" | head -40
done
exit $status
