#!/usr/bin/env bash
# tools/llmc_summary.sh reads llm.c's train_gpt2cu output as llm.c prints it. No GPU ran
# llm.c here, so the sample log is printed with train_gpt2.cu's own format strings
# (its configuration table rows and its per-step printf, copied verbatim) and chosen
# numbers: step 1 (warm-up, 900 ms) is left out, steps 2-4 take 100, 110, 120 ms, so
# tokens_per_s = 16384 * 1000 / 110 = 148945. Also: a log whose run died before its
# second step, and a step line in another format, are refused with the reason.
#   llmc_summary.sh <tools dir>
set -uo pipefail
summary=$1/llmc_summary.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

table() { printf "| %-21s | %-50s |\n" "$1" "$2"; }
step() {  # step n ms loss tok/s : train_gpt2.cu's printf, verbatim
  printf "step %4d/%d | loss %7.6f (%+.2fz)| norm %6.4f (%+.2fz)| lr %.2e | %.2f ms | %.1f%% bf16 MFU | %.0f tok/s\n" \
    "$1" 4 "$3" 0 1.2345 0 0.0003 "$2" 41.5 "$4"
}
{
  echo "+-----------------------+----------------------------------------------------+"
  table "micro batch size B" 16
  table "sequence length T" 1024
  table "total batch size" 16384
  table "device" "NVIDIA H100 80GB HBM3"
  table "peak TFlops" 989.4
  table "precision" BF16
  echo "val loss 11.012345"
} >"$work/head.log"
{ cat "$work/head.log"; step 1 900 11.0 18204; step 2 100 10.5 163840; step 3 110 10.1 158000; step 4 120 9.75 150000
  echo "val loss 9.600000"; echo "total average iteration time: 110.000000 ms"; } >"$work/ok.log"

got=$(bash "$summary" "$work/ok.log" 2>&1) || fail "exit $? on a good log: $got"
want="llmc tokens_per_s=148945 card=NVIDIA_H100_80GB_HBM3 B=16 T=1024 precision=bf16 steps=4 ms_per_step=110.00 llmc_last_tok_s=150000 loss_first=11.000000 loss_last=9.750000"
[[ $got == "$want" ]] && echo "ok: $got" || fail "got  '$got'
  want '$want'"

{ cat "$work/head.log"; step 1 900 11.0 18204; echo "[CUDA ERROR] at file llmc/matmul.cuh:300"; } >"$work/died.log"
got=$(bash "$summary" "$work/died.log" 2>&1) && fail "a log with one step line passed: $got"
grep -q "1 step line(s) in the log; need 2" <<<"$got" && echo "ok: $got" || fail "died.log: $got"

{ cat "$work/ok.log"; echo "step    5/4 | loss 9.5 | 99.00 ms | 160000 tok/s"; } >"$work/other.log"
got=$(bash "$summary" "$work/other.log" 2>&1) && fail "a step line in another format passed: $got"
grep -q "step lines not in llm.c's format" <<<"$got" && echo "ok: ${got:0:80}..." || fail "other.log: $got"

echo "$fails failure(s)"
exit $((fails > 0))
