#!/usr/bin/env bash
# What a new user meets first (issue 29), through the programs themselves:
#   1. gpt2 trains on its own dataset (text-docs, GPT-2's tokenizer over the fortunes) by
#      default, and evaluates a capped number of held-out documents, saying so; --help
#      lists every dataset make_dataset knows (the names an unknown --dataset is refused
#      with, before any work).
#   2. output: no tokens_per_s in an image model's final line (a gpt2's has it), no
#      accuracy for a language model, its loss per token.
#   3. --save-every without --checkpoint-dir is refused, naming both flags.
#   4. a flag's prefix is never taken for the flag, in every program (--save is not
#      --save-every); errors are short and point at --help; launch passes the program's
#      own arguments through untouched.
#   5. --resume with a larger --steps continues the schedule the run started with: the lr
#      of the first resumed step equals the uninterrupted run's; a schedule flag that
#      disagrees with the checkpoint is refused; a checkpoint without the schedule's
#      metadata (written before it was stored) still resumes.
#   newcomer_defaults.sh <bin dir>
set -uo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fails=0
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
has() {  # has NAME FILE REGEX: FILE has a line matching REGEX
  if grep -Eq -- "$3" "$2"; then ok "$1: $(grep -Em1 -- "$3" "$2" | cut -c1-160)"; else fail "$1: no /$3/ in:"; head -20 "$2"; fi
}
hasnt() {  # hasnt NAME FILE REGEX
  if grep -Eq -- "$3" "$2"; then fail "$1: /$3/ found: $(grep -Em1 -- "$3" "$2" | cut -c1-200)"; else ok "$1"; fi
}
run() {  # run NAME PROG ARGS...: output in NAME.log, exit status in NAME.rc
  local name=$1; shift
  timeout 60 "$@" > "$name.log" 2>&1; echo $? > "$name.rc"
}
rc() { cat "$1.rc"; }

tiny_gpt2=(--model gpt2 --gpt-layers 1 --gpt-heads 2 --gpt-dim 32 --n-positions 32 --seq-len 24 --batch-size 2 --steps 2)

# --- 1. gpt2's default dataset, the evaluation cap, --help's dataset list.
run gpt2 "$bin/train" "${tiny_gpt2[@]}" --log-every 1
[[ $(rc gpt2) == 0 ]] || { fail "train ${tiny_gpt2[*]} exited $(rc gpt2)"; cat gpt2.log; }
has "train --model gpt2 defaults to text-docs" gpt2.log '^\| dataset +\| text-docs/train '
has "the held-out documents are capped, and the line says how to get all" gpt2.log \
  '^eval .*\(512 of [0-9]+ held-out documents; --max-eval-samples 0 for all\)'
run gpt2_local "$bin/train_local" "${tiny_gpt2[@]}"
[[ $(rc gpt2_local) == 0 ]] || { fail "train_local ${tiny_gpt2[*]} exited $(rc gpt2_local)"; cat gpt2_local.log; }
has "train_local --model gpt2 defaults to text-docs" gpt2_local.log '^\| dataset +\| text-docs/train '
run gpt2_bytes "$bin/train_local" "${tiny_gpt2[@]}" --dataset text --max-eval-samples 8 --sample-len 0
[[ $(rc gpt2_bytes) == 0 ]] || { fail "train_local gpt2 --dataset text exited $(rc gpt2_bytes), want 0 (a note, then training)"; tail -5 gpt2_bytes.log; }
has "--dataset text with gpt2: one line says it trains on bytes" gpt2_bytes.log '^note: --dataset text with --model gpt2 trains on raw bytes'

"$bin/train" --help > help.txt 2>&1
"$bin/train_local" --help > help_local.txt 2>&1
run unknown "$bin/train" --dataset no-such-data --steps 1
[[ $(rc unknown) == 2 ]] || fail "train --dataset no-such-data: exit $(rc unknown), want 2 (refused before any work)"
listed=$(sed -En "s/.*--dataset 'no-such-data': unknown \(valid: (.*)\).*/\1/p" unknown.log | tr -d ' ' | tr ',' '\n')
[[ $listed == *text-docs* ]] || fail "train --dataset no-such-data does not list the valid datasets: $(head -3 unknown.log)"
missing=0
for name in $listed; do
  for h in help.txt help_local.txt; do
    # --help wraps its lines: join them, then look for the name between separators.
    if tr '\n' ' ' < "$h" | tr -s ' ' | grep -Eq -- "(^|[ |(])$name( \| | \(default)"; then :; else
      fail "$h does not list dataset '$name'"; missing=1; fi
  done
done
((missing)) || ok "--help lists every dataset make_dataset knows: $(echo $listed)"

# --- 2. Output that means something.
grep '^final:' gpt2.log > gpt2.final
has "a language model's final line has tokens_per_s" gpt2.final 'tokens_per_s=[0-9.]+'
/usr/bin/python3 - cifar <<'PY'
import os, random, sys
d = sys.argv[1]; os.makedirs(d); rng = random.Random(0)
for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
    with open(os.path.join(d, name), "wb") as f:
        for _ in range(4): f.write(bytes([rng.randrange(10)]) + rng.randbytes(3072))
PY
run image "$bin/train" --model resnet18 --dataset cifar10 --data-dir cifar --steps 1 --batch-size 2 --max-eval-samples 2
grep '^final:' image.log > image.final || { fail "no final line from the resnet18 run"; cat image.log; }
has "an image model's final line" image.final '^final: test_acc='
hasnt "an image model's final line has no tokens_per_s" image.final 'tokens_per_s'
hasnt "a language model prints no accuracy (acc nan)" gpt2_local.log 'nan'
has "a language model's held-out loss is per token on text-docs" gpt2_local.log 'held-out loss +: [0-9.]+ nats/token'
hasnt "no fixed 60% target unless --max-entropy-ratio asks" gpt2_bytes.log 'target <'

