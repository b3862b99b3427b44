#!/usr/bin/env bash
# BatchNorm under data parallelism and fp16 mixed precision (issue 18), one scenario per
# invocation:   bn_check.sh <bin dir> <scenario> [N]
#   buffers   ResNet-18 (BatchNorm), N ranks over tcp, 20 steps: every rank's buffers (dumped
#             after the final evaluation) are bitwise rank 0's with the default
#             broadcast_buffers, for DDP and ZeRO-2 and -3, and differ with
#             --no-broadcast-buffers while the parameters stay identical.
#   sync-bn   --sync-bn at N ranks (N = 2, 3) x batch 6/N == 1 rank x batch 6 over one
#             step (loss within 1e-4, parameter update within 1e-3 of its norm, running
#             statistics within 1e-4: bounds for any data, DATA_SEED=K tries others), and
#             plain BatchNorm at N ranks is not. SWITCH=1: 3 steps with the backend
#             switched from tcp to mpi after step 1 equal the run that stayed on tcp bit
#             for bit, and the bytes each backend carried prove the switch.
#   tutorial  the DDP tutorial's job, 12 steps: its sharded evaluation equals train_local's
#             evaluation of the model it saved.
set -euo pipefail
bin=$1 scenario=$2 n=${3:-2}
source "$(dirname "$0")/../support/check_lib.sh"
# ResNet-18 (imagenet stem) on Fashion-MNIST as stored (1x28x28): small batches keep it fast.
rcommon=(--model resnet18 --optimizer sgd --momentum 0.9 --lr 0.01 --lr-schedule constant --no-shuffle --log-every 1
         --max-eval-samples 64)
launch() { local np=$1; shift; "$bin/launch" -n "$np" "$bin/train" --backend tcp "$@"; }
# Compare rank r's dump of run $1 with rank 0's.
cmp_ranks() { "$bin/compare_runs" --model "$work/$1.dump.rank0.safetensors" "$work/$1.dump.rank$2.safetensors" --rtol 0; }
case $scenario in
  buffers)
    for z in 0 2 3; do
      run on$z launch "$n" "${rcommon[@]}" --steps 20 --batch-size 4 --zero $z --debug-state-dump "$work/on$z.dump"
      for ((r = 1; r < n; r++)); do cmp_ranks on$z $r; done
    done
    run off launch "$n" "${rcommon[@]}" --steps 20 --batch-size 4 --no-broadcast-buffers --debug-state-dump "$work/off.dump"
    grep -q "per rank (not broadcast)" "$work/off.log" || { echo "FAIL: the run does not say its buffers stay per rank"; exit 1; }
    for ((r = 1; r < n; r++)); do
      if cmp_ranks off $r > "$work/off.cmp$r"; then echo "FAIL: rank $r's buffers equal rank 0's without broadcasting"; exit 1; fi
      cat "$work/off.cmp$r"
      # Only running statistics differ: parameters are synchronized by the gradient average.
      if grep "differs" "$work/off.cmp$r" | grep -vqE "\.running_(mean|var) differs"; then echo "FAIL: more than running statistics differ"; exit 1; fi
      grep -q "running_mean differs" "$work/off.cmp$r" || { echo "FAIL: no running_mean differs"; exit 1; }
    done ;;
  sync-bn)
    # Random images in CIFAR-10's binary format (64 per file; DATA_SEED picks them, 0 by
    # default): Fashion-MNIST's zero background makes whole regions of equal activations,
    # where one rounding at a ReLU kink decides for thousands of elements at once.
    /usr/bin/python3 - "$work/cifar" "${DATA_SEED:-0}" <<'PY'
import os, random, sys
d = sys.argv[1]; os.makedirs(d); rng = random.Random(int(sys.argv[2]))
for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
    with open(os.path.join(d, name), "wb") as f:
        for _ in range(64): f.write(bytes([rng.randrange(10)]) + rng.randbytes(3072))
