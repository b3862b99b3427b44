#!/usr/bin/env python3
"""Scores size thresholds for auto's one-thread engine rule (models/kernels/cpu/gemm_choice.h,
rule 2b) on a `gemm_engines --shapes grid --threads 1` table: for each threshold T (oneDNN
where m*n*k >= 2^T, OpenBLAS below), the geometric mean over the grid's shapes of the picked
engine's time over the faster engine's (1.0: always the faster one), and the same for each
engine alone.

    build/bin/gemm_engines --shapes grid --threads 1 --coretypes none --no-bf16 --no-ceiling > grid.txt
    bench/gemm_grid_rule.py grid.txt
"""
import re
import statistics
import sys

ROW = re.compile(r"\s+1\s+([NT])([NT])\s+(\d+) x\s+(\d+) x\s+(\d+)( \+=)?\s+\d+\s+([\d.]+) \(\s*\d+%\)\s+([\d.]+)")


def main(path):
    rows = []  # (m*n*k, openblas GFLOP/s, onednn GFLOP/s)
    with open(path) as f:
        for line in f:
            m = ROW.match(line)
            if m:
                mnk = int(m.group(3)) * int(m.group(4)) * int(m.group(5))
                rows.append((mnk, float(m.group(7)), float(m.group(8))))
    if not rows:
        sys.exit(f"{path}: no 1-thread rows with an openblas and an onednn column")
    # Time is flops / rate, so the ratio of times is the inverse ratio of rates.
    def loss(pick_onednn, ob, od):
        best = max(ob, od)
        return best / (od if pick_onednn else ob)

    print(f"{path}: {len(rows)} shapes")
    print(f"openblas alone  {statistics.geometric_mean([loss(False, ob, od) for _, ob, od in rows]):.3f}")
    print(f"onednn alone    {statistics.geometric_mean([loss(True, ob, od) for _, ob, od in rows]):.3f}")
    for t in range(14, 25):
        g = statistics.geometric_mean([loss(mnk >= 2**t, ob, od) for mnk, ob, od in rows])
        print(f"onednn from 2^{t:<2} {g:.3f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench/results/gemm/grid_1thread_cooperlake.txt")
