#!/usr/bin/env bash
# DDP over slow links: the CNN on Fashion-MNIST at H emulated hosts x L ranks
# (bench/cluster.sh, round-robin numbering, every link shaped to RATE), steps/s and the
# final loss and accuracy with the gradients reduced by the flat ring, hierarchically,
# in bf16, and with PowerSGD (where train offers --grad-compress powersgd).
#   bench/ddp_slow_links.sh BUILD_BIN
#   env: HOSTS=4 LOCAL=2 RATE=1gbit STEPS=300 MODEL=cnn RANK_ORDER=cyclic VARIANTS="flat hierarchical bf16 powersgd"
# Needs root; exits 77 with the reason otherwise.
set -uo pipefail
bin=$(cd "${1:?usage: ddp_slow_links.sh BUILD_BIN}" && pwd)
source "$(cd "$(dirname "$0")" && pwd)/cluster.sh"
HOSTS=${HOSTS:-4} LOCAL=${LOCAL:-2} RATE=${RATE:-1gbit} STEPS=${STEPS:-300} MODEL=${MODEL:-cnn}
RANK_ORDER=${RANK_ORDER:-cyclic} VARIANTS=${VARIANTS:-flat hierarchical bf16 powersgd}
export COMM_JOB_TOKEN=ddp-slow-links-$$-secret COMM_RENDEZVOUS_TIMEOUT_S=60 OPENBLAS_NUM_THREADS=1
cluster_up "$HOSTS" "$RATE" || exit $?
work=$(mktemp -d /tmp/ddp_slow.XXXXXX)
port=$((25000 + $$ % 20000))
common=(--backend tcp --model "$MODEL" --steps "$STEPS" --batch-size 64 --lr 2e-3 --optimizer adam --max-eval-samples 2000)
echo "$MODEL, $HOSTS hosts x $LOCAL ranks ($RANK_ORDER numbering), links $RATE, $STEPS steps, batch 64 per rank"
printf '%-14s %10s %10s %10s %12s\n' variant steps/s loss test_acc "comm MiB/step"
for v in $VARIANTS; do
  case $v in
    flat) extra=(--algo ring) ;;
    hierarchical) extra=(--algo hierarchical) ;;
    bf16) extra=(--algo hierarchical --grad-compress bf16) ;;
    powersgd) extra=(--algo hierarchical --grad-compress powersgd --powersgd-rank 4) ;;
    *) echo "unknown variant $v"; exit 2 ;;
  esac
  port=$((port + 1))
  if ! cluster_launch "$bin" "$LOCAL" "$RANK_ORDER" "$port" "$work/$v" "$bin/train" "${common[@]}" "${extra[@]}"; then
    echo "$v: failed"; tail -3 "$work/$v".h*; continue
  fi
  final=$(grep -h "final:" "$work/$v.h0")
  get() { sed -nE "s/.* $1=([^ ]+).*/\1/p" <<< "$final"; }
  step_ms=$(get step_ms)
  printf '%-14s %10.2f %10s %10s %12s\n' "$v" "$(awk -v s="$step_ms" 'BEGIN{print 1000 / s}')" "$(get loss)" \
    "$(get test_acc)" "$(get comm_mib_per_step)"
done
rm -rf "$work"
