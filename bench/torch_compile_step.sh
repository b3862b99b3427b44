#!/usr/bin/env bash
# GPT-2 124M training step: ours (fp32, bf16) against PyTorch 2.x eager and torch.compile
# (inductor), fp32 and bf16 autocast, interleaved in rounds (issue 55, item 4). The
# compiled runs compile during their warm-up step (its time is printed apart, from the
# logged step times); tokens/s counts the timed steps after it. Same model, batch, thread
# count and Adam as bench/cpu_compute.sh (whose table has no compiled column).
#
# Usage: bench/torch_compile_step.sh [ROUNDS=2] [BATCH=4] [SEQ=64] [STEPS=3] [THREADS=2]
# Output: the table on stdout; raw logs in build/bench/torch_compile/.
set -euo pipefail
rounds=${1:-2} batch=${2:-4} seq=${3:-64} steps=${4:-3} threads=${5:-2}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/build/bin
out=$root/build/bench/torch_compile
py=${DPT_PYTHON:-$root/.venv/bin/python}
mkdir -p "$out"
[[ -x $bin/gpt2_step ]] || { echo "torch_compile_step: build gpt2_step first" >&2; exit 2; }
"$py" -c "import torch" 2>/dev/null || { echo "torch_compile_step: $py has no torch (tools/install_deps.sh)" >&2; exit 2; }
echo "torch_compile_step: GPT-2 124M, batch $batch x $seq, $threads threads, $rounds rounds of $steps timed steps;" \
  "torch $("$py" -c 'import torch; print(torch.__version__)'); CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- |
  sed 's/^ *//') (family $(grep -m1 'cpu family' /proc/cpuinfo | awk '{print $NF}') model $(grep -m1 '^model\s' \
  /proc/cpuinfo | awk '{print $NF}')); load: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$rounds"); do
  for p in fp32 bf16; do
    echo "round $r: ours $p" >&2
    OPENBLAS_NUM_THREADS=$threads "$bin/gpt2_step" --size 124M --batch "$batch" --seq "$seq" --steps "$steps" \
      --warmup 1 --dropout 0 --precision "$p" --no-gemm >"$out/ours_$p.$r.log" 2>"$out/ours_$p.$r.err"
    for mode in eager compiled; do
      echo "round $r: torch $p $mode" >&2
      OMP_NUM_THREADS=$threads "$py" "$root/bench/gpt2_torch.py" --size 124M --batch "$batch" --seq "$seq" \
        --steps "$steps" --warmup 1 --threads "$threads" --dropout 0 $([[ $p == bf16 ]] && echo --bf16) \
        $([[ $mode == compiled ]] && echo --compile) >"$out/torch_${p}_$mode.$r.log" 2>"$out/torch_${p}_$mode.$r.err"
    done
  done
done
"$py" - "$out" "$rounds" <<'PY'
import re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def tps(path):
    line = [l for l in open(path) if l.startswith("result ")][-1]
    return float(dict(kv.split("=", 1) for kv in line.split()[1:])["tokens_per_s"])
def first_step_s(path):  # the warm-up step: where torch.compile compiles
    m = [re.match(r"step 0 loss \S+ ([\d.]+) s", l) for l in open(path)]
    return next(float(x.group(1)) for x in m if x)
cols = [("ours", "fp32"), ("torch eager", "fp32"), ("torch compiled", "fp32"),
        ("ours", "bf16"), ("torch eager", "bf16"), ("torch compiled", "bf16")]
def path(who, p, r):
    return f"{out}/ours_{p}.{r}.log" if who == "ours" else \
        f"{out}/torch_{p}_{'eager' if who == 'torch eager' else 'compiled'}.{r}.log"
print("\n| round | " + " | ".join(f"{w} {p}" for w, p in cols) +
      " | ours/compiled fp32 | ours/compiled bf16 | compiled/eager fp32 | compiled/eager bf16 |")
print("|---" * (len(cols) + 5) + "|")
ratios = [[], [], [], []]
for r in range(1, rounds + 1):
    v = [tps(path(w, p, r)) for w, p in cols]
    row = [v[0] / v[2], v[3] / v[5], v[2] / v[1], v[5] / v[4]]
    for i, x in enumerate(row): ratios[i].append(x)
    print(f"| {r} | " + " | ".join(f"{x:.1f}" for x in v) + " | " + " | ".join(f"{x:.2f}x" for x in row) + " |")
print("| median | " + " | " * (len(cols) - 1) + " | " + " | ".join(f"{statistics.median(x):.2f}x" for x in ratios) + " |")
print("\ncompile (the compiled runs' warm-up step, s): " + ", ".join(
    f"{p} round {r} {first_step_s(path('torch compiled', p, r).replace('.log', '.err')):.1f}"
    for p in ("fp32", "bf16") for r in range(1, rounds + 1)))
PY
