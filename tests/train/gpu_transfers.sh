#!/usr/bin/env bash
# Host<->device bytes per DDP step of a model on CUDA over a staged backend (tcp), read
# from train's final line (d2h_bytes_per_step, h2d_bytes_per_step: the model mirror's
# uploads/downloads plus the communicator's staging copies).
#   auto   (default) each gradient comes down once when final and is reduced on the
#          host: down 4P bytes per step (P parameters, fp32), up 4P (the parameters).
#   always device buckets staged by the backend: down 4P (staging) + 4P (the averaged
#          gradients), up 4P (staging) + 4P (parameters): three gradient crossings.
#   gpu_transfers.sh <bin dir>        (needs a GPU: run through tests/support/needs_gpu.sh)
set -euo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() {
  "$bin/launch" -n 2 "$bin/train" --backend tcp --device cuda --model mlp --steps 6 --log-every 3 \
    --max-eval-samples 256 --device-buckets "$1" > "$work/$1.log" 2>&1 || { cat "$work/$1.log"; exit 1; }
}
field() { sed -En "s/^(\[rank 0\] )?final:.* $2=([0-9]+).*/\2/p" "$work/$1.log"; }
run auto
run always
p=$(sed -En 's/.*\| model +\| mlp \(([0-9]+) parameters.*/\1/p' "$work/auto.log")
[[ $p =~ ^[0-9]+$ ]] || { echo "FAIL: no parameter count in the box"; exit 1; }
b=$((4 * p))
for v in "auto d2h_bytes_per_step $b" "auto h2d_bytes_per_step $b" \
         "always d2h_bytes_per_step $((2 * b))" "always h2d_bytes_per_step $((2 * b))"; do
  read -r mode key want <<< "$v"
  got=$(field "$mode" "$key")
  [[ $got =~ ^[0-9]+$ ]] || { echo "FAIL: $mode: no $key in the final line"; exit 1; }
  echo "$mode: $key = $got (expected $want = $((want / b)) x 4P, P = $p)"
  [[ $got == "$want" ]] || { echo "FAIL: $mode $key"; exit 1; }
done
echo "gradients cross PCIe once per step with host reduction, three times with staged device buckets"
