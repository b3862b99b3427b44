#!/bin/bash
# dpt::torch::DistributedDataParallel against Python's DistributedDataParallel (gloo,
# the same torch) from the same initial weights and batches: every rank's loss at every
# step within 1e-6 relative.
#   vs_python_ddp.sh BIN_DIR PYTHON MODEL(toy|mnist) [STEPS]
set -euo pipefail
bin=$1 py=$2 model=$3 steps=${4:-20}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin/launch" -n 2 "$bin/libtorch_losses_for_python" --model "$model" --steps "$steps" --dir "$tmp"
reference() {
  OMP_NUM_THREADS=1 "$py" -m torch.distributed.run --standalone --nproc-per-node 2 \
    "$here/python_ddp.py" --model "$model" --steps "$steps" --dir "$tmp"
}
# The reference is PyTorch's own gloo run, not ours: a crash of it (seen once in a loaded
# full suite: its rank 0 aborted with "terminate called without an active exception") is
# run again once, and said so; a second failure fails the test.
reference || { echo "vs_python_ddp: the Python DDP reference run failed; running it again once"; reference; }
"$py" - "$tmp" "$steps" <<'PY'
import sys
d, steps = sys.argv[1], int(sys.argv[2])
worst = 0.0
for r in (0, 1):
    cpp = [float(l.split()[1]) for l in open(f"{d}/cpp.rank{r}.txt")]
    py = [float(l.split()[1]) for l in open(f"{d}/py.rank{r}.txt")]
    assert len(cpp) == len(py) == steps, (len(cpp), len(py))
    for s, (a, b) in enumerate(zip(cpp, py)):
        worst = max(worst, abs(a - b) / abs(b))
    print(f"rank {r}: libtorch+dpt losses {cpp[0]:.6f} .. {cpp[-1]:.6f}, Python DDP gloo {py[0]:.6f} .. {py[-1]:.6f}")
print(f"max relative loss difference over {steps} steps and 2 ranks: {worst:.3g}")
sys.exit(0 if worst <= 1e-6 else 1)
PY