PY
    scommon=(--model resnet18 --optimizer sgd --momentum 0.9 --lr-schedule constant --no-shuffle --log-every 1
             --max-eval-samples 64 --dataset cifar10 --data-dir "$work/cifar" --model-seed 4)
    if [[ ${SWITCH:-} == 1 ]]; then
      # The backend switched after step 1 of 3 (tcp -> mpi, under mpiexec): the
      # SyncBatchNorm collectives follow the trainer's communicator (the bytes say so),
      # and the run is bit for bit the one that stayed on tcp (ring algorithms on both).
      run stayed mpi "$n" "${scommon[@]}" --lr 0.002 --steps 3 --batch-size $((6 / n)) --sync-bn --backend tcp --algo ring
      run switched mpi "$n" "${scommon[@]}" --lr 0.002 --steps 3 --batch-size $((6 / n)) --sync-bn --backend tcp --algo ring --switch-backend 1:mpi
      grep -q "SyncBatchNorm" "$work/switched.log" || { echo "FAIL: the run does not say SyncBatchNorm"; exit 1; }
      switch_traffic switched tcp mpi 1 3
      cmp_runs stayed switched --rtol 0
      exit 0
    fi
    # 1 rank x 6 against N ranks x 6/N with SyncBatchNorm: one step, the same arithmetic
    # in another order. The bound is on what the step did: the updates (parameters minus
    # the common start) differ by at most 1e-3 of the update's norm, the running
    # statistics by 1e-4 and the loss by 1e-4 relative (measured over data seeds 0-9:
    # updates 1.0e-5 to 1.3e-5, statistics <= 4e-6, losses <= 1.6e-6), while plain
    # BatchNorm's update differs by more than half of it (measured 4.8 to 13). One step,
    # because from the second on the gradient is taken at parameters that already differ
    # by rounding, and some data amplify that: the same runs' updates differ by 4e-3 after
    # 2 steps on 2 seeds of 10 and the losses by 6e-4 after 3 (a fixed 3-step tolerance
    # held for one seed only: issue 25). docs/resnet.md.
    run init "$bin/train" "${scommon[@]}" --lr 0 --steps 1 --batch-size 6   # the start: a step of learning rate 0
    run single "$bin/train" "${scommon[@]}" --lr 0.002 --steps 1 --batch-size 6
    same_updates() {
      "$bin/compare_runs" --metrics "$work/single.jsonl" "$work/$1.jsonl" --rtol 1e-4 | grep "^losses" || { echo "FAIL: $1's losses"; exit 1; }
      "$(dirname "$0")/../support/update_diff.py" "$work/init/model.safetensors" "$work/single/model.safetensors" "$work/$1/model.safetensors" --max 1e-3 --buffers-rtol 1e-4 ||
        { echo "FAIL: $1's updates are not the global batch's"; exit 1; }
    }
    run sync launch "$n" "${scommon[@]}" --lr 0.002 --steps 1 --batch-size $((6 / n)) --sync-bn
    grep -q "SyncBatchNorm" "$work/sync.log" || { echo "FAIL: the run does not say SyncBatchNorm"; exit 1; }
    same_updates sync
    # Without SyncBatchNorm each rank normalises its own samples: not the same model.
    run plain launch "$n" "${scommon[@]}" --lr 0.002 --steps 1 --batch-size $((6 / n))
    "$(dirname "$0")/../support/update_diff.py" "$work/init/model.safetensors" "$work/single/model.safetensors" "$work/plain/model.safetensors" --min 0.5 ||
      { echo "FAIL: plain BatchNorm's updates are the global batch's"; exit 1; } ;;
  tutorial)
    # The DDP tutorial's job, shortened: ResNet-18 on Fashion-MNIST padded to 32x32 with
    # RandomCrop + flip, SGD lr 0.1 momentum 0.9 weight decay 1e-5, 12 steps of 8 per rank.
    # The held-out evaluation (sharded over the ranks, every rank with rank 0's buffers)
    # equals train_local's evaluation of the saved model on the same samples.
    run tut launch "$n" --model resnet18 --image-size 32 --augment crop-flip --optimizer sgd --lr 0.1 --momentum 0.9 \
      --weight-decay 1e-5 --lr-schedule constant --steps 12 --batch-size 8 --log-every 4 --max-eval-samples 200
    grep -q "1x32x32, augmentation crop-flip" "$work/tut.log" || { echo "FAIL: the input is not 1x32x32 with crop-flip"; cat "$work/tut.log"; exit 1; }
    line=$(grep -E "eval +step 12: " "$work/tut.log") || { echo "FAIL: no evaluation at step 12"; exit 1; }
    echo "$line"
    loss=$(num "$(sed -En 's/.*test_loss ([0-9.]+).*/\1/p' <<< "$line")" test_loss)
    acc=$(num "$(sed -En 's/.*test_acc ([0-9.]+).*/\1/p' <<< "$line")" test_acc)
    "$bin/train_local" --model resnet18 --image-size 32 --init-from "$work/tut/model.safetensors" --eval-only --max-eval-samples 200 \
      > "$work/local.log" 2>&1 || { cat "$work/local.log"; exit 1; }
    local_line=$(grep "eval-only:" "$work/local.log"); echo "$local_line"
    lloss=$(num "$(sed -En 's/.*loss ([0-9.]+) accuracy.*/\1/p' <<< "$local_line")" "train_local loss")
    lacc=$(num "$(sed -En 's/.*accuracy ([0-9.]+).*/\1/p' <<< "$local_line")" "train_local accuracy")
    # Equal up to the printed digits (the sum over the ranks' slices is added in another order).
    awk -v a="$acc" -v b="$lacc" -v l="$loss" -v m="$lloss" 'BEGIN { d = l - m; if (d < 0) d = -d; if (a != b || d > 6e-5 + 1e-6 * l) exit 1 }' ||
      { echo "FAIL: distributed evaluation ($loss, $acc) differs from the saved model's ($lloss, $lacc)"; exit 1; } ;;
  *) echo "unknown scenario $scenario"; exit 2 ;;
esac
