#!/usr/bin/env bash
# The flight recorder's cost: the step time (train's step_ms, the mean over the run) with
# recording on (the default) and off (DPT_FLIGHT=0), interleaved round by round so a busy
# spell hits both, for the Quick start's MLP (one small bucket per step: the recorder's
# share is largest where a step is shortest) and a byte-level GPT (4 layers, width 128).
# Rounds alternate which of the two runs first. Prints each round and the median ratio
# on/off per model. With WHAT = trace, "on" is
# `train --trace DIR` (the timeline, comm/dispatch/timeline.h) and "off" the same run
# without it, the flight recorder on in both. MODELS picks the jobs: mlp, gpt, and gpt2s,
# GPT-2 small's shape (--model gpt2 --gpt2-size 124M: 12 layers, width 768, 12 heads,
# 124M parameters) on a short sequence (32 tokens, 1 per rank per step, 4 steps), since
# 1024 tokens would take minutes a step on 2 cores. bench/results/flight_recorder_cost.txt
# holds the figures of docs/reliability.md.
#
#   bench/flight_recorder_cost.sh [build] [ROUNDS (default 5)] [WHAT: flight|trace] [MODELS (default "mlp gpt")]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${2:-5}
what=${3:-flight}
models=${4:-mlp gpt}
trace_dir=$(mktemp -d)
trap 'rm -rf "$trace_dir"' EXIT
echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores; 2 ranks, tcp; on/off: $what"
step_ms() { grep -o 'step_ms=[0-9.]*' | tail -1 | cut -d= -f2; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
run() {  # NAME ARGS...
  local name=$1; shift
  local on=() off=()
  one() {  # on|off ARGS...: one run's step_ms
    local mode=$1; shift
    if [[ $what == trace ]]; then
      if [[ $mode == on ]]; then "$build/bin/launch" -n 2 "$build/bin/train" --backend tcp "$@" --trace "$trace_dir" 2>&1 | step_ms
      else "$build/bin/launch" -n 2 "$build/bin/train" --backend tcp "$@" 2>&1 | step_ms; fi
    else
      DPT_FLIGHT=$([[ $mode == on ]] && echo 1 || echo 0) "$build/bin/launch" -n 2 "$build/bin/train" --backend tcp "$@" 2>&1 | step_ms
    fi
  }
  for r in $(seq 1 "$rounds"); do
    # Which goes first alternates: the run after another one pays for what that left
    # behind (a big model's freed memory, caches), and that should not count for either.
    if (( r % 2 )); then a=$(one on "$@"); b=$(one off "$@"); else b=$(one off "$@"); a=$(one on "$@"); fi
    [[ -n $a && -n $b ]] || { echo "flight_recorder_cost: $name round $r printed no step_ms" >&2; exit 1; }
    echo "$name round $r: on $a ms, off $b ms"
    on+=("$a") off+=("$b")
  done
  local mon moff
  mon=$(median "${on[@]}") moff=$(median "${off[@]}")
  echo "$name median: on $mon ms, off $moff ms per step: on/off $(echo "$mon / $moff" | bc -l | cut -c1-6)"
}
for m in $models; do
  case $m in
    mlp) run mlp --model mlp --steps 600 --log-every 1000 --max-eval-samples 64 ;;
    gpt) run gpt --model gpt --steps 60 --batch-size 8 --log-every 1000 --max-eval-samples 16 ;;
    gpt2s) run gpt2s --model gpt2 --gpt2-size 124M --seq-len 32 --batch-size 1 --steps 4 --log-every 1000 \
             --max-eval-samples 2 ;;
    *) echo "flight_recorder_cost: unknown model '$m' (mlp, gpt, gpt2s)" >&2; exit 2 ;;
  esac
done
