#!/usr/bin/env python3
"""torch.distributed.all_reduce, float32: dpt against gloo in one job, same tensors.

Each rank makes both process groups (the default one on gloo, a second one over the
same ranks on dpt) and, for every size, times the two alternately, in rounds, so both
see the same machine load. Launch it with any launcher:

  build/bin/launch -n 2 /usr/bin/python3 bench/torch_allreduce.py --out bench/results/torch_allreduce_np2.json

Per size and backend: the median over rounds of the mean time per all_reduce (rank 0's
clock, each timed loop framed by a barrier), algorithm bandwidth bytes/time and bus
bandwidth 2(n-1)/n * algbw (nccl-tests' definition). Rank 0 prints a table and the
dpt/gloo ratios and writes JSON.
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist

import dpt_torch  # noqa: F401


def sizes(lo, hi):
    s = lo
    while s <= hi:
        yield s
        s *= 4


def timed(t, group, iters):
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t, group=group)
    dist.barrier(group=group)
    return (time.perf_counter() - t0) / iters


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-bytes", type=int, default=4 << 10)
    ap.add_argument("--max-bytes", type=int, default=64 << 20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--budget-s", type=float, default=0.4, help="seconds per timed loop (sets the iterations)")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    groups = {"gloo": dist.group.WORLD, "dpt": dist.new_group(backend="dpt")}
    n, rank = dist.get_world_size(), dist.get_rank()
    rows = []
    for nbytes in sizes(args.min_bytes, args.max_bytes):
        t = torch.zeros(nbytes // 4)  # zeros stay zeros however often they are summed
        # Iterations from a probe on gloo (the slower), the same for both backends.
        iters = 2
        probe = timed(t, groups["gloo"], iters)
        iters = max(3, min(2000, int(args.budget_s / max(probe, 1e-6))))
        # agree on iters (rank 0's)
        it = torch.tensor([iters])
        dist.broadcast(it, 0)
        iters = int(it.item())
        times = {b: [] for b in groups}
        for _ in range(args.rounds):
            for b, g in groups.items():
                times[b].append(timed(t, g, iters))
        row = {"bytes": nbytes, "iters": iters}
        for b in groups:
            sec = statistics.median(times[b])
            alg = nbytes / sec / 1e9
            row[b] = {"us": sec * 1e6, "algbw_GBs": alg, "busbw_GBs": alg * 2 * (n - 1) / n}
        row["busbw_ratio"] = row["dpt"]["busbw_GBs"] / row["gloo"]["busbw_GBs"]
        row["latency_ratio"] = row["dpt"]["us"] / row["gloo"]["us"]
        rows.append(row)
        if rank == 0:
            print(f"{nbytes:>10} B  gloo {row['gloo']['us']:10.1f} us {row['gloo']['busbw_GBs']:7.3f} GB/s   "
                  f"dpt {row['dpt']['us']:10.1f} us {row['dpt']['busbw_GBs']:7.3f} GB/s   "
                  f"busbw dpt/gloo {row['busbw_ratio']:6.2f}x  time dpt/gloo {row['latency_ratio']:.3f}", flush=True)
    # Both groups really sum:
    for b, g in groups.items():
        x = torch.full((1000,), float(rank + 1))
        dist.all_reduce(x, group=g)
        assert torch.all(x == n * (n + 1) / 2), (b, x[:3])
    if rank == 0 and args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump({"ranks": n, "host": os.uname().nodename, "rows": rows}, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
