#!/usr/bin/env bash
# GPT-2 124M training speed against PyTorch (the .venv's 2.x), in one go (issue 17, item 7).
#
# Workload: batch 4 x sequence 64 per rank, Adam (lr 3e-5), fp32, dropout 0.1 (GPT-2's),
# random token ids over the 50257 vocabulary (speed does not depend on their values).
#   ours, 1 process     build/bin/gpt2_step (bench/gpt2_step.cpp), OPENBLAS_NUM_THREADS=2:
#                       tokens/s, and the 75% goal: after every timed step, one replay of
#                       that step's GEMM calls as raw OpenBLAS sgemm (GemmReplay); the
#                       ratio is replay time / step time per pair (median), and also the
#                       fastest replay against the fastest step; memory.
#   torch, 1 process    bench/gpt2_torch.py, torch.set_num_threads(2) (OPENBLAS_NUM_THREADS=2
#                       too: PyTorch here calls the same OpenBLAS).
#   ours, 2-rank DDP    build/bin/launch -n 2 build/bin/train --model gpt2 (the product,
#                       tcp backend, byte-level text corpus as token ids), 1 BLAS thread per
#                       rank; steady-state tokens/s from its per-step metrics after warm-up.
#   torch, 2-rank DDP   bench/gpt2_torch.py --ddp 2 (gloo, DistributedDataParallel), 1 thread
#                       per rank.
# The machine is shared: each round runs the four one after the other (interleaved), and
# ROUNDS rounds are taken; the table gives the median over rounds and every round's
# value, plus the ratios computed within each round.
#
# Usage: bench/gpt2_speed.sh [ROUNDS (default 3)] [STEPS (default 6)] [WARMUP (default 2)]
# Output: a table on stdout; raw logs in build/bench/gpt2_speed/.
set -euo pipefail
rounds=${1:-3}
steps=${2:-6}
warmup=${3:-2}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/build/bin
out=$root/build/bench/gpt2_speed
mkdir -p "$out"
py=${DPT_PYTHON:-$root/.venv/bin/python}  # PyTorch 2.x (tools/install_deps.sh)
for b in gpt2_step train launch; do
  [[ -x $bin/$b ]] || { echo "gpt2_speed: build $b first (cmake --build build --target gpt2_step train launch)" >&2; exit 2; }
done

echo "gpt2_speed: $rounds rounds, $steps timed steps after $warmup warm-up steps; load: $(cut -d' ' -f1-3 /proc/loadavg); torch $("$py" -c "import torch; print(torch.__version__)")"
for r in $(seq 1 "$rounds"); do
  echo "round $r: ours (1 process)" >&2
  OPENBLAS_NUM_THREADS=2 "$bin/gpt2_step" --size 124M --batch 4 --seq 64 --steps "$steps" --warmup "$warmup" \
    > "$out/ours1.$r.log" 2> "$out/ours1.$r.err"
  echo "round $r: torch (1 process)" >&2
  OPENBLAS_NUM_THREADS=2 OMP_NUM_THREADS=2 "$py" "$root/bench/gpt2_torch.py" --size 124M --batch 4 --seq 64 \
    --steps "$steps" --warmup "$warmup" --threads 2 > "$out/torch1.$r.log" 2> "$out/torch1.$r.err"
  echo "round $r: ours (2-rank DDP)" >&2
  rm -f "$out/oursddp.$r.jsonl"
  # --dataset text: full 64-token windows, as the other three runs' random tokens (gpt2's
  # default, text-docs, pads short fortunes).
  OPENBLAS_NUM_THREADS=1 "$bin/launch" -n 2 "$bin/train" --model gpt2 --gpt2-size 124M --dataset text --batch-size 4 --seq-len 64 \
    --optimizer adam --lr 3e-5 --lr-schedule constant --steps $((steps + warmup)) --log-every 1 \
    --max-eval-samples 4 --metrics-out "$out/oursddp.$r.jsonl" > "$out/oursddp.$r.log" 2>&1
  echo "round $r: torch (2-rank DDP)" >&2
  OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "$py" "$root/bench/gpt2_torch.py" --size 124M --batch 4 --seq 64 \
    --steps "$steps" --warmup "$warmup" --threads 1 --ddp 2 > "$out/torchddp.$r.log" 2> "$out/torchddp.$r.err"
done

