#!/usr/bin/env bash
# plot_metrics.sh OUT.png METRICS.jsonl [MORE.jsonl ...]
# Charts training loss (left) and evaluation accuracy or loss (right) against step for
# one or more `train --metrics-out` files, e.g. to compare two backends. Needs gnuplot.
set -euo pipefail
if (($# < 2)); then echo "usage: $0 OUT.png METRICS.jsonl [MORE.jsonl ...]" >&2; exit 2; fi
out=$1; shift
command -v gnuplot > /dev/null || { echo "plot_metrics: gnuplot is not installed (apt-get install gnuplot-nox)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
num='-?[0-9.]+([eE][-+]?[0-9]+)?'
loss_plots=() eval_plots=()
i=0
for f in "$@"; do
  [[ -r $f ]] || { echo "plot_metrics: cannot read $f" >&2; exit 1; }
  # Step lines carry "loss" and "lr"; evaluation lines carry "eval_loss".
  grep '"lr"' "$f" | sed -E "s/.*\"loss\":($num).*\"step\":([0-9]+).*/\3 \1/" > "$tmp/loss$i"
  grep '"eval_loss"' "$f" | grep -v '"final"' |
    sed -E "s/.*\"eval_loss\":($num).*\"step\":([0-9]+)(,\"test_acc\":($num))?.*/\3 \1 \5/" > "$tmp/eval$i"
  name=$(basename "$f" .jsonl)
  loss_plots+=("'$tmp/loss$i' using 1:2 with lines title '$name'")
  if awk 'NF >= 3 { found = 1 } END { exit !found }' "$tmp/eval$i"; then
    eval_plots+=("'$tmp/eval$i' using 1:3 with linespoints title '$name test acc'")
  else
    eval_plots+=("'$tmp/eval$i' using 1:2 with linespoints title '$name eval loss'")
  fi
  i=$((i + 1))
done
join() { local IFS=,; echo "$*"; }
gnuplot <<GP
set terminal pngcairo size 1200,450 noenhanced
set output '$out'
set multiplot layout 1,2
set title 'training loss'; set xlabel 'step'; set grid
plot $(join "${loss_plots[@]}")
set title 'evaluation'; set xlabel 'step'
plot $(join "${eval_plots[@]}")
unset multiplot
GP
echo "plot_metrics: wrote $out"
