#!/usr/bin/env bash
# Host<->device bytes per DDP step of a model on CUDA over a staged backend (tcp), read
# from train's final line (d2h_bytes_per_step, h2d_bytes_per_step: the model mirror's
# uploads/downloads plus the communicator's staging copies).
#   auto   (default) each gradient comes down once when final and is reduced on the
#          host: down 4P bytes per step (P parameters, fp32), up 4P (the parameters).
#   always device buckets staged by the backend: down 4P (staging) + 4P (the averaged
#          gradients), up 4P (staging) + 4P (parameters): three gradient crossings.
#   resident --optimizer-device cuda: the staging copies only (down 4P, up 4P) and, once,
#          the broadcast parameters before the first forward (up 4P over the 6 steps).
#   gpu_transfers.sh <bin dir>        (needs a GPU: run through tests/support/needs_gpu.sh)
set -euo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() {  # name, train flags...
  local name=$1; shift
  "$bin/launch" -n 2 "$bin/train" --backend tcp --device cuda --model mlp --steps 6 --log-every 3 \
    --max-eval-samples 256 "$@" > "$work/$name.log" 2>&1 || { cat "$work/$name.log"; exit 1; }
}
field() { sed -En "s/^(\[rank 0\] )?final:.* $2=([0-9]+).*/\2/p" "$work/$1.log"; }
run auto --device-buckets auto
run always --device-buckets always
run resident --optimizer-device cuda
p=$(sed -En 's/.*\| model +\| mlp \(([0-9]+) parameters.*/\1/p' "$work/auto.log")
[[ $p =~ ^[0-9]+$ ]] || { echo "FAIL: no parameter count in the box"; exit 1; }
b=$((4 * p))
for v in "auto d2h_bytes_per_step $b" "auto h2d_bytes_per_step $b" \
         "always d2h_bytes_per_step $((2 * b))" "always h2d_bytes_per_step $((2 * b))" \
         "resident d2h_bytes_per_step $b" "resident h2d_bytes_per_step $(((6 * b + b) / 6))"; do
  read -r mode key want <<< "$v"
  got=$(field "$mode" "$key")
  [[ $got =~ ^[0-9]+$ ]] || { echo "FAIL: $mode: no $key in the final line"; exit 1; }
  echo "$mode: $key = $got (expected $want, 4P = $b)"
  [[ $got == "$want" ]] || { echo "FAIL: $mode $key"; exit 1; }
done
echo "gradients cross PCIe once per step with host reduction, three times with staged device buckets," \
  "twice (the staging) when device-resident, where the parameters cross once in the run"
