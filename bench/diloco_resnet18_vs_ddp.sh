#!/usr/bin/env bash
# ResNet-18 (imagenet stem, BatchNorm) on Fashion-MNIST: DiLoCo on 2 emulated hosts x 2
# ranks (COMM_FAKE_HOSTS=2, inner groups = hosts) against DDP on the same 4 ranks, the
# same samples (steps x batch x ranks, same seed and order), then the held-out accuracy
# of both on all 10,000 test images, and the bytes that crossed between the hosts
# (rank 0's other_hosts_bytes in the metrics, comm/traffic.h: what rank 0 sent to and
# received from ranks of the other host) in total, per round end, and between round ends.
# On one machine: the links do not matter here, the accuracy does.
#   bench/diloco_resnet18_vs_ddp.sh [BIN_DIR] [OUT.txt]
#   env: STEPS=300 BATCH=16 H=50 LR=1e-3 OUTER="0.7:0.5" (lr:Nesterov momentum)
set -euo pipefail
bin=$(cd "${1:-build/bin}" && pwd)
out=${2:-/dev/null}
STEPS=${STEPS:-300} BATCH=${BATCH:-16} H=${H:-50} LR=${LR:-1e-3} OUTER=${OUTER:-0.7:0.5}
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # nproc would report OMP_NUM_THREADS
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 COMM_FAKE_HOSTS=2
work=$(mktemp -d /tmp/diloco_resnet.XXXXXX)
trap 'rm -rf "$work"' EXIT
common=(--backend tcp --model resnet18 --steps "$STEPS" --batch-size "$BATCH" --optimizer adamw --lr "$LR"
        --lr-schedule constant --log-every 1 --max-eval-samples 0 --seed 1)
diloco=(--strategy diloco --inner-steps "$H" --outer-lr "${OUTER%:*}" --outer-momentum "${OUTER#*:}")
field() { sed -nE "s/^(\[rank 0\] )?final:.* $1=([^ ]+).*/\2/p" "$2" | tail -1; }
bytes_at() { grep -m1 "\"step\":$2," "$1" | sed -nE 's/.*"other_hosts_bytes":([0-9]+).*/\1/p'; }
{
  echo "ResNet-18 on Fashion-MNIST: DiLoCo (2 emulated hosts x 2 ranks) vs DDP (4 ranks), same samples ($(date -u +%Y-%m-%d))"
  echo "CPU: $(sed -nE 's/^model name\s*:\s*//p' /proc/cpuinfo | head -1), $cores cores; commit $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo ?)"
  echo "command: STEPS=$STEPS BATCH=$BATCH H=$H LR=$LR OUTER=$OUTER nice -n 10 bench/diloco_resnet18_vs_ddp.sh build/bin OUT"
  echo "common flags (launch -n 4, COMM_FAKE_HOSTS=2): ${common[*]}"
  echo "DiLoCo adds: ${diloco[*]} (inner groups: the hosts)"
  echo "samples trained: $STEPS steps x $BATCH x 4 ranks = $((STEPS * BATCH * 4)); held out: all 10,000 test images"
  echo
} | tee -a "$out"
for run in ddp diloco; do
  flags=(); [[ $run == diloco ]] && flags=("${diloco[@]}")
  start=$(date +%s.%N)
  "$bin/launch" -n 4 "$bin/train" "${common[@]}" "${flags[@]}" --metrics-out "$work/$run.jsonl" > "$work/$run.log" 2>&1 ||
    { tail -n 20 "$work/$run.log"; echo "diloco_resnet18_vs_ddp.sh: $run failed" >&2; exit 1; }
  wall=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
  grep -m1 -E "^(\[rank 0\] )?\| (strategy|DDP buckets) " "$work/$run.log" |
    sed -E 's/^(\[rank 0\] )?\| (strategy|DDP buckets) +\| /\2: /; s/ +\|$//' | tee -a "$out" || true
  total=$(bytes_at "$work/$run.jsonl" "$STEPS")
  printf "%-6s test_acc %s test_loss %s final train loss %s; training %s s (wall %s s with the start and the evaluation); rank 0's bytes to/from the other host: %s (%.1f MiB)\n" \
    "$run" "$(field test_acc "$work/$run.log")" "$(sed -nE 's/.*eval  step [0-9]+: test_loss ([0-9.]+).*/\1/p' "$work/$run.log" | tail -1)" \
    "$(field loss "$work/$run.log")" "$(field time_s "$work/$run.log")" "$wall" "$total" "$(awk -v b="$total" 'BEGIN { print b / 1048576 }')" | tee -a "$out"
  if [[ $run == diloco ]]; then
    # Per round k (steps kH+1 .. (k+1)H): the bytes in its steps before the round's end
    # (between round ends: agreements and loss reports) and in its last step (the outer
    # exchange, the buffers' average, that step's agreement and loss report).
    line="diloco per round (between round ends | the round-end step):"
    for ((k = 0; (k + 1) * H <= STEPS; k++)); do
      a=0; ((k == 0)) || a=$(bytes_at "$work/$run.jsonl" $((k * H)))
      b=$(bytes_at "$work/$run.jsonl" $(((k + 1) * H - 1)))
      c=$(bytes_at "$work/$run.jsonl" $(((k + 1) * H)))
      line+=" $((b - a)) | $((c - b));"
    done
    echo "$line" | tee -a "$out"
    echo "(round 1's first figure includes the start: the rendezvous's checksums of the model and buffers)" | tee -a "$out"
  else
    per=$(( $(bytes_at "$work/$run.jsonl" "$STEPS") - $(bytes_at "$work/$run.jsonl" 1) ))
    echo "ddp per step (steps 2-$STEPS): $((per / (STEPS - 1))) bytes" | tee -a "$out"
  fi
done
