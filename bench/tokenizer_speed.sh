#!/usr/bin/env bash
# Tokenizer speed: build/bin/tokenize against the gpt-3-encoder npm package's JavaScript
# encoder (Encoder.js under node), on the same file, each a single process with one
# thread of its own, run in turn (interleaved) REPS times; medians reported.
#   bench/tokenizer_speed.sh [REPS] [FILE]     (defaults: 5, the whole fortunes corpus)
# Both print the ids of every line; the outputs are checked to be identical. Each program
# also runs on an empty file, to measure its start-up (reading the vocabulary), so the
# table gives MB/s end to end and MB/s of encoding alone ((run - start-up) time). Times
# are wall clock and CPU (user + sys, all threads: node's GC helpers count).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
reps=${1:-5}
tok=$root/build/bin/tokenize
vocab=$root/third_party/gpt2
[[ -x $tok ]] || { echo "build $tok first: cmake --build build --target tokenize" >&2; exit 1; }
[[ -f $vocab/Encoder.js ]] || { echo "$vocab/Encoder.js missing: run tools/install_deps.sh" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [[ -n ${2:-} ]]; then
  cp "$2" "$work/text"
else
  find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '.*' ! -name '*.dat' ! -name '*.u8' \
    | LC_ALL=C sort | xargs cat > "$work/text"
fi
: > "$work/empty"
bytes=$(stat -c %s "$work/text")

run() {  # run NAME INPUT: appends "wall cpu" to $work/NAME.times
  local name=$1 input=$2 t
  local -a cmd
  if [[ $name == cpp* ]]; then cmd=("$tok" --tokenizer "$vocab" "$input"); else cmd=(node "$root/bench/tokenizer_speed.js" "$vocab" "$input"); fi
  t=$( { TIMEFORMAT='%R %U %S'; time "${cmd[@]}" > "$work/$name.out"; } 2>&1 )
  awk '{ printf "%.3f %.3f\n", $1, $2 + $3 }' <<< "$t" >> "$work/$name.times"
}
for ((r = 1; r <= reps; ++r)); do
  run cpp "$work/text"; run js "$work/text"; run cpp_empty "$work/empty"; run js_empty "$work/empty"
done
cmp -s "$work/cpp.out" "$work/js.out" || { echo "FAIL: tokenize and Encoder.js print different ids" >&2; exit 1; }

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
col() { awk -v c="$2" '{ print $c }' "$work/$1.times" | median; }
mb=$(awk -v b="$bytes" 'BEGIN { printf "%.3f", b / 1e6 }')
echo "file: $bytes bytes ($(wc -l < "$work/text") lines), $(wc -w < "$work/cpp.out") tokens; $reps runs each, interleaved; medians"
echo "both print identical ids"
printf '| %-28s | %8s | %8s | %8s | %8s | %10s | %10s | %11s |\n' program "wall s" "CPU s" "start s" "start CPU" "MB/s wall" "MB/s CPU" "encode MB/s"
printf '|%s|\n' "------------------------------|----------|----------|----------|----------|------------|------------|-------------"
declare -A enc
for p in cpp js; do
  w=$(col $p 1) c=$(col $p 2) sw=$(col ${p}_empty 1) sc=$(col ${p}_empty 2)
  enc[$p]=$(awk -v m="$mb" -v c="$c" -v s="$sc" 'BEGIN { printf "%.2f", m / (c - s) }')
  name=$([[ $p == cpp ]] && echo "build/bin/tokenize" || echo "Encoder.js (node $(node --version))")
  printf '| %-28s | %8.3f | %8.3f | %8.3f | %8.3f | %10.2f | %10.2f | %11s |\n' "$name" "$w" "$c" "$sw" "$sc" \
    "$(awk -v m="$mb" -v t="$w" 'BEGIN { print m / t }')" "$(awk -v m="$mb" -v t="$c" 'BEGIN { print m / t }')" "${enc[$p]}"
  eval "${p}_w=$w ${p}_c=$c"
done
echo "speed-up (JavaScript time / C++ time): wall $(awk -v a="$js_w" -v b="$cpp_w" 'BEGIN { printf "%.1f", a / b }')x," \
     "CPU $(awk -v a="$js_c" -v b="$cpp_c" 'BEGIN { printf "%.1f", a / b }')x," \
     "encoding alone (CPU, start-up subtracted) $(awk -v a="${enc[cpp]}" -v b="${enc[js]}" 'BEGIN { printf "%.1f", a / b }')x"
