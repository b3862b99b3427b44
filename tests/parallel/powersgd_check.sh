#!/usr/bin/env bash
# DDP with --grad-compress powersgd (parallel/ddp/powersgd.h), the Fashion-MNIST MLP at 2
# ranks, one scenario per invocation:   powersgd_check.sh <bin dir> <scenario>
#   ranks      rank 4 from step 6 of 40, several buckets, over tcp: both ranks end with
#              identical parameters (bit for bit); the loss falls (last 10 steps' mean under
#              half of step 1's, within 15% of the uncompressed run's); the gradient bytes
#              of every step are 4 x numel for steps 1-5 and then 4 x (sum over compressed
#              matrices of R (n + m) + the other elements) from the shapes written below;
#              at rank 16 the 10 x 128 output layer travels uncompressed (16 x 138 >= 1280);
#              resumed after step 10, a run compresses from step 11 on (no second warm-up)
#              and its losses and final model equal an uninterrupted run's bit for bit
#              (Q and the error feedback are in the checkpoint).
#   schedules  under mpiexec, --algo ring: one bucket with overlap, several buckets with
#              and without overlap, and a switch from tcp to mpi after step 12 all train the
#              same bits (PowerSGD's state is local, not the communicator's); --grad-accum 2
#              x batch 16 compresses once per step (same bytes) and follows batch 32's losses.
#   refused    the combinations that cannot work exit 2 naming the flags.
set -euo pipefail
bin=$1 scenario=$2
source "$(dirname "$0")/../support/check_lib.sh"
common=(--model mlp --optimizer sgd --momentum 0.9 --lr 0.05 --lr-schedule constant --no-shuffle --log-every 1
        --max-eval-samples 512 --batch-size 32)
