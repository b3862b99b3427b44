#!/usr/bin/env bash
# llmc_data writes llm.c's GPT-2 token files: a 256-int32 header (magic 20240520,
# version 1, token count, zeros) and uint16 tokens equal to what build/bin/tokenize gives
# for each document, each preceded by <|endoftext|> (50256), split as documented (val:
# documents 3 and 7 of 8 at --val-fraction 0.25); the file size agrees with the count.
# Bad input fails with a message naming the problem: a missing file, an empty corpus, a
# split under --min-tokens, and a token id above 65535 (a vocabulary built here with
# one token at id 65600).
#   llmc_data.sh <bin dir>
set -uo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

printf '%s\n' "Hello world" "The quick brown fox jumps over the lazy dog." "It's 3:14 — π ≈ 3.14159" \
  "  leading spaces and trailing   " "Numbers 1234567 and symbols #@!" "A fortune a day." \
  "naïve café déjà vu" "Last line, held out." >"$work/docs.txt"
out=$("$bin/llmc_data" --input "$work/docs.txt" --format lines --val-fraction 0.25 --out "$work/d" 2>&1) ||
  fail "llmc_data on a good file: $out"
echo "$out"
# The independent path: tokenize's ids of each line (document), <|endoftext|> before each.
"$bin/tokenize" "$work/docs.txt" >"$work/ids.txt" || fail "tokenize"
python3 - "$work" <<'EOF' || fails=$((fails + 1))
import struct, sys, os
work = sys.argv[1]
lines = open(f"{work}/ids.txt").read().split("\n")[:-1]
docs = [[int(t) for t in l.split()] for l in lines]
assert len(docs) == 8, len(docs)
want = {"train": [], "val": []}
for i, ids in enumerate(docs):
    want["val" if i in (3, 7) else "train"] += [50256] + ids
bad = 0
for split, toks in want.items():
    path = f"{work}/d_{split}.bin"
    data = open(path, "rb").read()
    header = struct.unpack("<256i", data[:1024])
    n = len(data[1024:]) // 2
    got = list(struct.unpack(f"<{n}H", data[1024:1024 + 2 * n]))
    problems = []
    if header[0] != 20240520: problems.append(f"magic {header[0]} != 20240520")
    if header[1] != 1: problems.append(f"version {header[1]} != 1")
    if header[2] != len(toks): problems.append(f"token count {header[2]} != {len(toks)}")
    if any(header[3:]): problems.append("header[3:] not all zero")
    if len(data) != 1024 + 2 * header[2]: problems.append(f"size {len(data)} != 1024 + 2 * {header[2]}")
    if got != toks: problems.append(f"tokens differ from tokenize's: first {got[:8]} want {toks[:8]}")
    if os.path.exists(path + ".tmp"): problems.append("temporary file left behind")
    for p in problems: print(f"FAIL: {split}: {p}")
    if not problems: print(f"ok: {split}: header and {len(toks)} tokens equal tokenize's")
    bad += len(problems)
sys.exit(1 if bad else 0)
EOF

expect() {  # expect <message regex> -- llmc_data args...
  local want=$1; shift 2
  local out; out=$(timeout 60 "$bin/llmc_data" "$@" 2>&1); local got=$?
  if [[ $got == 0 ]] || ! grep -Eq -- "$want" <<<"$out"; then
    fail "llmc_data $* -> exit $got, want an error matching '$want'; output:"; echo "$out" | head -5
  else
    echo "ok: llmc_data $* -> $(grep -E -- "$want" <<<"$out" | head -1)"
  fi
}
expect "$work/missing.txt: text corpus not found" -- --input "$work/missing.txt" --out "$work/x"
: >"$work/empty.txt"
expect "$work/empty.txt: no documents" -- --input "$work/empty.txt" --out "$work/x"
expect "the val split has [0-9]+ tokens \(2 of 8 documents\), fewer than --min-tokens 30" -- \
  --input "$work/docs.txt" --format lines --val-fraction 0.25 --min-tokens 30 --out "$work/x"
expect "--out PREFIX is required" -- --input "$work/docs.txt"
expect "--val-fraction .* is outside \(0, 1\)" -- --input "$work/docs.txt" --out "$work/x" --val-fraction 0

# A vocabulary with <|endoftext|> at 256, fillers, and the merge "a b" -> "ab" at id 65600.
mkdir -p "$work/big_vocab"
python3 - "$work/big_vocab" <<'EOF'
import json, sys
d = sys.argv[1]
bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs: bs.append(b); cs.append(256 + n); n += 1
vocab = {chr(c): i for i, c in enumerate(cs[j] for j in sorted(range(256), key=lambda j: bs[j]))}
vocab["<|endoftext|>"] = 256
for i in range(257, 65600): vocab[f"<f{i}>"] = i
vocab["ab"] = 65600
json.dump(vocab, open(f"{d}/vocab.json", "w"))
open(f"{d}/merges.txt", "w").write("#version: 0.2\na b\n")
EOF
printf '%s\n' "x" "ab" >"$work/docs_ab.txt"
expect "document 1 has token id 65600, above 65535" -- \
  --input "$work/docs_ab.txt" --format lines --tokenizer "$work/big_vocab" --out "$work/x" --val-fraction 0.5
[[ ! -e $work/x_train.bin && ! -e $work/x_val.bin ]] || fail "a refused run left $work/x_*.bin behind"

echo "$fails failure(s)"
exit $((fails > 0))
