# Sourced by the elastic tests. equals_resume BIN DIR K STEPS WHAT ARGS...: runs the
# reference of an elastic run that went on at 3 ranks after step K: 4 ranks to step K
# with a checkpoint, then 3 ranks resumed from it to STEPS (both with ARGS), and
# requires DIR/ck/model.safetensors (the elastic run's) to equal its result bit for bit.
# Calls fail() (the caller's) naming WHAT on any difference.
equals_resume() {
  local bin=$1 d=$2 k=$3 steps=$4 what=$5
  shift 5
  "$bin/launch" -n 4 "$bin/train" "$@" --steps "$k" --save-every "$k" --checkpoint-dir "$d/ref" > "$d/ref4.log" 2>&1 ||
    { tail "$d/ref4.log"; fail "$what: reference 4-rank run"; }
  "$bin/launch" -n 3 "$bin/train" "$@" --steps "$steps" --resume --checkpoint-dir "$d/ref" > "$d/ref3.log" 2>&1 ||
    { tail "$d/ref3.log"; fail "$what: reference 3-rank resume"; }
  "$bin/compare_runs" --model "$d/ck/model.safetensors" "$d/ref/model.safetensors" --rtol 0 > "$d/cmp.log" ||
    { cat "$d/cmp.log"; fail "$what: parameters differ from the 3-rank resume of step $k"; }
}
