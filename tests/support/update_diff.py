#!/usr/bin/python3
"""How far apart two runs' parameter updates are, from a common start.

Usage: update_diff.py INIT REF OTHER (--max B | --min B) [--buffers-rtol R]

Each file is a safetensors model. The update of a run is its parameters minus INIT's;
the figure is ||update(OTHER) - update(REF)|| / ||update(REF)||, the L2 norms taken over
every parameter of the model at once (BatchNorm buffers are not parameters and are left
out). --max B passes when the figure is at most B (the runs compute the same updates),
--min B when it is at least B (they do not). Prints the figure and the three tensors
whose updates differ most (relative to their own update's norm), so a pass shows its
margin. --buffers-rtol R also demands that each BatchNorm running statistic of OTHER be
within relative L2 difference R of REF's (SyncBatchNorm: statistics over the global batch).

Why the update and not the parameters: after a few steps of a small learning rate the
parameters are mostly their start, so a relative difference of parameters measures the
update's error scaled down by an amount that depends on the learning rate and the data;
against the update itself the bound means the same for any data. Why the whole model:
one activation within rounding of a ReLU kink changes the gradient of each weight that
sees it by that element's share, up to percents of a small tensor's (a BatchNorm's)
update on some data; its share of the whole update stays small.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402

BUFFER_SUFFIXES = (".running_mean", ".running_var", ".num_batches_tracked")


def main():
    buffers_rtol = None
    if len(sys.argv) == 8 and sys.argv[6] == "--buffers-rtol":
        buffers_rtol = float(sys.argv[7])
        del sys.argv[6:]
    if len(sys.argv) != 6 or sys.argv[4] not in ("--max", "--min"):
        sys.exit(__doc__)
    init, ref, other = (st_io.read(p)[0] for p in sys.argv[1:4])
    bound = float(sys.argv[5])
    names = sorted(k for k in init if not k.endswith(BUFFER_SUFFIXES))
    for side, tensors in (("REF", ref), ("OTHER", other)):
        missing = [k for k in names if k not in tensors or tensors[k].shape != init[k].shape]
        if missing:
            sys.exit(f"update_diff: {side} lacks or reshapes {len(missing)} parameters of INIT: {missing[:5]}")
    diff2 = upd2 = 0.0
    per = []
    for k in names:
        a = init[k].astype(np.float64)
        u_ref, u_other = ref[k].astype(np.float64) - a, other[k].astype(np.float64) - a
        if not (np.isfinite(u_ref).all() and np.isfinite(u_other).all()):
            sys.exit(f"update_diff: {k} has a non-finite value")
        d, u = float(((u_other - u_ref) ** 2).sum()), float((u_ref ** 2).sum())
        diff2 += d
        upd2 += u
        per.append((np.sqrt(d / u) if u > 0 else (0.0 if d == 0 else float("inf")), k))
    if upd2 == 0:
        sys.exit("update_diff: REF did not move from INIT: nothing to compare")
    figure = float(np.sqrt(diff2 / upd2))
    worst = ", ".join(f"{k} {e:.1e}" for e, k in sorted(per, reverse=True)[:3])
    ok = figure <= bound if sys.argv[4] == "--max" else figure >= bound
    print(f"update difference {figure:.2e} over {len(names)} parameters ({'<=' if sys.argv[4] == '--max' else '>='} {bound:g}"
          f" {'holds' if ok else 'FAILS'}); most per tensor: {worst}")
    if buffers_rtol is not None:
        stats = sorted(k for k in ref if k.endswith((".running_mean", ".running_var")))
        if not stats or any(k not in other or other[k].shape != ref[k].shape for k in stats):
            sys.exit("update_diff: no running statistics to compare, or OTHER lacks some of REF's")
        errs = [(float(np.linalg.norm(other[k].astype(np.float64) - ref[k]) / max(np.linalg.norm(ref[k].astype(np.float64)), 1e-30)), k)
                for k in stats]
        e, k = max(errs)
        b_ok = e <= buffers_rtol and all(np.isfinite(other[k]).all() for k in stats)
        print(f"running statistics: {len(stats)} tensors, largest relative difference {e:.2e} ({k}; <= {buffers_rtol:g} "
              f"{'holds' if b_ok else 'FAILS'})")
        ok = ok and b_ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
