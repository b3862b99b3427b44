#!/usr/bin/env bash
# build/bin/tokenize as a program: one output line per input line (empty lines, a last
# line without '\n', '\r' kept as text), exact --decode round trip, standard input, and
# the errors: missing or malformed vocabulary (file and line named), unknown or malformed
# ids (line named), --strict-utf8 (line and byte named); pipes, FIFOs and process
# substitution as FILE; the installed vocabulary when
# --tokenizer is not given; usage errors (exit 2, "(see tokenize --help)"), prefixes refused.
# Usage: tokenize_cli_test.sh TOKENIZE_BIN VOCAB_DIR
set -uo pipefail
tok=$1 vocab=$2
for f in encoder.json vocab.bpe; do
  [[ -f $vocab/$f ]] || { echo "FAIL: $vocab/$f is missing: run tools/install_deps.sh"; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
check() {  # check NAME GOT WANT
  if [[ "$2" == "$3" ]]; then echo "ok   $1"; else echo "FAIL $1: got [$2], want [$3]"; failures=$((failures + 1)); fi
}
expect_error() {  # expect_error NAME "PATTERN" CMD...: exit status 1 (2 for usage) and PATTERN in stderr
  local name=$1 pattern=$2 want_rc=1
  shift 2
  [[ $name == usage:* ]] && want_rc=2
  "$@" > "$work/out" 2> "$work/err"
  local rc=$?
  if [[ $rc -eq $want_rc ]] && grep -qF -- "$pattern" "$work/err"; then
    echo "ok   $name: $(head -n 1 "$work/err" | head -c 200)"
  else
    echo "FAIL $name: exit $rc, stderr [$(cat "$work/err")], want [$pattern]"
    failures=$((failures + 1))
  fi
}

# Lines: "Hello world" -> 15496 995; "foo\r" keeps its CR (201); the empty line stays; the
# last line has no '\n' and still gets one output line. (Ids from Encoder.js.)
printf 'Hello world\n\nfoo\r\nbar' > "$work/in.txt"
"$tok" --tokenizer "$vocab" "$work/in.txt" > "$work/ids" || failures=$((failures + 1))
check "ids per line" "$(cat "$work/ids")" $'15496 995\n\n21943 201\n5657'
check "one output line per input line" "$(wc -l < "$work/ids")" "4"
check "standard input" "$("$tok" --tokenizer "$vocab" < "$work/in.txt" | od -c)" "$(od -c < "$work/ids")"
check "- is standard input" "$("$tok" --tokenizer "$vocab" - < "$work/in.txt" | od -c)" "$(od -c < "$work/ids")"
"$tok" --tokenizer "$vocab" --decode "$work/ids" > "$work/back"
check "decode: the text back, CR included, newline added to the last line" \
      "$(od -c < "$work/back")" "$(printf 'Hello world\n\nfoo\r\nbar\n' | od -c)"
printf '' > "$work/empty"
check "empty input, empty output" "$("$tok" --tokenizer "$vocab" "$work/empty" | wc -c)" "0"

# A pipe, a FIFO or process substitution is a file argument like any other (they have no size
# to ask for; reading one by its size failed: "cannot determine file size").
check "a pipe as /dev/stdin" "$(echo "hello world" | "$tok" --tokenizer "$vocab" /dev/stdin)" "31373 995"
check "process substitution" "$("$tok" --tokenizer "$vocab" <(cat "$work/in.txt") | od -c)" "$(od -c < "$work/ids")"
mkfifo "$work/fifo"
cat "$work/in.txt" > "$work/fifo" &
check "a FIFO" "$("$tok" --tokenizer "$vocab" "$work/fifo" | od -c)" "$(od -c < "$work/ids")"
wait
check "--decode from a pipe" "$(cat "$work/ids" | "$tok" --tokenizer "$vocab" --decode /dev/stdin | od -c)" "$(od -c < "$work/back")"
expect_error "a directory is named as one" "$work: is a directory, expected a file" "$tok" --tokenizer "$vocab" "$work"

# Without --tokenizer: the installed vocabulary (VOCAB_DIR is it), as generate and train take it.
check "default --tokenizer: the installed one" "$("$tok" "$work/in.txt")" "$(cat "$work/ids")"

# Errors.
expect_error "usage: a flag's prefix is not the flag" "unrecognised option '--tok'" "$tok" --tok "$vocab" "$work/in.txt"
expect_error "usage: the short error points at --help" "(see tokenize --help)" "$tok" --bogus
expect_error "usage: one FILE at most" "unexpected argument '$work/b.txt': tokenize takes at most 1" "$tok" "$work/in.txt" "$work/b.txt"
expect_error "missing tokenizer directory" "$work/nope: tokenizer directory not found" \
  "$tok" --tokenizer "$work/nope" "$work/in.txt"
expect_error "missing input file" "$work/absent.txt: cannot open" "$tok" --tokenizer "$vocab" "$work/absent.txt"
mkdir "$work/half" && cp "$vocab/encoder.json" "$work/half/"
expect_error "encoder.json without vocab.bpe" "has encoder.json but not vocab.bpe" \
  "$tok" --tokenizer "$work/half" "$work/in.txt"
mkdir "$work/bad" && cp "$vocab/encoder.json" "$work/bad/"
sed '5s/$/ extra/' "$vocab/vocab.bpe" > "$work/bad/vocab.bpe"
expect_error "malformed merges line" "$work/bad/vocab.bpe: line 5: expected two tokens separated by a space, got 3" \
  "$tok" --tokenizer "$work/bad" "$work/in.txt"
printf '15496 995\n1 99999 2\n' > "$work/unknown.ids"
expect_error "unknown id" "$work/unknown.ids:2: token 2 (id 99999) is not in the vocabulary (ids 0..50256)" \
  "$tok" --tokenizer "$vocab" --decode "$work/unknown.ids"
printf '15496 995\n\n12 x4 5\n' > "$work/junk.ids"
expect_error "not an id" "$work/junk.ids:3: \"x4\" (column 4) is not a token id" \
  "$tok" --tokenizer "$vocab" --decode "$work/junk.ids"
printf 'fine\nab\xffc\n' > "$work/bad.txt"
expect_error "--strict-utf8" "$work/bad.txt:2: ill-formed UTF-8 at byte 3 of the line (file offset 7)" \
  "$tok" --tokenizer "$vocab" --strict-utf8 "$work/bad.txt"
check "without --strict-utf8, U+FFFD" "$("$tok" --tokenizer "$vocab" "$work/bad.txt" | tail -1)" \
      "$(printf 'ab\xef\xbf\xbdc\n' | "$tok" --tokenizer "$vocab")"

[[ $failures -eq 0 ]] && echo "tokenize CLI: all checks passed" || { echo "$failures checks failed"; exit 1; }