# --- 3. --save-every without --checkpoint-dir.
run save_every "$bin/train" --model toy --steps 2 --save-every 1
[[ $(rc save_every) == 2 ]] || fail "--save-every without --checkpoint-dir: exit $(rc save_every), want 2"
has "--save-every without --checkpoint-dir is refused" save_every.log '--save-every 1 needs --checkpoint-dir'

# --- 4. Prefixes are not flags; short errors that point at --help.
refused() {  # refused PROG ARGS...: exit 2, "unrecognised option", "(see PROG --help)", no help dump
  local prog=$1; shift
  timeout 20 "$bin/$prog" "$@" > refused.out 2> refused.err < /dev/null; local got=$?
  if [[ $got == 2 ]] && grep -q "unrecognised option '$1'" refused.err && grep -qxF "(see $prog --help)" refused.err &&
     [[ $(wc -l < refused.err) -le 2 ]]; then
    ok "$prog $*: $(head -1 refused.err)"
  else
    fail "$prog $* -> exit $got (want 2 and a two-line error); stderr: $(head -4 refused.err | tr '\n' '|')"
  fi
}
refused train --save x
refused train --save-ev 1
refused train_local --save-ev 1
refused generate --init model.safetensors
refused tokenize --tok "$work"
refused tokenize --dec
refused comm_bench --min 8
refused demo --co 8
refused launch --npro 2 true
refused zero_consolidate --hel
out=$(timeout 20 "$bin/launch" -n 1 --no-prefix sh -c 'echo "$@"' prog --save -np 3 --help -- 2>&1)
[[ $out == "--save -np 3 --help --" ]] && ok "launch passes the program's arguments through: $out" ||
  fail "launch changed the program's arguments: got [$out], want [--save -np 3 --help --]"
out=$(timeout 20 "$bin/launch" -np 1 --no-prefix echo np 2>&1)
[[ $out == np ]] && ok "launch -np N (mpirun's spelling) still starts N" || fail "launch -np 1: got [$out]"

# --- 5. Resume with a larger --steps: the schedule goes on as it started.
toy=(--model toy --log-every 1 --lr-schedule cosine --max-eval-samples 8)
lr_at() {  # lr_at METRICS STEP
  /usr/bin/python3 -c 'import json, sys
print([json.loads(l)["lr"] for l in open(sys.argv[1]) if json.loads(l).get("step") == int(sys.argv[2]) and "lr" in l][0])' "$1" "$2"
}
run first "$bin/train" "${toy[@]}" --lr 0.01 --steps 6 --checkpoint-dir ck --save-every 4 --exit-after-step 4
[[ $(cat ck/latest 2>/dev/null) == step_4 ]] || { fail "the first run did not checkpoint step 4"; cat first.log; }
cp -r ck ck_old
run resumed "$bin/train" "${toy[@]}" --lr 0.01 --steps 8 --checkpoint-dir ck --resume --metrics-out resumed.jsonl
run whole "$bin/train" "${toy[@]}" --lr 0.01 --steps 6 --metrics-out whole.jsonl
a=$(lr_at resumed.jsonl 5) b=$(lr_at whole.jsonl 5)
if [[ -n $a && $a == "$b" ]]; then ok "lr at the first resumed step 5: $a, the uninterrupted run's: $b"
else fail "lr at the first resumed step 5 is [$a], the uninterrupted run's [$b]"; fi
[[ $(lr_at resumed.jsonl 8) == 0.0 ]] && ok "past the schedule's end (step 6) the lr stays at its min, 0" ||
  fail "lr at step 8 is $(lr_at resumed.jsonl 8), want 0.0 (the schedule ended at step 6)"
has "the resume says which schedule goes on" resumed.log '^resume: continuing the checkpoint.s learning-rate schedule'
run other_lr "$bin/train" "${toy[@]}" --steps 8 --checkpoint-dir ck --resume --lr 0.02
[[ $(rc other_lr) == 1 ]] || fail "--resume with a disagreeing --lr exited $(rc other_lr), want 1 (refused, not warned)"
grep -q '^step ' other_lr.log && fail "--resume with a disagreeing --lr trained: $(grep -m1 '^step ' other_lr.log)"
has "a disagreeing --lr is refused with both values" other_lr.log '--resume: --lr 0.02 differs from the 0.01 '
# A checkpoint written before the schedule was stored: no lr_* metadata, still resumes.
/usr/bin/python3 - ck_old/step_4/model.safetensors <<'PY'
import json, struct, sys
path = sys.argv[1]
raw = open(path, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
meta = header["__metadata__"]
assert "lr_total_steps" in meta, "the checkpoint does not store the schedule"
for k in [k for k in meta if k.startswith("lr")]: del meta[k]
text = json.dumps(header).encode()
text += b" " * ((8 - len(text) % 8) % 8)
open(path, "wb").write(struct.pack("<Q", len(text)) + text + raw[8 + n:])
PY
run old "$bin/train" "${toy[@]}" --lr 0.01 --steps 8 --checkpoint-dir ck_old --resume
[[ $(rc old) == 0 ]] && has "a checkpoint without the schedule's metadata resumes" old.log '^final: .*steps=8 ' ||
  { fail "resume from a checkpoint without lr metadata exited $(rc old)"; tail -3 old.log; }

((fails == 0)) || { echo "$fails checks failed"; exit 1; }
echo "all newcomer checks passed"
