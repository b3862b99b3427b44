#!/usr/bin/env bash
# compare_runs on tiny hand-written inputs (metrics lines as train writes them: a NaN or
# inf loss is JSON null; safetensors from tests/support/st_io.py, numpy, independent of
# the C++ writer): identical runs match; a NaN/inf loss, a NaN/inf tensor element (even
# the same NaN on both sides at --rtol 0), a step or a tensor that one side lacks, and a
# step logged twice are each a MISMATCH (exit 1) whose message names it; --from-step S
# compares a run resumed after S with its reference.
#   compare_runs_selftest.sh COMPARE_RUNS
set -euo pipefail
cr=$(realpath -- "$1")
[[ -x $cr ]] || { echo "FAIL: no compare_runs at '$1'"; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

# Metrics: one line per step as train writes it (keys sorted), an eval line and the final line.
step() { echo "{\"comm_bytes\":0,\"epoch\":0,\"loss\":$2,\"lr\":0.001,\"samples_per_s\":1000.0,\"step\":$1,\"unix_time\":1.0}"; }
eval_line() { echo "{\"eval_loss\":2.0,\"eval_samples\":8,\"step\":$1,\"test_acc\":0.5}"; }
final() { echo "{\"eval_loss\":2.0,\"final\":true,\"loss\":$1,\"steps\":3}"; }
{ step 1 2.302585; step 2 2.1; step 3 1.9; eval_line 3; final 1.9; } > ref.jsonl
cp ref.jsonl same.jsonl
{ step 1 2.302585; step 2 null; step 3 1.9; final 1.9; } > nan_loss.jsonl
{ step 1 2.302585; step 2 2.1; step 3 NaN; final 1.9; } > py_nan_loss.jsonl       # Python's json.dumps
{ step 1 2.302585; step 3 1.9; eval_line 3; final 1.9; } > no_step2.jsonl
{ step 1 2.302585; step 2 2.1; step 3 1.9; step 4 1.8; final 1.8; } > extra_step4.jsonl
{ step 2 2.1; step 3 1.9; final 1.9; } > resumed_after1.jsonl
{ step 1 2.302585; step 2 2.1; step 2 2.1; step 3 1.9; final 1.9; } > twice.jsonl
{ step 1 2.302585; step 2 2.2; step 3 1.9; final 1.9; } > other_loss.jsonl
/usr/bin/python3 - "$here" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import st_io
w = np.arange(6, dtype=np.float32).reshape(2, 3) / 7
b = np.array([0.5, -0.25, 1.0], dtype=np.float32)
def save(name, **t):
    st_io.write(name, t)
save("ref.safetensors", w=w, b=b)
save("same.safetensors", w=w.copy(), b=b.copy())
save("nan_w.safetensors", w=np.where(np.arange(6).reshape(2, 3) == 4, np.float32("nan"), w).astype(np.float32), b=b)
save("inf_b.safetensors", w=w, b=np.array([0.5, np.inf, 1.0], dtype=np.float32))
save("no_b.safetensors", w=w)
save("extra_c.safetensors", w=w, b=b, c=np.zeros(2, dtype=np.float32))
save("moved_w.safetensors", w=(w * 1.01).astype(np.float32), b=b)
PY

fails=0
# expect WANT_RC 'REGEX' ARGS...: compare_runs ARGS exits WANT_RC and prints a line matching REGEX.
expect() {
  local want=$1 regex=$2 rc=0; shift 2
  "$cr" "$@" > out.txt 2>&1 || rc=$?
  if [[ $rc == "$want" ]] && grep -Eq -- "$regex" out.txt; then
    echo "ok: exit $rc, '$(grep -Em1 -- "$regex" out.txt)': $*"
  else
    echo "FAIL: compare_runs $*: exit $rc (want $want), output (want a line matching '$regex'):"; sed 's/^/  | /' out.txt
    fails=$((fails + 1))
  fi
}
m() { echo --metrics "$1.jsonl" "$2.jsonl"; }
p() { echo --model "$1.safetensors" "$2.safetensors"; }
# shellcheck disable=SC2046  # m and p print whitespace-free file names
{
  # Identical inputs match, bit for bit and with a tolerance.
  expect 0 '^MATCH$' $(m ref same) $(p ref same) --rtol 0
  expect 0 '^MATCH$' $(m ref same) $(p ref same) --rtol 1e-5
  # A NaN loss (train writes null; Python would write NaN), on one side or on both.
  expect 1 'loss at step 2 of nan_loss.jsonl .*NaN' $(m ref nan_loss) --rtol 1e-5
  expect 1 'loss at step 2 of nan_loss.jsonl .*NaN' $(m nan_loss nan_loss) --rtol 0
  expect 1 'loss at step 3 of py_nan_loss.jsonl' $(m ref py_nan_loss) --rtol 1e-5
  # A NaN or inf tensor element, on one side or the same NaN on both.
  expect 1 'tensor w in nan_w.safetensors has 1 non-finite element.*index 4: nan' $(p ref nan_w) --rtol 1e-5
  expect 1 'tensor w in nan_w.safetensors has 1 non-finite' $(p nan_w nan_w) --rtol 0
  expect 1 'tensor b in inf_b.safetensors has 1 non-finite element.*index 1: inf' $(p inf_b ref) --rtol 1e-5
  # A step one side lacks, either way round, and a step logged twice.
  expect 1 'step\(s\) 2 after 0 in ref.jsonl but not in no_step2.jsonl' $(m ref no_step2) --rtol 1e-5
  expect 1 'step\(s\) 2 after 0 in ref.jsonl but not in no_step2.jsonl' $(m no_step2 ref) --rtol 1e-5
  expect 1 'step\(s\) 4 after 0 in extra_step4.jsonl but not in ref.jsonl' $(m ref extra_step4) --rtol 1e-5
  expect 1 'step 2 is logged twice in twice.jsonl' $(m ref twice) --rtol 1e-5
  # A run resumed after step 1 against its reference: only with --from-step 1.
  expect 1 'step\(s\) 1 after 0 in ref.jsonl but not in resumed_after1.jsonl' $(m ref resumed_after1) --rtol 0
  expect 0 '^losses: 2 steps compared' $(m ref resumed_after1) --rtol 0 --from-step 1
  expect 1 'step\(s\) 2 after 1 in ref.jsonl but not in no_step2.jsonl' $(m ref no_step2) --rtol 0 --from-step 1
  # A tensor one side lacks, either way round.
  expect 1 'tensor b is in ref.safetensors but not in no_b.safetensors' $(p ref no_b) --rtol 1e-5
  expect 1 'tensor b is in ref.safetensors but not in no_b.safetensors' $(p no_b ref) --rtol 1e-5
  expect 1 'tensor c is in extra_c.safetensors but not in ref.safetensors' $(p ref extra_c) --rtol 1e-5
  # Real differences still count: a loss 5% off, a tensor 1% off.
  expect 1 'loss differs at step 2' $(m ref other_loss) --rtol 1e-3
  expect 1 'tensor w differs: relative L2 0.01' $(p ref moved_w) --rtol 1e-3
  expect 0 '^MATCH$' $(p ref moved_w) --rtol 0.02
  # Nothing to compare is a usage error, not a MATCH.
  expect 2 'nothing to compare' --rtol 0
}
if ((fails)); then echo "FAIL: $fails case(s)"; exit 1; fi
echo "PASS: compare_runs_selftest"
