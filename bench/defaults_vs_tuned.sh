#!/usr/bin/env bash
# defaults_vs_tuned.sh: each headline job with nothing set against a grid of hand
# settings, interleaved in one run (round r runs every job under every setting before
# round r+1, each round in a rotated order), so a busy spell hits all alike. Prints, per job, each setting's median cost
# over the rounds and the ratio default / best hand setting: the default path is the one
# users run, and it must stay within 1.1x of what an expert would set (issue 44).
#
#   bench/defaults_vs_tuned.sh [build]        (about 16 minutes on 2 cores)
# Environment:
#   ROUNDS (3)      rounds of the whole grid
#   JOBS (all)      which jobs, e.g. "quickstart gpt2r"
#   SETTINGS (all)  which hand settings besides the default
#   OUT (bench/results/defaults): raw logs and summary.md
#   KEEP_ENV (0)    1: keep OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE as the caller has them
#                   (default too: this script never sets them; run it once under
#                   `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE` to see a machine
#                   without them).
#
# Jobs (cost: lower is better):
#   quickstart  launch -n 2 train (the Quick start: MLP, Fashion-MNIST, 3 epochs): wall s
#   cnn2        launch -n 2 train --model cnn --steps 300: train's time_s
#   gpt2r       launch -n 2 train --model gpt --steps 30 (small GPT on the fortunes): time_s
#   resnet1     train --model resnet18 --resnet-stem cifar --batch-size 16 --steps 10: time_s
#   resnet2     the same under launch -n 2: time_s
#   mlp4        launch -n 4 train --steps 600 (4 ranks on this host's cores): time_s
#   allreduce2  launch -n 2 comm_bench allreduce 4 KiB - 64 MiB: the sizes' summed time
#   torch2      launch -n 2 python3 bench/torch_mlp_ddp.py (PyTorch DDP, gloo): s per sample
# Hand settings: control (nothing set: the default once more, so default / control is the
# benchmark's own spread for that job), t1, t2 (OMP_NUM_THREADS), t2-passive (and OMP_WAIT_POLICY=passive),
# openblas, onednn (DPT_GEMM, threads as planned), t1-openblas, t1-onednn, t2-openblas,
# t2-onednn, bind (launch --bind cores). A setting that does not apply to a job (the
# engines to PyTorch, --bind without launch) is skipped for it.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bin=$build/bin
ROUNDS=${ROUNDS:-3}
JOBS=${JOBS:-"quickstart cnn2 gpt2r resnet1 resnet2 mlp4 allreduce2 torch2"}
SETTINGS=${SETTINGS:-"control t1 t2 t2-passive openblas onednn t1-openblas t1-onednn t2-openblas t2-onednn bind"}
OUT=${OUT:-bench/results/defaults}
mkdir -p "$OUT/raw"
for b in train launch comm_bench; do [[ -x $bin/$b ]] || { echo "defaults_vs_tuned.sh: $bin/$b missing" >&2; exit 2; }; done
# Nothing of the caller's thread settings leaks into "default".
unset OMP_NUM_THREADS OPENBLAS_NUM_THREADS OMP_WAIT_POLICY DPT_GEMM GOMP_SPINCOUNT OPENBLAS_THREAD_TIMEOUT
export PYTHONPATH=$build/python

setting_env() {  # the environment of a hand setting
  case $1 in
    default|control) echo "" ;;
    t1) echo "OMP_NUM_THREADS=1" ;;
    t2) echo "OMP_NUM_THREADS=2" ;;
    t2-passive) echo "OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive" ;;
    openblas) echo "DPT_GEMM=openblas" ;;
    onednn) echo "DPT_GEMM=onednn" ;;
    t1-openblas) echo "OMP_NUM_THREADS=1 DPT_GEMM=openblas" ;;
    t1-onednn) echo "OMP_NUM_THREADS=1 DPT_GEMM=onednn" ;;
    t2-openblas) echo "OMP_NUM_THREADS=2 DPT_GEMM=openblas" ;;
    t2-onednn) echo "OMP_NUM_THREADS=2 DPT_GEMM=onednn" ;;
    bind) echo "" ;;
  esac
}

applies() {  # JOB SETTING
  case $2 in
    bind) [[ $1 != resnet1 ]] ;;
    openblas|onednn|t1-*|t2-o*) [[ $1 != torch2 && $1 != allreduce2 ]] ;;
    *) true ;;
  esac
}

