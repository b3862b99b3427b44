#!/usr/bin/python3
"""Whether two training runs follow the same loss curve, at a precision that changes the
rounding of every step (bf16 against fp32).

Usage: loss_curves.py REF.jsonl OTHER.jsonl --window W --mean-rtol M --step-rtol S

Both metrics files (train --metrics-out) must log the same steps, every loss finite. The
losses are cut into consecutive windows of W steps: each window's mean loss of OTHER is
within M (relative) of REF's, and every single step within S. Why windows: a step's loss
is one batch's, and a run in another precision takes other rounding decisions from the
first step on, so single steps scatter around the curve (bf16 against fp32 on the MLP:
up to 3.0% at one step on one OpenBLAS kernel, 2.0% on another) while the curve itself
agrees far closer (10-step means within 0.5% on both). A step bound alone either fails
on noise or is too loose to see a curve that is off.
"""
import json
import math
import sys


def losses(path):
    out = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            j = json.loads(line)
            if "step" in j and "loss" in j and not j.get("final"):
                v = j["loss"]
                if v is None or not math.isfinite(v):
                    sys.exit(f"loss_curves: {path} line {n}: loss at step {j['step']} is not finite")
                out[int(j["step"])] = float(v)
    return out


def main():
    a = sys.argv[1:]
    if len(a) != 8 or a[2::2] != ["--window", "--mean-rtol", "--step-rtol"]:
        sys.exit(__doc__)
    ref, other = losses(a[0]), losses(a[1])
    w, mean_rtol, step_rtol = int(a[3]), float(a[5]), float(a[7])
    if not ref or set(ref) != set(other):
        sys.exit(f"loss_curves: the runs log different steps (or none): {sorted(set(ref) ^ set(other))[:8]}")
    steps = sorted(ref)
    worst_step = max((abs(other[s] - ref[s]) / abs(ref[s]), s) for s in steps)
    windows = []
    for i in range(0, len(steps), w):
        chunk = steps[i:i + w]
        mr, mo = sum(ref[s] for s in chunk) / len(chunk), sum(other[s] for s in chunk) / len(chunk)
        windows.append((abs(mo - mr) / abs(mr), chunk[0], chunk[-1]))
    worst_window = max(windows)
    ok = worst_window[0] <= mean_rtol and worst_step[0] <= step_rtol
    print(f"loss curves: {len(steps)} steps; {len(windows)} windows of {w}: largest mean difference {worst_window[0]:.4f}"
          f" (steps {worst_window[1]}-{worst_window[2]}; allowed {mean_rtol}); largest step difference {worst_step[0]:.4f}"
          f" (step {worst_step[1]}; allowed {step_rtol}): {'MATCH' if ok else 'MISMATCH'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
