#!/usr/bin/env bash
# The same training job with --device cpu and --device cuda must end at the same loss
# (to float32 rounding accumulated over the steps), and the cuda run must have computed
# on the GPU (its final line says device=cuda). A wrong kernel, a gradient that never
# reaches the optimizer or a device bucket averaged wrongly moves the loss by far more.
# usage: cuda_matches_cpu.sh BIN_DIR RANKS BACKEND [train args...]   (TOL env: 2e-3)
set -euo pipefail
bin=$1 np=$2 backend=$3; shift 3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
for dev in cpu cuda; do
  mpiexec --oversubscribe --bind-to none -n "$np" "$bin/train" --backend "$backend" --device "$dev" \
    --log-every 1000 --metrics-out "$work/$dev.jsonl" "$@" >"$work/$dev.log" 2>&1 || { cat "$work/$dev.log"; exit 1; }
done
grep -q "device=cuda" "$work/cuda.log" || { echo "the cuda run did not report device=cuda"; cat "$work/cuda.log"; exit 1; }
python3 - "$work" "${TOL:-2e-3}" <<'PY'
import json, sys
work, tol = sys.argv[1], float(sys.argv[2])
final = {d: [json.loads(l) for l in open(f"{work}/{d}.jsonl") if '"final"' in l][-1] for d in ("cpu", "cuda")}
a, b = final["cpu"]["loss"], final["cuda"]["loss"]
rel = abs(a - b) / max(abs(a), 1e-12)
print(f"final loss cpu {a:.6f} cuda {b:.6f} relative difference {rel:.2e} (tolerance {tol:g})")
print(f"samples/s cpu {final['cpu']['samples_per_s']:.1f} cuda {final['cuda']['samples_per_s']:.1f}")
sys.exit(0 if rel <= tol else 1)
PY
