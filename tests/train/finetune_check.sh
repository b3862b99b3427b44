#!/usr/bin/env bash
# Fine-tuning and validation data in both trainers (issue 26 item 5 / issue 29 item 5),
# one scenario per invocation:   finetune_check.sh <bin dir> <scenario>
#   init-from    train --model resnet18 --init-from FILE at 2 ranks (launch, tcp), DDP, ZeRO-1, -2 and
#                ZeRO-3 (each rank builds and loads only its shard): after one step of
#                learning rate 0 every rank's parameters are the file's bit for bit, and
#                only BatchNorm's running statistics moved (the step's forward updates
#                them); the file comes from another seed, trained 2 steps.
#   num-classes  a file with a 1000-class head (ImageNet's shape) and --num-classes 10 on
#                10-class data, in train (2 ranks, ZeRO-3) and train_local: every backbone
#                tensor is the file's bit for bit, the head is [10, 512] + [10] and equals
#                the head the same --model-seed builds without a file, and the log says so
#                with both shapes.
#   val-split    text-docs in train and train_local: --val-file evaluates on exactly that
#                file's documents (the held-out count in the log, and the evaluation loss
#                at learning rate 0 equal to the default split of a file holding the same
#                documents at the every-10th places) and trains on the whole data file;
#                --val-fraction 0.25 holds out documents 3, 7, 11, ... (floor((i+1)F) >
#                floor(iF), data/text/text_docs.h): their count, and the same loss as a
#                --val-file of exactly those documents.
set -euo pipefail
bin=$1 scenario=$2
source "$(dirname "$0")/../support/check_lib.sh"

# Random images in CIFAR-10's binary format, 8 per file (10 classes).
cifar() {
  /usr/bin/python3 - "$work/cifar" <<'PY'
import os, random, sys
d = sys.argv[1]; os.makedirs(d); rng = random.Random(0)
for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
    with open(os.path.join(d, name), "wb") as f:
        for _ in range(8): f.write(bytes([rng.randrange(10)]) + rng.randbytes(3072))
PY
}
# One step of learning rate 0: the parameters stay where they started, bit for bit.
still=(--model resnet18 --dataset cifar10 --optimizer sgd --lr 0 --lr-schedule constant --steps 1 --batch-size 4
       --max-eval-samples 4)
# compare_runs A B at rtol 0 into $work/NAME.cmp; the names of the tensors that differ.
differing() { "$bin/compare_runs" --model "$1" "$2" --rtol 0 > "$work/$3.cmp" || true
              sed -En 's/^tensor ([^ ]+) (differs|is shaped differently|is in).*/\1 \2/p' "$work/$3.cmp"; }
# Only BatchNorm's running statistics (and counters) may differ, and nothing else.
only_buffers_moved() {  # only_buffers_moved FILE DUMP NAME [extra allowed regex]
  local other allowed='\.(running_mean|running_var|num_batches_tracked) differs$'
  [[ -z ${4:-} ]] || allowed+="|$4"
  other=$(differing "$1" "$2" "$3" | grep -vE "$allowed" || true)
  [[ -z $other ]] || { echo "FAIL: $3: tensors other than running statistics differ from $1:"; echo "$other"; exit 1; }
  grep -q "running_mean differs" "$work/$3.cmp" || { echo "FAIL: $3: no running statistic moved (did a step run?)"; cat "$work/$3.cmp"; exit 1; }
  grep "^parameters:" "$work/$3.cmp"
}

