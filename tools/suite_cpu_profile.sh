#!/usr/bin/env bash
# Runs every CTest of a build alone, one after another, and records for each its wall time
# and the CPU time the whole machine spent while it ran (from /proc/stat, so daemons and
# re-parented processes count too). cores = CPU seconds / wall seconds says how many of
# ctest's slots (PROCESSORS) the test really occupies; tests/test_cores.cmake is set from it.
#
#   tools/suite_cpu_profile.sh [build-dir] [out.tsv] [ctest selection args...]
#   e.g. tools/suite_cpu_profile.sh build /tmp/profile.tsv -L quick
#
# Run it on an otherwise idle machine: anything else running is counted against the test.
set -euo pipefail
build=${1:-build}
out=${2:-suite_cpu_profile.tsv}
shift $(( $# > 2 ? 2 : $# ))
hz=$(getconf CLK_TCK)

busy_jiffies() {  # all CPUs' non-idle time: user nice system irq softirq steal
  awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat
}

mapfile -t lines < <(ctest --test-dir "$build" -N "$@" | sed -n 's/^ *Test *#\([0-9]*\): \(.*\)$/\1 \2/p')
printf 'index\tname\tresult\twall_s\tcpu_s\tcores\n' > "$out"
for line in "${lines[@]}"; do
  idx=${line%% *}; name=${line#* }
  j0=$(busy_jiffies); t0=$(date +%s.%N)
  if ctest --test-dir "$build" -I "$idx,$idx" -Q >/dev/null 2>&1; then result=pass; else result=fail; fi
  t1=$(date +%s.%N); j1=$(busy_jiffies)
  awk -v i="$idx" -v n="$name" -v r="$result" -v t0="$t0" -v t1="$t1" -v j0="$j0" -v j1="$j1" -v hz="$hz" \
    'BEGIN{w=t1-t0; c=(j1-j0)/hz; printf "%s\t%s\t%s\t%.1f\t%.1f\t%.2f\n", i, n, r, w, c, (w>0?c/w:0)}' >> "$out"
  tail -n 1 "$out"
done