WARMUP=$warmup "$py" - "$out" "$rounds" <<'PY'
import json, re, statistics, sys, subprocess
out, rounds = sys.argv[1], int(sys.argv[2])
def fields(path):
    line = [l for l in open(path) if l.startswith("result ")][-1]
    return dict(kv.split("=", 1) for kv in line.split()[1:])
def ddp(path, warmup):
    rows = [json.loads(l) for l in open(path) if '"samples_per_s"' in l and '"step"' in l]
    t = {r["step"]: r["step"] * 8 / r["samples_per_s"] for r in rows}
    last = max(t)
    return (last - warmup) * 8 * 64 / (t[last] - t[warmup])
import os
warmup = int(os.environ.get("WARMUP", "2"))
rows = {k: [] for k in ("ours1", "torch1", "ours_best", "torch_best", "oursddp", "torchddp", "achieved", "sgemm",
                        "ratio", "best_ratio", "rss", "states", "act", "torch_rss")}
for r in range(1, rounds + 1):
    o, t, td = fields(f"{out}/ours1.{r}.log"), fields(f"{out}/torch1.{r}.log"), fields(f"{out}/torchddp.{r}.log")
    rows["ours1"].append(float(o["tokens_per_s"])); rows["torch1"].append(float(t["tokens_per_s"]))
    rows["ours_best"].append(float(o["best_tokens_per_s"])); rows["torch_best"].append(float(t["best_tokens_per_s"]))
    rows["oursddp"].append(ddp(f"{out}/oursddp.{r}.jsonl", warmup)); rows["torchddp"].append(float(td["tokens_per_s"]))
    rows["achieved"].append(float(o["achieved_gflops"])); rows["sgemm"].append(float(o["sgemm_gflops"]))
    rows["ratio"].append(float(o["gemm_ratio"])); rows["best_ratio"].append(float(o["best_gemm_ratio"]))
    rows["rss"].append(float(o["peak_rss_mb"])); rows["states"].append(float(o["states_mb"]))
    rows["act"].append(float(o["activations_mb"])); rows["torch_rss"].append(float(t["peak_rss_mb"]))
med = {k: statistics.median(v) for k, v in rows.items()}
each = lambda k, f="{:.1f}": ", ".join(f.format(x) for x in rows[k])
ratio = lambda a, b: [x / y for x, y in zip(rows[a], rows[b])]
print()
print("| GPT-2 124M, batch 4 x 64 tokens per rank, Adam, fp32 | ours | PyTorch | ours / PyTorch (per round) |")
print("|---|---|---|---|")
print(f"| 1 process, 2 threads: tokens/s (mean step) | {med['ours1']:.1f} ({each('ours1')}) | {med['torch1']:.1f} ({each('torch1')}) | "
      f"{statistics.median(ratio('ours1', 'torch1')):.2f}x ({', '.join(f'{x:.2f}' for x in ratio('ours1', 'torch1'))}) |")
print(f"| 1 process, 2 threads: tokens/s (fastest step) | {med['ours_best']:.1f} | {med['torch_best']:.1f} | "
      f"{statistics.median(ratio('ours_best', 'torch_best')):.2f}x |")
print(f"| 2-rank DDP, 1 thread each: tokens/s (both ranks) | {med['oursddp']:.1f} ({each('oursddp')}) | {med['torchddp']:.1f} ({each('torchddp')}) | "
      f"{statistics.median(ratio('oursddp', 'torchddp')):.2f}x ({', '.join(f'{x:.2f}' for x in ratio('oursddp', 'torchddp'))}) |")
print()
print("| ours, 1 process | median | rounds |")
print("|---|---|---|")
print(f"| step's GEMM GFLOP/s (mean step) | {med['achieved']:.2f} | {each('achieved', '{:.2f}')} |")
print(f"| OpenBLAS sgemm GFLOP/s on the step's own GEMM calls (fastest replay) | {med['sgemm']:.2f} | {each('sgemm', '{:.2f}')} |")
print(f"| GEMM ratio, goal >= 0.75: median of step/replay pairs; fastest step / fastest replay | {med['ratio']:.3f}; {med['best_ratio']:.3f} | {each('ratio', '{:.3f}')}; {each('best_ratio', '{:.3f}')} |")
print(f"| model states, 16 B/param (MiB) | {med['states']:.0f} | |")
print(f"| activations and buffers, measured (MiB) | {med['act']:.0f} | |")
print(f"| peak RSS (MiB); PyTorch's | {med['rss']:.0f}; {med['torch_rss']:.0f} | {each('rss', '{:.0f}')}; {each('torch_rss', '{:.0f}')} |")
PY