case $scenario in
  init-from)
    cifar
    "$bin/train_local" --model resnet18 --dataset cifar10 --data-dir "$work/cifar" --model-seed 99 --optimizer sgd --lr 0.01 \
      --steps 2 --batch-size 4 --max-eval-samples 4 --save "$work/start.safetensors" > "$work/start.log" 2>&1 || { cat "$work/start.log"; exit 1; }
    for z in 0 1 2 3; do
      run z$z "$bin/launch" -n 2 "$bin/train" --backend tcp "${still[@]}" --data-dir "$work/cifar" --zero $z \
        --init-from "$work/start.safetensors" --debug-state-dump "$work/z$z.dump"
      for r in 0 1; do
        echo -n "ZeRO-$z rank $r: "
        only_buffers_moved "$work/start.safetensors" "$work/z$z.dump.rank$r.safetensors" "z$z.rank$r"
      done
    done
    # The check can fail: without the file the parameters are the seed's, not the file's.
    run fresh "$bin/launch" -n 2 "$bin/train" --backend tcp "${still[@]}" --data-dir "$work/cifar" --debug-state-dump "$work/fresh.dump"
    n=$(differing "$work/start.safetensors" "$work/fresh.dump.rank0.safetensors" fresh | grep -c "weight differs" || true)
    ((n > 20)) || { echo "FAIL: a run without --init-from has only $n weights unlike the file's"; exit 1; }
    echo "without --init-from: $n weights differ from the file's" ;;
  num-classes)
    cifar
    "$bin/train_local" --model resnet18 --dataset cifar10 --data-dir "$work/cifar" --num-classes 1000 --model-seed 99 \
      --optimizer sgd --lr 0.01 --steps 2 --batch-size 4 --max-eval-samples 4 --save "$work/in1000.safetensors" \
      > "$work/in1000.log" 2>&1 || { cat "$work/in1000.log"; exit 1; }
    # The head the default seed builds for 10 classes, without a file.
    "$bin/train_local" "${still[@]}" --data-dir "$work/cifar" --save "$work/seeded.safetensors" > "$work/seeded.log" 2>&1 ||
      { cat "$work/seeded.log"; exit 1; }
    run ft "$bin/launch" -n 2 "$bin/train" --backend tcp "${still[@]}" --data-dir "$work/cifar" --zero 3 \
      --init-from "$work/in1000.safetensors" --num-classes 10 --debug-state-dump "$work/ft.dump"
    "$bin/train_local" "${still[@]}" --data-dir "$work/cifar" --init-from "$work/in1000.safetensors" --num-classes 10 \
      --save "$work/ft_local.safetensors" > "$work/ft_local.log" 2>&1 || { cat "$work/ft_local.log"; exit 1; }
    note="classifier head fc.weight [1000, 512], fc.bias [1000] replaced by a freshly initialised [10, 512], [10]"
    for log in ft ft_local; do
      grep -F "$note" "$work/$log.log" || { echo "FAIL: $log does not say the head was replaced, with both shapes"; exit 1; }
    done
    for dump in ft.dump.rank0 ft.dump.rank1 ft_local; do
      echo -n "$dump: "
      only_buffers_moved "$work/in1000.safetensors" "$work/$dump.safetensors" "$dump" 'fc\.(weight|bias) is shaped differently'
      for t in fc.weight fc.bias; do
        grep -q "^$t is shaped differently" <(differing "$work/in1000.safetensors" "$work/$dump.safetensors" "$dump.head") ||
          { echo "FAIL: $dump: $t has the file's shape"; exit 1; }
      done
      # The head is the seed's own 10-class head, bit for bit (and so [10, 512] and [10]).
      heads=$(differing "$work/seeded.safetensors" "$work/$dump.safetensors" "$dump.seeded" | grep -E "^fc\." || true)
      [[ -z $heads ]] || { echo "FAIL: $dump's head is not the seeded initialisation: $heads"; exit 1; }
      grep -q "^parameters: 122 of 122" "$work/$dump.seeded.cmp" || { echo "FAIL: $dump: not every tensor compared"; cat "$work/$dump.seeded.cmp"; exit 1; }
    done ;;
  val-split)
    # 63 training documents and 7 validation ones; mixed.txt holds all 70 with the
    # validation ones at the places the default split holds out (9, 19, ..., 69).
    for i in $(seq 1 63); do echo "training document $i: $(printf 'word%d ' $(seq 1 $((i % 9 + 1))))"; done > "$work/train.txt"
    for i in $(seq 1 7); do echo "held-out document $i says $(printf 'other%d ' $(seq 1 $((i + 2))))"; done > "$work/val.txt"
    awk -v val="$work/val.txt" '{ print } NR % 9 == 0 { getline v < val; print v }' "$work/train.txt" > "$work/mixed.txt"
    # The documents --val-fraction 0.25 holds out of mixed.txt (i = 3, 7, ..., 67: 17 of 70).
    awk 'NR % 4 == 0' "$work/mixed.txt" > "$work/quarter.txt"
    [[ $(wc -l < "$work/mixed.txt") == 70 && $(sed -n '10p;70p' "$work/mixed.txt" | grep -c held-out) == 2 ]] ||
      { echo "FAIL: mixed.txt is not laid out as intended"; exit 1; }
    tiny=(--model gpt2 --gpt-layers 1 --gpt-heads 2 --gpt-dim 32 --n-positions 32 --seq-len 24 --dropout 0
          --dataset text-docs --optimizer sgd --lr 0 --lr-schedule constant --steps 1 --batch-size 4)
    eval_loss() { /usr/bin/python3 -c 'import json, sys
print(repr([json.loads(l)["eval_loss"] for l in open(sys.argv[1]) if "eval_loss" in l][-1]))' "$work/$1.jsonl"; }
    counts() {  # counts RUN TRAIN HELD: the dataset row of the run's configuration
      grep -qE "text-docs/train \($2 (samples|train), $3 held out\)" "$work/$1.log" ||
        { echo "FAIL: $1 does not train on $2 documents and hold out $3:"; grep -m1 "dataset" "$work/$1.log"; exit 1; }
      echo "$1: $2 training documents, $3 held out"
    }
    run default "$bin/train" "${tiny[@]}" --data-file "$work/mixed.txt"
    run valfile "$bin/train" "${tiny[@]}" --data-file "$work/train.txt" --val-file "$work/val.txt"
    run quarter "$bin/train" "${tiny[@]}" --data-file "$work/mixed.txt" --val-fraction 0.25
    run quarter_file "$bin/train" "${tiny[@]}" --data-file "$work/train.txt" --val-file "$work/quarter.txt"
    counts default 63 7; counts valfile 63 7; counts quarter 53 17; counts quarter_file 63 17
    grep -q "eval_samples\":7," "$work/valfile.jsonl" || { echo "FAIL: valfile did not evaluate 7 documents"; exit 1; }
    same_loss() {
      local a b; a=$(eval_loss "$1") b=$(eval_loss "$2")
      echo "evaluation loss $1 $a, $2 $b"
      [[ -n $a && $a == "$b" ]] || { echo "FAIL: $1 and $2 did not evaluate the same documents"; exit 1; }
    }
    same_loss default valfile
    same_loss quarter quarter_file
    # And the loss tells documents apart: the two held-out sets give different losses.
    [[ $(eval_loss default) != "$(eval_loss quarter)" ]] || { echo "FAIL: the evaluation loss does not depend on the documents"; exit 1; }
    # train_local: the same splits.
    local_run() { local name=$1; shift; "$bin/train_local" "${tiny[@]}" "$@" > "$work/$name.log" 2>&1 || { cat "$work/$name.log"; exit 1; }; }
    local_run local_valfile --data-file "$work/train.txt" --val-file "$work/val.txt"
    local_run local_quarter --data-file "$work/mixed.txt" --val-fraction 0.25
    counts local_valfile 63 7; counts local_quarter 53 17 ;;
  *) echo "unknown scenario $scenario"; exit 2 ;;
esac
echo "PASS: $scenario"
