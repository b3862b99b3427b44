#!/usr/bin/env bash
# GPT-2 124M training on this CPU (issue 27): our fp32 and bf16 steps against PyTorch 2.x's
# fp32 and bf16-autocast steps, and our GEMMs as a fraction of the machine's measured peaks.
#
#   ours fp32     build/bin/gpt2_step --precision fp32 (the GEMM engine DPT_GEMM=auto picks,
#                 printed), one process, THREADS threads; after each timed step one replay of
#                 that step's GEMM calls alone (sgemm_gflops: the GEMMs' own rate).
#   ours bf16     the same with --precision bf16 (bf16 operands, fp32 accumulation, fp32
#                 weights and Adam; oneDNN on AMX or AVX512-BF16 where present).
#   torch fp32    bench/gpt2_torch.py (the same model in plain PyTorch, Adam), THREADS threads.
#   torch bf16    the same under torch.autocast("cpu", dtype=torch.bfloat16).
#   peaks         build/bin/physical_limits: the fp32 FMA peak (the faster of zmm and ymm) and
#                 the AMX bf16 peak on THREADS threads, measured before and after the rounds
#                 (the larger is used).
# Rounds run the four one after the other (interleaved), so a busy spell hits all of them;
# the table gives each round's tokens/s and the ratios within each round, then medians.
# Dropout 0 (speed does not depend on it; PyTorch's and ours draw different masks).
#
# Usage: bench/cpu_compute.sh [ROUNDS=3] [BATCH=4] [SEQ=256] [STEPS=3] [THREADS=2]
# Output: the table on stdout; raw logs in build/bench/cpu_compute/.
set -euo pipefail
rounds=${1:-3}
batch=${2:-4}
seq=${3:-256}
steps=${4:-3}
threads=${5:-2}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/build/bin
out=$root/build/bench/cpu_compute
py=${DPT_PYTHON:-$root/.venv/bin/python}  # PyTorch 2.x (tools/install_deps.sh)
mkdir -p "$out"
for b in gpt2_step physical_limits; do
  [[ -x $bin/$b ]] || { echo "cpu_compute: build $b first (cmake --build build --target gpt2_step physical_limits)" >&2; exit 2; }
done
"$py" -c "import torch" 2>/dev/null || { echo "cpu_compute: $py has no torch (tools/install_deps.sh makes .venv with it)" >&2; exit 2; }

echo "cpu_compute: GPT-2 124M, batch $batch x $seq, $threads threads, $rounds rounds of $steps timed steps;" \
  "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') (family $(grep -m1 'cpu family' /proc/cpuinfo | awk '{print $NF}')" \
  "model $(grep -m1 '^model\s' /proc/cpuinfo | awk '{print $NF}')); load: $(cut -d' ' -f1-3 /proc/loadavg)"
OPENBLAS_NUM_THREADS=$threads "$bin/physical_limits" 0.3 compute > "$out/peak.before" 2>&1
for r in $(seq 1 "$rounds"); do
  for p in fp32 bf16; do
    echo "round $r: ours $p" >&2
    OPENBLAS_NUM_THREADS=$threads "$bin/gpt2_step" --size 124M --batch "$batch" --seq "$seq" --steps "$steps" \
      --warmup 1 --dropout 0 --precision "$p" > "$out/ours_$p.$r.log" 2> "$out/ours_$p.$r.err"
    echo "round $r: torch $p" >&2
    OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads "$py" "$root/bench/gpt2_torch.py" --size 124M \
      --batch "$batch" --seq "$seq" --steps "$steps" --warmup 1 --threads "$threads" --dropout 0 \
      $([[ $p == bf16 ]] && echo --bf16) > "$out/torch_$p.$r.log" 2> "$out/torch_$p.$r.err"
  done
done
OPENBLAS_NUM_THREADS=$threads "$bin/physical_limits" 0.3 compute > "$out/peak.after" 2>&1
grep -h -m1 "^# GEMM:" "$out/ours_fp32.1.log" || true
grep -h -m1 "bf16 GEMM" "$out/ours_bf16.1.log" || true

"$py" - "$out" "$rounds" "$threads" <<'PY'
import re, statistics, sys
out, rounds, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def fields(path):
    line = [l for l in open(path) if l.startswith("result ")][-1]
    return dict(kv.split("=", 1) for kv in line.split()[1:])
def peak(kind):
    best = 0.0
    for f in ("peak.before", "peak.after"):
        for l in open(f"{out}/{f}"):
            m = re.match(r"(.*?)\s+(\d+) threads?\s+([\d.]+) GFLOP/s", l.strip())
            if m and int(m.group(2)) == threads and kind(m.group(1)):
                best = max(best, float(m.group(3)))
    return best
fma = peak(lambda n: n.startswith("fp32 FMA"))
amx = peak(lambda n: "AMX" in n)
cols = ("ours fp32", "ours bf16", "torch fp32", "torch bf16")
print(f"\npeaks ({threads} threads): fp32 FMA {fma:.1f} GFLOP/s, AMX bf16 {amx:.1f} GFLOP/s" if amx else
      f"\npeaks ({threads} threads): fp32 FMA {fma:.1f} GFLOP/s, no AMX")
print("\n| round | " + " | ".join(c + " tokens/s" for c in cols) +
      " | ours/torch fp32 | ours/torch bf16 | ours bf16/fp32 | fp32 GEMM % FMA peak | bf16 GEMM % AMX peak |")
print("|---" * (len(cols) + 6) + "|")
ratios = {k: [] for k in ("f", "b", "bf", "gf", "gb")}
for r in range(1, rounds + 1):
    o32, o16 = fields(f"{out}/ours_fp32.{r}.log"), fields(f"{out}/ours_bf16.{r}.log")
    t32, t16 = fields(f"{out}/torch_fp32.{r}.log"), fields(f"{out}/torch_bf16.{r}.log")
    v = [float(x["tokens_per_s"]) for x in (o32, o16, t32, t16)]
    gf = float(o32["sgemm_gflops"]) / fma if fma else 0.0
    gb = float(o16["sgemm_gflops"]) / amx if amx else 0.0
    row = {"f": v[0] / v[2], "b": v[1] / v[3], "bf": v[1] / v[0], "gf": gf, "gb": gb}
    for k in row: ratios[k].append(row[k])
    print(f"| {r} | " + " | ".join(f"{x:.1f}" for x in v) +
          f" | {row['f']:.2f}x | {row['b']:.2f}x | {row['bf']:.2f}x | {100 * gf:.0f}% | {100 * gb:.0f}% |")
med = {k: statistics.median(v) for k, v in ratios.items()}
print(f"| median | | | | | {med['f']:.2f}x | {med['b']:.2f}x | {med['bf']:.2f}x | {100 * med['gf']:.0f}% | "
      f"{100 * med['gb']:.0f}% |")
PY
