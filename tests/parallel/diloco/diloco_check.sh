#!/usr/bin/env bash
# --strategy diloco (docs/diloco.md), one scenario per invocation:
#   diloco_check.sh <bin dir> <scenario>
#   equivalence  every rank its own worker, inner SGD without momentum, H = 1, outer lr 1,
#                no outer momentum: DiLoCo is DDP with the same SGD. 20 steps at 2 ranks,
#                the final parameters within relative L2 1e-6 of DDP's (fp32 rounding:
#                theta - (theta - lr g) is not lr g exactly); and the same run with outer
#                lr 0.9 must miss that bound (the comparison can fail).
#   resume       4 ranks as 2 emulated hosts x 2 (inner groups of 2, theta sharded over
#                them), H = 5, the exchange overlapped over 2 inner steps, checkpoints
#                every 7 steps: resumed from step 21 (an exchange in flight: begun after
#                step 20, applied after 22) and from step 14 (mid-round), each run on to
#                step 26 equals the uninterrupted run bit for bit; bf16 on the wire.
#   groups       the same job with --diloco-group host, 2 and 1 (4 ranks, 2 emulated
#                hosts): host and 2 are the same grouping (bitwise), 1 is another; tcp and
#                mpi give the same bits.
set -euo pipefail
bin=$1 scenario=$2
source "$(dirname "$0")/../../support/check_lib.sh"
fail() { echo "FAIL: $*"; exit 1; }
rel_within() {  # rel_within A B BOUND: compare_runs' relative L2 of the final models
  "$bin/compare_runs" --model "$work/$1/model.safetensors" "$work/$2/model.safetensors" --rtol "$3" > "$work/cmp_$1_$2.log" 2>&1
}
case $scenario in
  equivalence)
    sgd=(--backend tcp --model mlp --optimizer sgd --momentum 0 --lr 0.05 --lr-schedule constant --batch-size 32 --steps 20
         --no-shuffle --log-every 5 --max-eval-samples 256)
    one=(--strategy diloco --inner-steps 1 --outer-momentum 0 --diloco-group 1)
    run ddp "$bin/launch" -n 2 "$bin/train" "${sgd[@]}"
    run diloco "$bin/launch" -n 2 "$bin/train" "${sgd[@]}" "${one[@]}" --outer-lr 1
    rel_within ddp diloco 1e-6 || { cat "$work/cmp_ddp_diloco.log"; fail "DiLoCo at H=1, outer lr 1 differs from DDP beyond fp32 rounding"; }
    run wrong "$bin/launch" -n 2 "$bin/train" "${sgd[@]}" "${one[@]}" --outer-lr 0.9
    ! rel_within ddp wrong 1e-6 || fail "outer lr 0.9 also matched DDP: the comparison cannot fail"
    echo "DiLoCo (H=1, outer SGD lr 1) = DDP over 20 steps: $(grep "^parameters:" "$work/cmp_ddp_diloco.log")"
    echo "with outer lr 0.9 instead: $(grep "^parameters:" "$work/cmp_ddp_wrong.log")" ;;
  resume)
    export COMM_FAKE_HOSTS=2
    dl=(--backend tcp --model mlp --optimizer adamw --lr 1e-3 --weight-decay 0.01 --lr-schedule constant --batch-size 32
        --no-shuffle --log-every 1 --max-eval-samples 128 --strategy diloco --inner-steps 5 --outer-overlap-steps 2
        --outer-dtype bf16 --steps 26)
    run full "$bin/launch" -n 4 "$bin/train" "${dl[@]}" --save-every 7
    grep -q "strategy .*DiLoCo(H=5, 2 groups of 2, outer bf16, overlap 2)" "$work/full.log" || fail "the header does not show 2 groups of 2"
    [[ $(cat "$work/full/latest") == step_21 ]] || fail "the last checkpoint is not step_21"
    for from in 21 14; do
      mkdir -p "$work/r$from"
      cp -r "$work/full/step_$from" "$work/r$from/"
      echo "step_$from" > "$work/r$from/latest"
      ls "$work/r$from/step_$from" | grep -q "model.diloco.rank3.safetensors" || fail "no rank file for rank 3 in step_$from"
      run "r$from" "$bin/launch" -n 4 "$bin/train" "${dl[@]}" --resume
      head -1 "$work/r$from.jsonl" | grep -q "\"step\":$((from + 1))," || fail "the resume from $from did not go on at step $((from + 1))"
      rel_within full "r$from" 0 || { cat "$work/cmp_full_r$from.log"; fail "resumed from step $from: not bitwise the uninterrupted run"; }
    done
    # A checkpoint of another world is refused, naming what differs.
    if "$bin/launch" -n 2 "$bin/train" "${dl[@]}" --checkpoint-dir "$work/r14" --resume > "$work/other.log" 2>&1; then
      fail "a 4-rank DiLoCo checkpoint resumed at 2 ranks"
    fi
    grep -q "world_size 4 differs from this run's 2" "$work/other.log" || { tail -5 "$work/other.log"; fail "no clear refusal of the 2-rank resume"; }
    echo "DiLoCo resumed from step 21 (exchange in flight) and step 14 (mid-round): bitwise the uninterrupted run; a 2-rank resume is refused" ;;
  groups)
    export COMM_FAKE_HOSTS=2
    dl=(--model mlp --optimizer adamw --lr 1e-3 --lr-schedule constant --batch-size 32 --no-shuffle --log-every 1
        --max-eval-samples 128 --strategy diloco --inner-steps 4 --steps 12 --algo ring)
    run host "$bin/launch" -n 4 "$bin/train" --backend tcp "${dl[@]}" --diloco-group host
    run two "$bin/launch" -n 4 "$bin/train" --backend tcp "${dl[@]}" --diloco-group 2
    run one "$bin/launch" -n 4 "$bin/train" --backend tcp "${dl[@]}" --diloco-group 1
    run mpi mpi 4 --backend mpi "${dl[@]}" --diloco-group host
    grep -q "4 groups of 1" "$work/one.log" || fail "--diloco-group 1 did not make 4 groups of 1"
    cmp_runs host two --rtol 0 > "$work/c1.log" || { cat "$work/c1.log"; fail "--diloco-group host and 2 differ on 2 hosts x 2"; }
    cmp_runs host mpi --rtol 0 > "$work/c2.log" || { cat "$work/c2.log"; fail "tcp and mpi differ"; }
    ! rel_within host one 1e-4 || fail "4 workers of 1 rank trained like 2 workers of 2"
    echo "inner groups: host = 2 (bitwise), tcp = mpi (bitwise), 4 workers of 1 differ from 2 of 2: $(grep "^parameters:" "$work/cmp_host_one.log")" ;;
  *) fail "unknown scenario $scenario" ;;
esac
