#!/usr/bin/env bash
# llmc_summary.sh: one line from the output of llm.c's train_gpt2cu (the llm.c anchor,
# docs/gpu.md), for gpu_verify.sh's llmc step:
#   llmc tokens_per_s=N card=NAME B=16 T=1024 precision=bf16 steps=N ms_per_step=X llmc_last_tok_s=N loss_first=X loss_last=X
# Everything is read from the log, as llm.c printed what it ran: the card, B, T and the
# precision from its configuration table ("| device | ... |"), the timings from its step
# lines, printed by train_gpt2.cu as
#   step %4d/%d | loss %7.6f (%+.2fz)| norm %6.4f (%+.2fz)| lr %.2e | %.2f ms | %.1f%% bf16 MFU | %.0f tok/s
# tokens_per_s = total batch size (B*T without accumulation) * 1000 / (mean ms of the
# steps after the first): llm.c also leaves its first step out as warm-up (cuBLAS
# initialisation) in its own "total average iteration time"; its tok/s column is a
# moving average, given as llmc_last_tok_s for comparison.
# The card's spaces become '_' so that the line stays key=value. Exits 1 (with the reason)
# when the log has fewer than two step lines, e.g. llm.c failed.
#   usage: tools/llmc_summary.sh LOG
set -euo pipefail
log=${1:?usage: tools/llmc_summary.sh LOG}
[[ -r $log ]] || { echo "llmc_summary: cannot read $log" >&2; exit 1; }
awk '
  function table(line) { sub(/^\|[^|]*\| */, "", line); sub(/ *\| *$/, "", line); return line }
  /^\| device  / { card = table($0); gsub(/ /, "_", card) }
  /^\| precision  / { precision = tolower(table($0)) }
  /^\| micro batch size B  / { B = table($0) }
  /^\| sequence length T  / { T = table($0) }
  /^\| total batch size  / { total = table($0) }
  /^step +[0-9]+\/[0-9]+ \|/ {
    n = split($0, f, "|")
    split(f[2], loss, " "); split(f[5], ms, " "); split(f[7], tok, " ")
    if (ms[2] != "ms" || tok[2] != "tok/s" || n != 7) { bad = bad " [" $0 "]"; next }
    ++steps
    if (steps == 1) loss_first = loss[2]; else { sum_ms += ms[1]; timed++ }
    loss_last = loss[2]; last_tok = tok[1]
  }
  END {
    if (bad != "") { print "llmc_summary: step lines not in llm.c'"'"'s format:" bad > "/dev/stderr"; exit 1 }
    if (timed < 1) { print "llmc_summary: " steps + 0 " step line(s) in the log; need 2 (the first is warm-up)" > "/dev/stderr"; exit 1 }
    if (B == "" || T == "" || total == "") { print "llmc_summary: no B/T/total batch size in the log (llm.c configuration table missing)" > "/dev/stderr"; exit 1 }
    mean = sum_ms / timed
    printf "llmc tokens_per_s=%.0f card=%s B=%s T=%s precision=%s steps=%d ms_per_step=%.2f llmc_last_tok_s=%s loss_first=%s loss_last=%s\n",
      total * 1000 / mean, (card == "" ? "unknown" : card), B, T, (precision == "" ? "unknown" : precision),
      steps, mean, last_tok, loss_first, loss_last
  }' "$log"
