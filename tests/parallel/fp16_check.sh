#!/usr/bin/env bash
# fp16 mixed precision with the dynamic loss scaler (issue 18; parallel/precision/loss_scaler.h), one
# scenario per invocation:   fp16_check.sh <bin dir> <scenario> [N]
#   skip     an inf injected into rank 1's synchronized gradient in step 5 (DDP: its copy of
#            the average; ZeRO-2: its own shard, which no other rank sees) makes every rank
#            skip step 5: each rank's parameters after 5 steps are bitwise those of a run
#            that stopped after step 4, the logged scale halves at step 5 and 1 step is
#            counted as skipped.
#   resume   stop at step 10 (checkpoint), resume to 20: the same losses and final model,
#            bit for bit, as the uninterrupted run, with a growth window (4) that puts the
#            scaler mid-window at the checkpoint and a skipped step before it.
# FP16_EXTRA: more train flags for every run (gpu.fp16.*: --device cuda, the same checks
# with the model on the GPU; *_resident: --optimizer-device cuda too, the scaler's
# unscale and check on the device). FP16_STAGES: the ZeRO stages skip runs (default 0 2;
# device-resident training is DDP only).
set -euo pipefail
bin=$1 scenario=$2 n=${3:-2}
source "$(dirname "$0")/../support/check_lib.sh"
fcommon=(--model mlp --optimizer sgd --momentum 0.9 --lr 0.05 --lr-schedule constant --no-shuffle --log-every 1
         --max-eval-samples 256 --batch-size 32 --backend tcp --precision fp16 --loss-scale-init 1024)
read -r -a fp16_extra <<< "${FP16_EXTRA:-}"
fcommon+=("${fp16_extra[@]}")
launch() { local np=$1; shift; "$bin/launch" -n "$np" "$bin/train" "$@"; }
# A metrics line's field at a step: metric RUN STEP KEY, a number or a failure naming it.
# Call it only as `var=$(metric ...)`, one per line: there `set -e` stops the script when
# num fails (inside `[[ ]]`, `echo` or a multi-assignment line its failure is lost and an
# empty value compares equal to another empty value).
metric() { num "$(grep "\"step\":$2," "$work/$1.jsonl" | grep -o "\"$3\":[0-9.e+-]*" | head -1 | cut -d: -f2)" "$3 at step $2 of $1"; }
case $scenario in
  skip)
    read -r -a stages <<< "${FP16_STAGES:-0 2}"
    for z in "${stages[@]}"; do
      run ref$z launch "$n" "${fcommon[@]}" --zero $z --steps 4 --debug-state-dump "$work/ref$z.dump"
      run inf$z launch "$n" "${fcommon[@]}" --zero $z --steps 5 --debug-state-dump "$work/inf$z.dump" --debug-inject-inf 1:5
      for ((r = 0; r < n; r++)); do
        "$bin/compare_runs" --model "$work/ref$z.dump.rank0.safetensors" "$work/inf$z.dump.rank$r.safetensors" --rtol 0 ||
          { echo "FAIL: ZeRO stage $z: rank $r's parameters changed in the skipped step 5"; exit 1; }
      done
      s4=$(metric inf$z 4 loss_scale)
      s5=$(metric inf$z 5 loss_scale)
      k4=$(metric inf$z 4 skipped_steps)
      k5=$(metric inf$z 5 skipped_steps)
      echo "stage $z: scale $s4 -> $s5, skipped $k4 -> $k5"
      awk -v a="$s4" -v b="$s5" -v k="$k4" -v l="$k5" 'BEGIN { if (b != a / 2 || k != 0 || l != 1) exit 1 }' ||
        { echo "FAIL: ZeRO stage $z: the scale did not halve or the skip was not counted"; exit 1; }
      grep -q "final:.* skipped_steps=1\b" "$work/inf$z.log" || { echo "FAIL: final line of inf$z"; exit 1; }
    done ;;
  resume)
    rcommon=("${fcommon[@]}" --loss-scale-window 4 --debug-inject-inf 0:6 --save-every 10)
    run full launch "$n" "${rcommon[@]}" --steps 20
    run part launch "$n" "${rcommon[@]}" --steps 10
    run part launch "$n" "${rcommon[@]}" --steps 20 --resume
    head -1 "$work/part.jsonl" | grep -q '"step":11,' || { echo "FAIL: resume did not continue at step 11"; exit 1; }
    full_s10=$(metric full 10 loss_scale)
    full_s20=$(metric full 20 loss_scale)
    full_k20=$(metric full 20 skipped_steps)
    part_s20=$(metric part 20 loss_scale)
    part_k20=$(metric part 20 skipped_steps)
    echo "scale at step 10: $full_s10, at 20: $full_s20 (resumed: $part_s20); skipped $full_k20 (resumed: $part_k20)"
    cmp_runs full part --rtol 0 --from-step 10
    # The scale and the skipped count went on from the checkpoint too (the skip at step 6
    # is before the checkpoint: the count must have come through it).
    [[ $full_s20 == "$part_s20" && $full_k20 == "$part_k20" && $full_k20 -ge 1 ]] ||
      { echo "FAIL: the resumed run's scaler state differs (scale $full_s20 vs $part_s20, skipped $full_k20 vs $part_k20)"; exit 1; } ;;
  *) echo "unknown scenario $scenario"; exit 2 ;;
esac
