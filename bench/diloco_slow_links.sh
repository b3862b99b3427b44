#!/usr/bin/env bash
# DDP against DiLoCo across slow links: a small GPT (--model gpt, bytes of the fortunes
# corpus) on H emulated hosts x L ranks (bench/cluster.sh, every host's link shaped with
# TBF to each RATE), the same tokens for every variant (STEPS x batch x ranks). For each:
# the held-out loss, the training time (the final line's time_s, rank 0), the wall time of
# the whole job, and the bytes each host put on its link (eth0's tx counter, mean and
# largest over the hosts). DDP runs flat (ring over every rank), hierarchical, bf16 and
# PowerSGD; DiLoCo runs each H:OUTER_LR:OUTER_MOMENTUM[:OUTER_DTYPE] of DILOCO with the host as the
# inner group and the exchange blocking, and OVERLAP (the same, with the exchange
# overlapped over D inner steps; its final line's outer_hidden_frac: the share of the
# exchange's time the cores went on computing, against 0 when it blocks) and the world's
# agreements before a step (the final line's agreements=: every step under DDP, at round
# ends and about every --agree-every-s under DiLoCo).
#   bench/diloco_slow_links.sh BUILD_BIN [OUT.md]
#   env: HOSTS=4 LOCAL=2 RATES="100mbit 20mbit" STEPS=400 DILOCO="10:0.7:0.5 50:0.7:0.5 200:0.7:0.5 50:0.7:0.9"
#        OVERLAP="50:0.7:0.5:5" DDP="flat hierarchical bf16 powersgd" MODEL_ARGS=... BATCH=8 (see below)
# Needs root; exits 77 with the reason otherwise.
set -uo pipefail
bin=$(cd "${1:?usage: diloco_slow_links.sh BUILD_BIN [OUT.md]}" && pwd)
out=${2:-/dev/null}
source "$(cd "$(dirname "$0")" && pwd)/cluster.sh"
HOSTS=${HOSTS:-4} LOCAL=${LOCAL:-2} RATES=${RATES:-100mbit 20mbit} STEPS=${STEPS:-400} BATCH=${BATCH:-8}
DILOCO=${DILOCO:-10:0.7:0.5 50:0.7:0.5 200:0.7:0.5 50:0.7:0.9} OVERLAP=${OVERLAP:-50:0.7:0.5:5}
DDP=${DDP:-flat hierarchical bf16 powersgd}
read -r -a model_args <<< "${MODEL_ARGS:---model gpt --dataset text --gpt-layers 2 --gpt-dim 64 --gpt-heads 4 --seq-len 64}"
export COMM_JOB_TOKEN=diloco-slow-links-$$-secret COMM_RENDEZVOUS_TIMEOUT_S=60 COMM_TIMEOUT_S=600 OPENBLAS_NUM_THREADS=1
common=(--backend tcp "${model_args[@]}" --steps "$STEPS" --batch-size "$BATCH" --optimizer adamw --lr 2e-3 --lr-schedule cosine
        --log-every 100 --max-eval-samples 2000 --seed 1)
work=$(mktemp -d /tmp/diloco_slow.XXXXXX)
port=$((25000 + $$ % 20000))
{
  echo "## DiLoCo vs DDP: $HOSTS emulated hosts x $LOCAL ranks, $(nproc) cores, $(date -u +%Y-%m-%d)"
  echo
  echo "\`bench/diloco_slow_links.sh build/bin\` (HOSTS=$HOSTS LOCAL=$LOCAL STEPS=$STEPS BATCH=$BATCH DILOCO=\"$DILOCO\" OVERLAP=$OVERLAP):"
  echo "${model_args[*]}, batch $BATCH per rank, AdamW lr 2e-3 cosine, $STEPS steps = the same tokens for every row;"
  echo "DiLoCo rows: diloco-H<H>-<outer lr>-<outer Nesterov momentum>[-overlap<D>], the host as the inner group."
  echo "CPU: $(sed -nE 's/^model name\s*:\s*//p' /proc/cpuinfo | head -1)."
} | tee -a "$out"
for rate in $RATES; do
  cluster_down 2>/dev/null
  cluster_up "$HOSTS" "$rate" || exit $?
  {
    echo
    echo "### links at $rate"
    echo
    echo "| variant | held-out loss | vs DDP | train time s | job wall s | MiB sent per host (mean, max) | outer hidden | agreements |"
    echo "|---|---|---|---|---|---|---|---|"
  } | tee -a "$out"
  ref_loss=""
  variants=()
  for v in $DDP; do variants+=("ddp-$v"); done
  for d in $DILOCO; do variants+=("diloco-H${d//:/-}"); done
  for d in $OVERLAP; do variants+=("diloco-H$(cut -d: -f1-3 <<< "$d" | tr : -)-overlap${d##*:}"); done
  for v in "${variants[@]}"; do
    case $v in
      ddp-flat) extra=(--algo ring) ;;
      ddp-hierarchical) extra=(--algo hierarchical) ;;
      ddp-bf16) extra=(--algo hierarchical --grad-compress bf16) ;;
      ddp-powersgd) extra=(--algo hierarchical --grad-compress powersgd --powersgd-rank 4) ;;
      diloco-H*)  # diloco-H<H>-<lr>-<momentum>[-<bf16|fp16>|-overlap<D>]
        IFS=- read -r _ h lr mu ov <<< "$v"
        extra=(--strategy diloco --inner-steps "${h#H}" --outer-lr "$lr" --outer-momentum "$mu")
        case $ov in
          overlap*) extra+=(--outer-overlap-steps "${ov#overlap}") ;;
          ?*) extra+=(--outer-dtype "$ov") ;;
        esac ;;
    esac
    port=$((port + 1))
    tx0=()
    for ((i = 0; i < HOSTS; i++)); do tx0+=("$(cluster_tx_bytes $i)"); done
    t0=$(date +%s.%N)
    if ! cluster_launch "$bin" "$LOCAL" block "$port" "$work/$v" "$bin/train" "${common[@]}" "${extra[@]}"; then
      echo "| $v | failed: $(tail -1 "$work/$v.h0") |" | tee -a "$out"; continue
    fi
    wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b - a}')
    sent=()
    for ((i = 0; i < HOSTS; i++)); do sent+=($(($(cluster_tx_bytes $i) - tx0[i]))); done
    final=$(grep -h "final:" "$work/$v.h0" | head -1)
    get() { sed -nE "s/.* $1=([^ ]+).*/\1/p" <<< "$final"; }
    loss=$(get val_loss)
    [[ -z $ref_loss && $v == ddp-* ]] && ref_loss=$loss
    hidden=$(get outer_hidden_frac)
    awk -v v="$v" -v l="$loss" -v r="$ref_loss" -v t="$(get time_s)" -v w="$wall" -v hid="${hidden:--}" -v ag="$(get agreements)" -v s="${sent[*]}" 'BEGIN {
      n = split(s, b, " "); sum = 0; mx = 0
      for (i = 1; i <= n; i++) { sum += b[i]; if (b[i] > mx) mx = b[i] }
      printf "| %s | %.4f | %+.2f%% | %.1f | %.1f | %.3f, %.3f | %s | %s |\n", v, l, 100 * (l / r - 1), t, w, sum / n / 1048576, mx / 1048576, hid, ag }' |
      tee -a "$out"
  done
done
cluster_down
rm -rf "$work"