psgd=(--grad-compress powersgd --powersgd-start-step 5)
small=(--bucket-mb 0.25 --first-bucket-mb 0.05)
launch() { "$bin/launch" -n 2 "$bin/train" --backend tcp "$@"; }
# The MLP's parameters (models/zoo/models.cpp): Linear weights [out, in] and their biases.
matrices="256x784 128x256 10x128" vectors="256 128 10"
# Gradient bytes per step at rank $1: compressed matrices (R (n + m) < n m) send R (n + m)
# floats, the others all of theirs; $1 = 0: uncompressed.
expected_bytes() {
  awk -v R="$1" -v mats="$matrices" -v vecs="$vectors" 'BEGIN {
    t = 0; split(mats, ms, " "); for (i in ms) { split(ms[i], d, "x"); n = d[1]; m = d[2]
      t += (R > 0 && R * (n + m) < n * m) ? R * (n + m) : n * m }
    split(vecs, vs, " "); for (i in vs) t += vs[i]; print 4 * t }'
}
# Every logged step's comm_bytes in run $1: steps 1..$2 must be $3, the later ones $4.
check_bytes() {
  /usr/bin/python3 - "$work/$1.jsonl" "$2" "$3" "$4" <<'PY'
import json, sys
path, start, plain, packed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
steps = [json.loads(l) for l in open(path) if '"comm_bytes"' in l]
bad = [(s["step"], s["comm_bytes"]) for s in steps if s["comm_bytes"] != (plain if s["step"] <= start else packed)]
print(f"{path}: {len(steps)} steps, bytes per step {plain} up to step {start}, then {packed} ({plain / packed:.1f}x fewer)")
if not steps or bad: sys.exit(f"FAIL: steps whose gradient bytes differ from the formula (step, bytes): {bad[:8]}")
PY
}
last10() { /usr/bin/python3 -c 'import json,sys; L=[json.loads(l)["loss"] for l in open(sys.argv[1]) if "\"comm_bytes\"" in l]; print(sum(L[-10:]) / 10)' "$work/$1.jsonl"; }
first_loss() { /usr/bin/python3 -c 'import json,sys; print([json.loads(l)["loss"] for l in open(sys.argv[1]) if "\"comm_bytes\"" in l][0])' "$work/$1.jsonl"; }
case $scenario in
  ranks)
    run plain launch "${common[@]}" --steps 40
    run p4 launch "${common[@]}" --steps 40 "${psgd[@]}" "${small[@]}" --debug-state-dump "$work/p4.dump"
    "$bin/compare_runs" --model "$work/p4.dump.rank0.safetensors" "$work/p4.dump.rank1.safetensors" --rtol 0
    plain_bytes=$(expected_bytes 0) p4_bytes=$(expected_bytes 4)
    grep -q "PowerSGD rank 4: $p4_bytes gradient bytes per step from step 6 (the first 5 uncompressed: $plain_bytes)" "$work/p4.log" ||
      { echo "FAIL: the configuration does not announce $p4_bytes bytes per step"; grep PowerSGD "$work/p4.log"; exit 1; }
    check_bytes p4 5 "$plain_bytes" "$p4_bytes"
    awk -v f="$(num "$(first_loss p4)" "step 1 loss")" -v l="$(num "$(last10 p4)" "PowerSGD's last losses")" \
        -v p="$(num "$(last10 plain)" "the uncompressed run's last losses")" 'BEGIN {
      printf "loss: step 1 %.4f, last 10 steps %.4f (uncompressed %.4f, ratio %.3f)\n", f, l, p, l / p
      if (!(l < 0.5 * f)) { print "FAIL: the loss did not fall below half of step 1'"'"'s"; exit 1 }
      if (!(l <= 1.15 * p)) { print "FAIL: PowerSGD'"'"'s loss is more than 15% above the uncompressed run'"'"'s"; exit 1 } }'
    run p16 launch "${common[@]}" --steps 8 --grad-compress powersgd --powersgd-rank 16 --powersgd-start-step 2
    check_bytes p16 2 "$plain_bytes" "$(expected_bytes 16)"
    # Resumed after step 10 (the checkpoint holds the optimizer's step count), a run
    # compresses from its first step: the warm-up is not repeated; the checkpoint holds
    # Q and every rank's error feedback, so it trains the bits of an uninterrupted run.
    run res launch "${common[@]}" "${psgd[@]}" "${small[@]}" --steps 10 --save-every 10
    run res launch "${common[@]}" "${psgd[@]}" "${small[@]}" --steps 14 --resume
    check_bytes res 10 "$plain_bytes" "$p4_bytes"
    ! grep -q "PowerSGD starts afresh" "$work/res.log" || { echo "FAIL: the resume did not restore PowerSGD's state"; exit 1; }
    run whole launch "${common[@]}" "${psgd[@]}" "${small[@]}" --steps 14
    cmp_runs whole res --rtol 0 --from-step 10 ;;
  schedules)
    mcommon=("${common[@]}" --steps 40 "${psgd[@]}" --backend tcp --algo ring)
    run one mpi 2 "${mcommon[@]}"
    run overlap mpi 2 "${mcommon[@]}" "${small[@]}"
    run serial mpi 2 "${mcommon[@]}" "${small[@]}" --no-overlap
    run switched mpi 2 "${mcommon[@]}" "${small[@]}" --switch-backend 12:mpi
    grep -q "^switched to backend mpi after step 12 (" "$work/switched.log" || { echo "FAIL: no switch to mpi after step 12"; exit 1; }
    for r in overlap serial switched; do cmp_runs one $r --rtol 0; done
    accum=(); for ((i = 0; i < ${#mcommon[@]}; i++)); do [[ ${mcommon[i]} == --batch-size ]] && ((i += 1)) || accum+=("${mcommon[i]}"); done
    run accum mpi 2 "${accum[@]}" --batch-size 16 --grad-accum 2
    check_bytes accum 5 "$(expected_bytes 0)" "$(expected_bytes 4)"
    # Two micro-batches add their gradients in another order than one batch of 32, and 40
    # momentum steps through PowerSGD's orthogonalisation grow that rounding: 5.2e-4 at
    # step 39 with OpenBLAS's Haswell kernels on an AMD EPYC, 6e-6 with the kernels it picks
    # there by itself. Compressing each micro-batch instead of the step would also change
    # the bytes checked above.
    "$bin/compare_runs" --metrics "$work/one.jsonl" "$work/accum.jsonl" --rtol 2e-3 ;;
  refused)
    refuse() {  # refuse "words the message must hold" ARGS...
      local want=$1; shift
      local rc=0
      "$bin/train" --steps 1 "$@" > "$work/r.log" 2>&1 || rc=$?
      [[ $rc != 0 ]] || { echo "FAIL: train $* was accepted"; exit 1; }
      [[ $rc == 2 ]] && grep -qF -- "$want" "$work/r.log" || { echo "FAIL: train $* (exit $rc) did not say '$want':"; cat "$work/r.log"; exit 1; }
      echo "refused: train $* -> $(head -1 "$work/r.log")"
    }
    refuse "works with DDP only (--zero 0), not with --zero 2" --grad-compress powersgd --zero 2
    refuse "--precision bf16" --grad-compress powersgd --precision bf16
    refuse "not with --device cuda" --grad-compress powersgd --device cuda
    refuse "--powersgd-rank 0: the approximation rank must be >= 1" --grad-compress powersgd --powersgd-rank 0
    refuse "--powersgd-start-step -1" --grad-compress powersgd --powersgd-start-step -1
    refuse "--grad-compress powersgd and --elastic" --grad-compress powersgd --elastic
    refuse "--powersgd-rank applies to --grad-compress powersgd only" --powersgd-rank 2 ;;
  *) echo "unknown scenario $scenario"; exit 2 ;;
esac
