#!/usr/bin/env python3
"""How close each GEMM engine, and each choice rule, comes to the per-shape best on a grid.

Reads one or more outputs of `build/bin/gemm_engines --shapes grid` (the same grid, any
engines: openblas, onednn, mkl) and, per thread count:
  - for each engine alone and for the rules below: the geometric mean over the shapes of
    (the fastest engine's GFLOP/s / the pick's GFLOP/s): 1.0 means always the fastest;
  - mkl against the faster of openblas and onednn, by form (NN/NT/TN) and m*n*k.
With several files (rounds of the same grid) each engine's figure per shape is its best
round: on a shared machine the least disturbed one.

Rules (1 thread, as models/kernels/cpu/gemm_choice.h words them):
  auto      onednn from m*n*k >= 2^20, openblas below (auto's rule at one product thread)
  mkl>=2^T  mkl from m*n*k >= 2^T, openblas below (T = 18, 20, 22)

  bench/gemm_grid_engines.py bench/results/gemm/mkl_grid_1thread_round1.txt \\
                             bench/results/gemm/mkl_grid_1thread_round2.txt
"""
import collections
import re
import statistics
import sys

# "      1  NN    16 x    16 x    16 [+=]    1     62.9 ( 40%)    15.7 ( 10%) ..."
ROW = re.compile(r"\s+(\d+)\s+([NT][NT])\s+(\d+) x\s+(\d+) x\s+(\d+)(?: \+=)?\s+\d+((?:\s+[\d.]+ \(\s*\d+%\))+)")
ENGINES = ("openblas", "onednn", "mkl")


def read_grid(path):
    """{(threads, form, m, n, k): {engine: GFLOP/s}} of one file."""
    head, rows = None, {}
    with open(path) as f:
        for line in f:
            if line.startswith("threads  shape"):
                head = line.split()[3:]
                continue
            m = ROW.match(line)
            if not m or head is None:
                continue
            rates = [float(x) for x in re.findall(r"([\d.]+) \(", m.group(6))]
            key = (int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4)), int(m.group(5)))
            rows[key] = dict(zip(head, rates))
    if not rows:
        sys.exit("gemm_grid_engines.py: %s holds no grid rows (gemm_engines --shapes grid output?)" % path)
    return rows


def best_of(grids):
    """Per shape and engine, the highest rate over the rounds (shapes in all of them)."""
    shapes = set(grids[0]).intersection(*grids[1:])
    return {s: {e: max(g[s][e] for g in grids) for e in grids[0][s]} for s in shapes}


def geomean_ratio(rows, engines, pick):
    """Geometric mean over the shapes of best / pick(shape)."""
    return statistics.geometric_mean(max(r[e] for e in engines) / r[pick(s)] for s, r in rows.items())


def size_bucket(mnk):
    lg = mnk.bit_length() - 1
    return "<=2^15" if lg <= 15 else "2^16-2^19" if lg < 20 else "2^20-2^24" if lg <= 24 else ">2^24"


def report(grid):
    for threads in sorted({s[0] for s in grid}):
        rows = {s: r for s, r in grid.items() if s[0] == threads}
        engines = [e for e in ENGINES if e in next(iter(rows.values()))]
        print("%d thread(s), %d shapes, engines %s" % (threads, len(rows), " ".join(engines)))
        for e in engines:
            wins = sum(1 for r in rows.values() if r[e] == max(r[x] for x in engines))
            print("  %-9s alone: best/pick geomean %.3f, fastest on %d shapes"
                  % (e, geomean_ratio(rows, engines, lambda s, e=e: e), wins))
        mnk = lambda s: s[2] * s[3] * s[4]
        if threads == 1 and {"openblas", "onednn"} <= set(engines):
            print("  auto's rule: %.3f" % geomean_ratio(
                rows, engines, lambda s: "onednn" if mnk(s) >= 2**20 else "openblas"))
            if "mkl" in engines:
                for t in (18, 20, 22):
                    print("  mkl from 2^%d, openblas below: %.3f" % (t, geomean_ratio(
                        rows, engines, lambda s, t=t: "mkl" if mnk(s) >= 2**t else "openblas")))
        if "mkl" in engines and {"openblas", "onednn"} <= set(engines):
            by = collections.defaultdict(list)
            for s, r in rows.items():
                q = r["mkl"] / max(r["openblas"], r["onednn"])
                by[(s[1], size_bucket(mnk(s)))].append(q)
                by[("all", size_bucket(mnk(s)))].append(q)
            print("  mkl / the faster of openblas and onednn, geomean [min..max], by form and m*n*k:")
            for key in sorted(by):
                v = by[key]
                print("    %-3s %-10s n=%3d %.2f [%.2f..%.2f]"
                      % (key[0], key[1], len(v), statistics.geometric_mean(v), min(v), max(v)))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    report(best_of([read_grid(p) for p in sys.argv[1:]]))