run_job() {  # JOB SETTING LOG: prints the cost, or nothing when the run failed
  local job=$1 setting=$2 log=$3 launch=("$bin/launch")
  [[ $setting == bind ]] && launch+=(--bind cores)
  local -a envs
  read -r -a envs <<< "$(setting_env "$setting")"
  local t0 t1
  t0=$(date +%s.%N)
  case $job in
    quickstart) env "${envs[@]}" "${launch[@]}" -n 2 "$bin/train" ;;
    cnn2) env "${envs[@]}" "${launch[@]}" -n 2 "$bin/train" --model cnn --steps 300 --max-eval-samples 256 ;;
    gpt2r) env "${envs[@]}" "${launch[@]}" -n 2 "$bin/train" --model gpt --steps 30 --max-eval-samples 64 ;;
    resnet1) env "${envs[@]}" "$bin/train" --model resnet18 --resnet-stem cifar --batch-size 16 --steps 10 --max-eval-samples 64 ;;
    resnet2) env "${envs[@]}" "${launch[@]}" -n 2 "$bin/train" --model resnet18 --resnet-stem cifar --batch-size 16 --steps 10 --max-eval-samples 64 ;;
    mlp4) env "${envs[@]}" "${launch[@]}" -n 4 "$bin/train" --steps 600 --max-eval-samples 256 ;;
    allreduce2) env "${envs[@]}" "${launch[@]}" -n 2 "$bin/comm_bench" --backend tcp -b 4K -e 64M -f 4 -n 10 -w 3 -c 0 --json "$log.json" ;;
    torch2) env "${envs[@]}" "${launch[@]}" -n 2 "${DPT_PYTHON:-.venv/bin/python}" bench/torch_mlp_ddp.py ;;
  esac > "$log" 2>&1 || return 0
  t1=$(date +%s.%N)
  case $job in
    quickstart) echo "$t1 - $t0" | bc -l ;;
    allreduce2) python3 -c "import json,sys; print(sum(r['time_us'] for r in json.load(open(sys.argv[1]))['rows'])/1e6)" "$log.json" 2>/dev/null ||
                python3 -c "import json,sys; print(sum(r['time_us'] for r in json.load(open(sys.argv[1])))/1e6)" "$log.json" ;;
    torch2) sed -En 's/.*torch_ddp: samples_per_s=([0-9.]+).*/\1/p' "$log" | head -1 | awk '{ if ($1 > 0) printf "%.9f\n", 1 / $1 }' ;;
    *) sed -En 's/.*final: .* time_s=([0-9.]+) .*/\1/p' "$log" | head -1 ;;
  esac
}

echo "# defaults vs hand settings, $(date -u +%F), $ROUNDS rounds"
echo "# cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
"$bin/train" --steps 1 --max-eval-samples 16 2>/dev/null | grep -E '^\| (GEMM|threads) ' | sed 's/^/# /'
declare -A costs best
# Each round runs a job's settings in another order (rotated by a third of the list per
# round): the first run after another job is often slower (caches, page cache, the previous
# job's exit), and that must not always land on the same setting.
read -r -a all_settings <<< "default $SETTINGS"
rotated() {  # ROUND: the settings in that round's order
  local n=${#all_settings[@]} shift i
  shift=$(( (($1 - 1) * ((n + ROUNDS - 1) / ROUNDS)) % n ))
  for ((i = 0; i < n; ++i)); do echo "${all_settings[(i + shift) % n]}"; done
}
for ((r = 1; r <= ROUNDS; ++r)); do
  for job in $JOBS; do
    for setting in $(rotated "$r"); do
      applies "$job" "$setting" || continue
      cost=$(run_job "$job" "$setting" "$OUT/raw/$job.$setting.r$r.log")
      if [[ -z $cost ]]; then echo "round $r $job $setting: FAILED (see $OUT/raw/$job.$setting.r$r.log)"; continue; fi
      echo "round $r $job $setting: $cost"
      costs["$job|$setting"]+="$cost "
    done
  done
done

# Each setting's median over the rounds (a best-of over many settings would favour the
# grid by its luckiest run alone).
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {if (NR) printf "%.6g", (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2}'; }
for key in "${!costs[@]}"; do best[$key]=$(median <<< "${costs[$key]}"); done
# Per job: the default's median against the best hand setting's (control excluded), the
# same ratio round by round (paired: both ran in the same round, minutes apart), and
# default / control, the spread of two identical configurations, against which a gap
# between default and best has to be read.
ratio_of() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }  # (medians may be 7.6e-05)
{
  echo "| job | default (median) | best hand setting | its median | default / best | per round | default / control (spread) |"
  echo "|---|---|---|---|---|---|---|"
  for job in $JOBS; do
    d=${best[$job|default]:-}
    bs="" bc_=""
    for setting in $SETTINGS; do
      [[ $setting == control ]] && continue
      c=${best[$job|$setting]:-}
      [[ -z $c ]] && continue
      if [[ -z $bc_ ]] || awk -v c="$c" -v b="$bc_" 'BEGIN { exit !(c < b) }'; then bs=$setting bc_=$c; fi
    done
    ratio=$([[ -n $d && -n $bc_ ]] && ratio_of "$d" "$bc_" || echo "n/a")
    read -r -a dr <<< "${costs[$job|default]:-}"
    read -r -a br <<< "${costs[$job|$bs]:-}"
    per=""
    for ((i = 0; i < ${#dr[@]} && i < ${#br[@]}; ++i)); do per+="$(ratio_of "${dr[i]}" "${br[i]}") "; done
    ctl=${best[$job|control]:-}
    spread=$([[ -n $d && -n $ctl ]] && ratio_of "$d" "$ctl" || echo "n/a")
    echo "| $job | $d | $bs | $bc_ | $ratio | ${per% } | $spread |"
  done
} | tee "$OUT/summary.md"
