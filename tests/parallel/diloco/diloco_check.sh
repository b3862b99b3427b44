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
#   stop         2 emulated hosts x 2, H = 1000 (no round ends in 200 steps), so the
#                world agrees only on its cadence (--agree-every-s, train/agreement_cadence.h):
#                at 0.05 s each agreement takes the steps that fit in 0.05 s at the pace
#                since the one before (cadence_check.py: which steps agreed and how long
#                they took, from the metrics; the median stretch within [0.4, 1.5] of what
#                fits, at any machine's speed or load), with 0 one per step, the same bits
#                either way; SIGTERM to rank 3 in step 20 stops every rank at the first
#                agreement after it, when the cadence said (not a round end), exit 75, and
#                --auto-resume goes on from there to the uninterrupted run's bits.
#   buffers      what crosses between the groups between round ends, per model (issue 61):
#                2 emulated hosts x 1 rank, H = 1000 (no round end in the run), mlp, gpt
#                and resnet18 (BatchNorm buffers), then resnet18 --sync-bn on 2 hosts x 2;
#                rank 0's bytes to and from the other host (other_hosts_bytes in the
#                metrics, comm/traffic.h) over steps 10-40 are bounded by the collectives
#                that may cross there: the agreements (the final line's count) and the
#                3 loss reports, 64 bytes each (32 measured). Rank 0 broadcasting its
#                buffers over the world was 38 KB a step for ResNet-18 (SyncBatchNorm
#                reducing over it too, on 2 x 2: 300 KB). At the run's end (its outer
#                step, which averages the groups' buffers) every rank holds the same
#                parameters and buffers.
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
  stop)
    export COMM_FAKE_HOSTS=2
    dl=(--backend tcp --model mlp --optimizer adamw --lr 1e-3 --lr-schedule constant --batch-size 32 --no-shuffle
        --log-every 1 --max-eval-samples 128 --strategy diloco --inner-steps 1000 --steps 200)
    run ref "$bin/launch" -n 4 "$bin/train" "${dl[@]}" --agree-every-s 0.05
    run every "$bin/launch" -n 4 "$bin/train" "${dl[@]}" --agree-every-s 0
    cmp_runs ref every --rtol 0 > "$work/c.log" || { cat "$work/c.log"; fail "the agreement's cadence changed the training"; }
    few=$(final_field ref agreements) all=$(final_field every agreements)
    ((all == 200)) || fail "--agree-every-s 0 agreed $all times in 200 steps, not before every step"
    cadence=$(/usr/bin/python3 "$(dirname "$0")/cadence_check.py" "$work/ref.jsonl" 0.05 "$few") || fail "${cadence#FAIL: }"
    rc=0
    "$bin/launch" -n 4 "$bin/train" "${dl[@]}" --agree-every-s 0.05 --checkpoint-dir "$work/st" --auto-resume \
      --debug-signal "3:20:forward:TERM" --metrics-out "$work/st.1.jsonl" > "$work/st.1.log" 2>&1 || rc=$?
    [[ $rc -eq 75 ]] || { cat "$work/st.1.log"; fail "the signalled DiLoCo job exited $rc, not 75"; }
    at=$(num "$(sed -En 's/.*stopped by a signal after step ([0-9]+): checkpoint in.*/\1/p' "$work/st.1.log" | head -1)" "the stop step")
    ((at < 200)) || fail "stopped after step $at: the run's end, not the signal, stopped it"
    stop=$(/usr/bin/python3 "$(dirname "$0")/cadence_check.py" "$work/st.1.jsonl" 0.05 0 20 "$at") || fail "${stop#FAIL: }"
    [[ $(cat "$work/st/latest") == "step_$at" ]] || fail "latest is '$(cat "$work/st/latest")', not step_$at"
    "$bin/launch" -n 4 "$bin/train" "${dl[@]}" --agree-every-s 0.05 --checkpoint-dir "$work/st" --auto-resume \
      --debug-signal "3:20:forward:TERM" > "$work/st.2.log" 2>&1 || { cat "$work/st.2.log"; fail "the resumed run failed"; }
    grep -q "auto-resume: continuing from step $at of" "$work/st.2.log" || { cat "$work/st.2.log"; fail "the resume did not start at step $at"; }
    rel_within ref st 0 || { cat "$work/cmp_ref_st.log"; fail "stopped after step $at and resumed: not bitwise the uninterrupted run"; }
    echo "at --agree-every-s 0.05: $cadence; $all at 0 (same bits)"
    echo "SIGTERM to rank 3: $stop; exit 75 (mid-round), resumed to the uninterrupted run's bits" ;;
  buffers)
    export COMM_FAKE_HOSTS=2
    dl=(--backend tcp --strategy diloco --inner-steps 1000 --steps 40 --log-every 10 --no-shuffle --lr-schedule constant
        --max-eval-samples 64)
    # Rank 0's other_hosts_bytes in the metrics line of step $2 of run $1.
    at_step() { num "$(grep "\"step\":$2," "$work/$1.jsonl" | sed -En 's/.*"other_hosts_bytes":([0-9]+).*/\1/p')" "$1's other_hosts_bytes at step $2"; }
    summary=""
    for spec in "mlp 2 --model mlp --batch-size 16" \
                "gpt 2 --model gpt --dataset text --gpt-layers 1 --gpt-dim 32 --gpt-heads 2 --seq-len 32 --batch-size 4" \
                "resnet18 2 --model resnet18 --batch-size 4" \
                "resnet18_sync_bn 4 --model resnet18 --batch-size 2 --sync-bn"; do
      read -r name np args <<< "$spec"
      # shellcheck disable=SC2086
      run "$name" "$bin/launch" -n "$np" "$bin/train" "${dl[@]}" $args --debug-state-dump "$work/$name.dump"
      grep -q "DiLoCo(H=1000, 2 groups of $((np / 2))" "$work/$name.log" || fail "$name: not 2 groups of $((np / 2))"
      agreements=$(final_field "$name" agreements)
      crossed=$(( $(at_step "$name" 40) - $(at_step "$name" 10) ))
      bound=$(( (agreements + 3) * 64 ))
      per_step=$(awk -v b="$crossed" 'BEGIN { printf "%.1f", b / 30 }')
      echo "$name: $crossed bytes crossed between the hosts in steps 11-40 ($per_step a step; bound $bound: $agreements agreements + 3 loss reports)"
      ((crossed <= bound)) || fail "$name: $crossed bytes ($per_step a step) crossed between the groups between round ends, over the $bound the agreements and loss reports may take"
      for ((r = 1; r < np; r++)); do
        "$bin/compare_runs" --model "$work/$name.dump.rank0.safetensors" "$work/$name.dump.rank$r.safetensors" --rtol 0 > "$work/$name.cmp$r" ||
          { cat "$work/$name.cmp$r"; fail "$name: rank $r's parameters or buffers differ from rank 0's after the run's outer step"; }
      done
      summary+=" $name $per_step B/step;"
    done
    echo "between round ends, bytes crossing between the groups:$summary every rank's buffers equal at the end" ;;
  *) fail "unknown scenario $scenario" ;;
esac
