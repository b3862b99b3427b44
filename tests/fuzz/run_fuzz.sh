#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang, writes their seeds, runs each
# target for SECONDS and prints, per target, the runs executed, the coverage (cov: edges,
# ft: features) and the corpus size. Exits non-zero if any target finds a crash, a leak, a
# sanitizer report, a timeout or a violated property, and prints its reproducer.
#
# Usage: tests/fuzz/run_fuzz.sh SECONDS [BUILD_DIR]
#   BUILD_DIR  default: build/fuzz of the repository. Configured once, then rebuilt
#              incrementally. Each target's corpus (BUILD_DIR/corpus/<target>/) is kept and
#              grown by later runs; seeds are rewritten into BUILD_DIR/seeds/ every run.
# Environment:
#   CLANGXX     the clang++ to use (default: clang++, else the newest clang++-NN on PATH)
#   FUZZ_JOBS   targets run at the same time (default 1: one after the other)
#   FUZZ_RSS_MB memory limit per target in MB (default 2048)
# CTest runs it for 5 s per target (fuzz.smoke: the kept corpus replayed, then a short
# search); docs/reliability.md gives the longer runs, and how to grow the kept corpus.
set -euo pipefail

secs=${1:-}
if [[ ! $secs =~ ^[0-9]+$ ]] || ((secs < 1)); then
  echo "usage: $0 SECONDS [BUILD_DIR]" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${2:-$root/build/fuzz}
mkdir -p "$build"
build=$(cd "$build" && pwd)
jobs=${FUZZ_JOBS:-1}
rss=${FUZZ_RSS_MB:-2048}
targets=(fuzz_frame fuzz_store fuzz_checkpoint)

# --- the toolchain: clang++ and libFuzzer (with ASan and UBSan) --------------------------
cxx=${CLANGXX:-}
if [[ -z $cxx ]]; then
  for c in clang++ clang++-{19..14}; do
    if command -v "$c" >/dev/null; then cxx=$(command -v "$c"); break; fi
  done
fi
if [[ -z $cxx ]] || ! command -v "$cxx" >/dev/null; then
  echo "run_fuzz: no clang++ found: install the Debian package clang (tools/install_deps.sh does)" >&2
  exit 2
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe/p.cpp"
if ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe/p.cpp" -o "$probe/p" 2>"$probe/err"; then
  major=$("$cxx" -dumpversion | cut -d. -f1)
  echo "run_fuzz: $cxx cannot link a libFuzzer target (-fsanitize=fuzzer,address,undefined):" >&2
  sed 's/^/  /' "$probe/err" | tail -5 >&2
  echo "run_fuzz: install the Debian package libclang-rt-$major-dev (tools/install_deps.sh does)" >&2
  exit 2
fi

# --- build (incremental) and seeds -------------------------------------------------------
if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S "$here" -B "$build" -DCMAKE_CXX_COMPILER="$cxx" >"$build/configure.log" 2>&1 ||
    { cat "$build/configure.log" >&2; echo "run_fuzz: configuring $here failed" >&2; exit 2; }
fi
t0=$SECONDS
if ! cmake --build "$build" -j2 >"$build/build.log" 2>&1; then
  cat "$build/build.log" >&2
  echo "run_fuzz: building the fuzz targets failed" >&2
  exit 2
fi
echo "run_fuzz: built ${targets[*]} with $cxx in $((SECONDS - t0)) s (into $build)"
"$build/fuzz_seeds" "$build/seeds" >/dev/null

# --- run ---------------------------------------------------------------------------------
mkdir -p "$build/logs"
run_target() {
  local t=$1 name=${1#fuzz_} dict=()
  mkdir -p "$build/corpus/$name" "$build/artifacts/$name"
  [[ -f $here/$name.dict ]] && dict=(-dict="$here/$name.dict")
  set +e
  # Inputs: the growing corpus (libFuzzer writes new units into the first folder), the
  # seeds, and the corpus kept in the repository (tests/fuzz/corpus/: inputs earlier runs
  # found interesting, minimized with -merge=1), all replayed before any mutation.
  local kept=()
  [[ -d $here/corpus/$name ]] && kept=("$here/corpus/$name")
  "$build/$t" -max_total_time="$secs" -rss_limit_mb="$rss" -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$build/artifacts/$name/" "${dict[@]}" \
    "$build/corpus/$name" "$build/seeds/$name" "${kept[@]}" >"$build/logs/$t.log" 2>&1
  echo $? >"$build/logs/$t.rc"
}
echo "run_fuzz: running each target for $secs s ($jobs at a time); logs in $build/logs/"
running=0
for t in "${targets[@]}"; do
  rm -f "$build/logs/$t.rc"
  run_target "$t" &
  running=$((running + 1))
  if ((running >= jobs)); then
    wait -n || true
    running=$((running - 1))
  fi
done
wait || true

# --- report ------------------------------------------------------------------------------
failed=0
final_stat() { sed -n "s/^stat::$1: *//p" "$2" | tail -1; }
for t in "${targets[@]}"; do
  log=$build/logs/$t.log
  rc=$(cat "$build/logs/$t.rc" 2>/dev/null || echo 99)
  last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  files=$(find "$build/corpus/${t#fuzz_}" -type f | wc -l)
  runs=$(final_stat number_of_executed_units "$log")
  per_s=$(final_stat average_exec_per_sec "$log")
  new=$(final_stat new_units_added "$log")
  if [[ $rc == 0 ]]; then
    printf '%-16s OK     runs %s (%s/s)  cov %s  ft %s  corpus %s files (%s new)\n' \
      "$t" "${runs:-?}" "${per_s:-?}" "${cov:-?}" "${ft:-?}" "$files" "${new:-?}"
  else
    failed=1
    printf '%-16s FAILED (exit %s) after %s runs  cov %s  ft %s\n' "$t" "$rc" "${runs:-?}" "${cov:-?}" "${ft:-?}"
    echo "---- $log (end) ----"
    grep -v '^0x\|^\\' "$log" | tail -40
    repro=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
    echo "----"
    if [[ -n $repro ]]; then
      echo "reproducer: $repro"
      echo "reproduce:  $build/$t $repro"
    else
      echo "no reproducer written; see $log"
    fi
  fi
done
if ((failed)); then
  echo "run_fuzz: FAILED: a target found a crash, leak, sanitizer report, timeout or violated property" >&2
  exit 1
fi
echo "run_fuzz: no findings"
