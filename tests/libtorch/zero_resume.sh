#!/bin/bash
# A libtorch program under dpt::torch's DDP + ZeRO (stage $3) saved at step 5 of 10 on 2
# ranks and resumed on 3 (and on 1) ends where the uninterrupted 2-rank run ends, within
# 1e-5 relative (float32 rounding of other batch splits; a resume that drops Adam's
# moments misses by about 1e-2).
#   zero_resume.sh BIN_DIR PYTHON STAGE
set -euo pipefail
bin=$1 py=$2 stage=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prog=$bin/libtorch_zero_resume
"$bin/launch" -n 2 "$prog" --stage "$stage" --steps 10 --save-at 5 --dir "$tmp/ckpt" --out "$tmp/whole.bin"
"$bin/launch" -n 3 "$prog" --stage "$stage" --steps 10 --resume "$tmp/ckpt" --out "$tmp/resumed3.bin"
"$bin/launch" -n 1 "$prog" --stage "$stage" --steps 10 --resume "$tmp/ckpt" --out "$tmp/resumed1.bin"
ls "$tmp/ckpt"
"$py" - "$tmp" <<'PY'
import sys, numpy as np
d = sys.argv[1]
whole = np.fromfile(f"{d}/whole.bin", dtype=np.float32)
ok = True
for name in ("resumed3", "resumed1"):
    other = np.fromfile(f"{d}/{name}.bin", dtype=np.float32)
    rel = float(np.abs(other - whole).max() / np.abs(whole).max())
    print(f"{name}: {other.size} parameters, max relative difference from the uninterrupted run {rel:.3g}")
    ok &= other.size == whole.size and rel < 1e-5
sys.exit(0 if ok else 1)
PY
