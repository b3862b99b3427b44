#!/usr/bin/env bash
# docs.commands_selftest: docs.commands can fail. Its runner must fail, naming the file
# and line, on a documented command with a renamed flag (in a scratch document, and in a
# copy of docs/usage.md whose --batch-size is renamed --batchsize, as a rename in the
# programs would leave the docs); must count a skip as skipped, not passed; must fail
# when nothing ran or a marker selects nothing; must not run an output (```text) fence.
# usage: selftest.sh RUNNER REPO BUILD   (a few seconds: every command that runs fails
# at option parsing, or prints --help)
set -uo pipefail
runner=$1 repo=$2 build=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; echo "--- runner output:"; cat "$work/out"; exit 1; }
runner() { /usr/bin/python3 "$runner" --repo "$repo" --build "$build" "$@" > "$work/out" 2>&1; }
fence='```'

# 1. A renamed flag fails, and the report names the file and line.
cat > "$work/renamed.md" << EOF
# renamed flag
$fence
build/bin/train --help
build/bin/train --no-such-flag
$fence
EOF
runner --only "$work/renamed.md" && fail "a command with --no-such-flag passed"
grep -qx "FAILED: $work/renamed.md:4" "$work/out" || fail "the report does not name $work/renamed.md:4"
grep -q -- "--no-such-flag" "$work/out" || fail "the program's error is not shown"
grep -q "^2 run, 1 passed" "$work/out" || fail "expected 2 run, 1 passed"

# 2. A skipped command is counted as skipped, not passed; a text fence never runs.
cat > "$work/skips.md" << EOF
<!-- docs-test: skip a self-test's reason -->
$fence
build/bin/train --no-such-flag
$fence
${fence}text
build/bin/train --no-such-flag
$fence
$fence
build/bin/train --help
$fence
EOF
runner --only "$work/skips.md" || fail "skips.md: a skipped or output-only bad command failed the run"
grep -q "^1 run, 1 passed, 1 skipped (a self-test's reason: 1)" "$work/out" || fail "skips.md: wrong counts"

# 3. Nothing ran (all skipped): a failure, since nothing was checked.
head -4 "$work/skips.md" > "$work/all_skipped.md"
runner --only "$work/all_skipped.md" && fail "a run where every command was skipped passed"

# 4. A marker that selects no command is an error: markers cannot drift either.
sed 's/skip a self-test/skip "no-such-text" a self-test/' "$work/skips.md" > "$work/stale.md"
runner --only "$work/stale.md" && fail "a marker selecting nothing passed"
grep -q "stale.md:1: marker \"no-such-text\" selects no command" "$work/out" || fail "stale marker not named"

# 5. docs/usage.md's own commands (the page of how to run things), with --batch-size
# renamed: every one fails, named by the copy's line (only those commands run: --grep).
sed 's/--batch-size/--batchsize/g' "$repo/docs/usage.md" > "$work/usage.md"
runner --only "$work/usage.md" --grep=--batchsize && fail "usage.md with --batchsize passed"
failed=$(sed -n "s|^FAILED: $work/usage.md:\([0-9]*\)$|\1|p" "$work/out")
[[ -n $failed ]] || fail "no FAILED line names the usage.md copy"
for line in $failed; do
  sed -n "${line}p" "$work/usage.md" | grep -q -- --batchsize || fail "usage.md copy line $line has no --batchsize"
done
grep -q "^[1-9][0-9]* run, 0 passed" "$work/out" || fail "a usage.md command with --batchsize passed"
grep -q "unrecognised option '--batchsize'" "$work/out" || fail "the failures are not the renamed flag's"
echo "PASS: the runner fails on renamed flags ($(wc -w <<< "$failed") docs/usage.md commands: lines $(echo $failed)), counts skips apart, refuses empty runs and stale markers"
