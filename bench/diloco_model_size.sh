#!/usr/bin/env bash
# DiLoCo's loss gap against DDP as the model grows, at the same tokens: for each GPT size
# (layers x width), DDP and DiLoCo (4 workers of 2 ranks, the inner group of
# bench/diloco_slow_links.sh's hosts) train the same 400 steps of the fortunes corpus,
# and the held-out losses are compared. Links do not matter here (losses are the same at
# any rate, bench/results/diloco/results.md), so every rank runs on this host; the point
# is the trend: the DiLoCo papers report the gap shrinking as models grow, and on 2 cores
# only small models fit a benchmark.
#   bench/diloco_model_size.sh BUILD_BIN [OUT.md]
#   env: SIZES="2:32:2 2:64:4 2:128:4 2:256:8" (layers:width:heads) STEPS=400 H=50
#        OUTER="0.7:0.5" (lr:Nesterov momentum) RANKS=8 GROUP=2 BATCH=8
set -uo pipefail
bin=$(cd "${1:?usage: diloco_model_size.sh BUILD_BIN [OUT.md]}" && pwd)
out=${2:-/dev/null}
SIZES=${SIZES:-2:32:2 2:64:4 2:128:4 2:256:8} STEPS=${STEPS:-400} H=${H:-50} OUTER=${OUTER:-0.7:0.5}
RANKS=${RANKS:-8} GROUP=${GROUP:-2} BATCH=${BATCH:-8}
export OPENBLAS_NUM_THREADS=1
work=$(mktemp -d /tmp/diloco_size.XXXXXX)
trap 'rm -rf "$work"' EXIT
common=(--backend tcp --model gpt --dataset text --seq-len 64 --steps "$STEPS" --batch-size "$BATCH" --optimizer adamw
        --lr 2e-3 --lr-schedule cosine --log-every 100 --max-eval-samples 2000 --seed 1)
field() { sed -nE "s/.*final:.* $1=([^ ]+).*/\1/p" "$2" | tail -1; }
{
  echo "## DiLoCo's gap against DDP by model size ($RANKS ranks, inner groups of $GROUP, H=$H, outer ${OUTER/:/ Nesterov }, $STEPS steps, $(date -u +%Y-%m-%d))"
  echo
  echo "\`bench/diloco_model_size.sh build/bin\` (SIZES=\"$SIZES\"), CPU: $(sed -nE 's/^model name\s*:\s*//p' /proc/cpuinfo | head -1), $(nproc) cores."
  echo
  echo "| layers x width | parameters | DDP held-out loss | DiLoCo held-out loss | gap | DDP s | DiLoCo s |"
  echo "|---|---|---|---|---|---|---|"
} | tee -a "$out"
for s in $SIZES; do
  IFS=: read -r layers dim heads <<< "$s"
  model=(--gpt-layers "$layers" --gpt-dim "$dim" --gpt-heads "$heads")
  "$bin/launch" -n "$RANKS" "$bin/train" "${common[@]}" "${model[@]}" > "$work/ddp.log" 2>&1 ||
    { tail -n 5 "$work/ddp.log"; echo "diloco_model_size.sh: DDP $s failed" >&2; exit 1; }
  "$bin/launch" -n "$RANKS" "$bin/train" "${common[@]}" "${model[@]}" --strategy diloco --inner-steps "$H" \
    --diloco-group "$GROUP" --outer-lr "${OUTER%:*}" --outer-momentum "${OUTER#*:}" > "$work/diloco.log" 2>&1 ||
    { tail -n 5 "$work/diloco.log"; echo "diloco_model_size.sh: DiLoCo $s failed" >&2; exit 1; }
  params=$(grep -oE "gpt \([0-9]+ parameters" "$work/ddp.log" | grep -oE "[0-9]+" | head -1)
  a=$(field val_loss "$work/ddp.log") b=$(field val_loss "$work/diloco.log")
  awk -v s="$layers x $dim" -v p="${params:-?}" -v a="$a" -v b="$b" -v ta="$(field time_s "$work/ddp.log")" \
      -v tb="$(field time_s "$work/diloco.log")" \
      'BEGIN { printf "| %s | %s | %.4f | %.4f | %+.2f%% | %.1f | %.1f |\n", s, p, a, b, 100 * (b / a - 1), ta, tb }' | tee -a "$out"
done
