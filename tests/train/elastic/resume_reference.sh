# Sourced by the elastic tests. equals_resume BIN DIR K STEPS WHAT ARGS...: runs the
# reference of an elastic run that went on at 3 ranks after step K: 4 ranks to step K
# with a checkpoint, then 3 ranks resumed from it to STEPS (both with ARGS), and
# requires DIR/ck/model.safetensors (the elastic run's) to equal its result bit for bit.
# Calls fail() (the caller's) naming WHAT on any difference. RESUME_WORLDS="4 2" changes
# the two world sizes.
equals_resume() {
  local bin=$1 d=$2 k=$3 steps=$4 what=$5 before after
  shift 5
  read -r before after <<< "${RESUME_WORLDS:-4 3}"
  "$bin/launch" -n "$before" "$bin/train" "$@" --steps "$k" --save-every "$k" --checkpoint-dir "$d/ref" > "$d/ref$before.log" 2>&1 ||
    { tail "$d/ref$before.log"; fail "$what: reference $before-rank run"; }
  "$bin/launch" -n "$after" "$bin/train" "$@" --steps "$steps" --resume --checkpoint-dir "$d/ref" > "$d/ref$after.log" 2>&1 ||
    { tail "$d/ref$after.log"; fail "$what: reference $after-rank resume"; }
  "$bin/compare_runs" --model "$d/ck/model.safetensors" "$d/ref/model.safetensors" --rtol 0 > "$d/cmp.log" ||
    { cat "$d/cmp.log"; fail "$what: parameters differ from the $after-rank resume of step $k"; }
}
