#!/usr/bin/env bash
# gpt2_gpu_summary.sh: one line for our GPT-2 run on a GPU (gpu_verify.sh's llmc step), in
# the form of tools/llmc_summary.sh's line for llm.c, measured the same way:
#   ours tokens_per_s=N card=NAME B=16 T=1024 precision=bf16 steps=N ms_per_step=X mfu=F peak_mib=N loss_first=X loss_last=X
# tokens_per_s = world * B * T * 1000 / (mean ms of the steps after the first), the step
# times read from train's --metrics-out file (samples_per_s of each step, logged every
# step); the first step is warm-up (cuBLASLt plans, allocations) as llm.c leaves out its
# own. mfu = tokens_per_s * FLOPs per token / the card's dense bf16 peak, with llm.c's
# FLOPs per token for GPT-2 (6 N for the weights' products, N = 124,439,808 parameters for
# 124M, plus 6 L T C for attention's two T x T products, forward and backward: 12 x 1024 x
# 768 here) and the peak from NVIDIA's datasheets (dense, without sparsity): H100/H200 SXM
# 989.4 TFLOPS, H100 PCIe 756 TFLOPS; another card gives mfu=unknown. peak_mib: the
# largest memory.used nvidia-smi sampled during the run (every 200 ms; the same sampling
# as llm.c's line).
#   usage: tools/gpt2_gpu_summary.sh METRICS_JSONL LOG B T PRECISION WORLD [SMI_SAMPLES]
set -euo pipefail
metrics=$1 log=$2 B=$3 T=$4 precision=$5 world=$6 smi=${7:-}
[[ -r $metrics ]] || { echo "gpt2_gpu_summary: cannot read $metrics" >&2; exit 1; }
card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr ' ' '_')
peak=unknown
[[ -n $smi && -s $smi ]] && peak=$(sort -n "$smi" | tail -1)
grep -q "^final:.* device=cuda " "$log" || { echo "gpt2_gpu_summary: $log has no final line with device=cuda" >&2; exit 1; }
awk -v B="$B" -v T="$T" -v world="$world" -v card="${card:-unknown}" -v precision="$precision" -v peak="$peak" '
  function field(name,   m) {
    if (match($0, "\"" name "\":[-+0-9.eE]+")) return substr($0, RSTART + length(name) + 3, RLENGTH - length(name) - 3)
    return ""
  }
  /"samples_per_s"/ {
    sps = field("samples_per_s"); loss = field("loss")
    if (sps == "" || sps + 0 <= 0) next
    ++steps
    if (steps == 1) loss_first = loss; else { sum_ms += world * B / sps * 1000; timed++ }
    loss_last = loss
  }
  END {
    if (timed < 1) { print "gpt2_gpu_summary: " steps + 0 " step(s) in the metrics; need 2 (the first is warm-up)" > "/dev/stderr"; exit 1 }
    ms = sum_ms / timed
    tps = world * B * T * 1000 / ms
    flops_per_token = 6 * 124439808 + 6 * 12 * T * 768
    peak_flops = 0
    if (card ~ /H100/ && card ~ /PCIe/) peak_flops = 756e12
    else if (card ~ /H100/ || card ~ /H200/) peak_flops = 989.4e12
    mfu = peak_flops > 0 ? sprintf("%.3f", tps * flops_per_token / peak_flops) : "unknown"
    printf "ours tokens_per_s=%.0f card=%s B=%d T=%d precision=%s steps=%d ms_per_step=%.2f mfu=%s peak_mib=%s loss_first=%s loss_last=%s\n",
      tps, card, B, T, precision, steps, ms, mfu, peak, loss_first, loss_last
  }' "$metrics"
