#!/usr/bin/env bash
# Data parallelism on one GPU (issue 28's "ranks sharing one GPU"), fp32, GPT with AdamW:
#   2 ranks over tcp x batch 16 == 1 rank x batch 32: every step's loss and the final
#     model within 1e-5 relative (only the summation order of the average differs);
#   ZeRO-1, -2 and -3 at 2 ranks == DDP at 2 ranks within 1e-6 (on the CPU they give the
#     same bits at 2 ranks; on the GPU DDP and ZeRO-1 reduce device buckets and ZeRO-2/3
#     the downloaded gradients);
#   device-resident DDP, ZeRO-1 and ZeRO-2 (--optimizer-device cuda) at 2 ranks == DDP
#     at 2 ranks within 1e-6 (the device step gives the host step's bits; the buckets are
#     the same; ZeRO-2 reduces device pieces into device shards; both allgather the
#     stepped shards on the device).
#   gpu_equivalence.sh <bin dir>   (needs a GPU: run through tests/support/needs_gpu.sh)
set -euo pipefail
bin=$1
source "$(dirname "$0")/../support/check_lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
common=(--model gpt --device cuda --backend tcp --optimizer adamw --lr 3e-3 --lr-schedule constant --no-shuffle
        --log-every 1 --max-eval-samples 200 --steps 20)
run single "$bin/launch" -n 1 "$bin/train" "${common[@]}" --batch-size 32
run ddp "$bin/launch" -n 2 "$bin/train" "${common[@]}" --batch-size 16
for z in 1 2 3; do run "z$z" "$bin/launch" -n 2 "$bin/train" "${common[@]}" --batch-size 16 --zero "$z"; done
run resident "$bin/launch" -n 2 "$bin/train" "${common[@]}" --batch-size 16 --optimizer-device cuda
for z in 1 2; do
  run "z${z}_resident" "$bin/launch" -n 2 "$bin/train" "${common[@]}" --batch-size 16 --zero "$z" --optimizer-device cuda
done
grep -q "^final:.* device=cuda " "$work/ddp.log" || { echo "FAIL: the ddp run did not say device=cuda"; exit 1; }
cmp_runs single ddp --rtol 1e-5
for other in z1 z2 z3 resident z1_resident z2_resident; do cmp_runs ddp "$other" --rtol 1e-6; done
echo "1 rank x 32 == 2 ranks x 16; ZeRO-1/2/3 and device-resident DDP, ZeRO-1 and ZeRO-2 == DDP, on one GPU"
