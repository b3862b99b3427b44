#!/usr/bin/env python3
"""PyTorch DDP training speed, backend "dpt" against "gloo", in one job.

Every rank builds the model twice from one seed and wraps one copy in DDP over a gloo
group and the other in DDP over a dpt group (same ranks, same DDP settings), then
trains them alternately, --steps steps at a time, for --rounds rounds, on the same
synthetic batches (random inputs and labels drawn once: the data pipeline is not what
is measured). Reported: samples/s over all ranks (median of the rounds) per backend,
and their ratio.

  build/bin/launch -n 2 /usr/bin/python3 bench/torch_ddp.py --model large
Models: mlp (the Fashion-MNIST MLP, 784-256-256-10, 0.27M parameters) and large
(784-4096-4096-512-10, 22.10M parameters).
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import dpt_torch  # noqa: F401

WIDTHS = {"mlp": [784, 256, 256, 10], "large": [784, 4096, 4096, 512, 10]}


def make_model(widths):
    torch.manual_seed(0)
    layers = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1]))
        if i < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=sorted(WIDTHS), default="large")
    ap.add_argument("--batch", type=int, default=64, help="samples per rank per step")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")
    n, rank = dist.get_world_size(), dist.get_rank()
    groups = {"gloo": dist.group.WORLD, "dpt": dist.new_group(backend="dpt")}
    widths = WIDTHS[args.model]
    models = {b: DDP(make_model(widths), process_group=g) for b, g in groups.items()}
    params = sum(p.numel() for p in models["gloo"].parameters())
    opts = {b: torch.optim.SGD(m.parameters(), lr=0.01) for b, m in models.items()}
    gen = torch.Generator().manual_seed(100 + rank)
    xs = [torch.randn(args.batch, widths[0], generator=gen) for _ in range(args.steps)]
    ys = [torch.randint(0, widths[-1], (args.batch,), generator=gen) for _ in range(args.steps)]
    loss_fn = nn.CrossEntropyLoss()

    def train(b):
        m, opt = models[b], opts[b]
        dist.barrier(group=groups[b])
        t0 = time.perf_counter()
        for x, y in zip(xs, ys):
            opt.zero_grad()
            loss = loss_fn(m(x), y)
            loss.backward()
            opt.step()
        dist.barrier(group=groups[b])
        return time.perf_counter() - t0, loss.item()

    for b in groups:  # warm-up: allocations, DDP's first-iteration bucket rebuild
        train(b)
    rates = {b: [] for b in groups}
    last = {}
    for _ in range(args.rounds):
        for b in groups:
            sec, last[b] = train(b)
            rates[b].append(args.steps * args.batch * n / sec)
    res = {b: statistics.median(r) for b, r in rates.items()}
    if rank == 0:
        print(f"model {args.model} ({params / 1e6:.2f}M parameters), {n} ranks x batch {args.batch}, "
              f"{args.rounds} rounds of {args.steps} steps")
        for b in groups:
            print(f"  {b:5s} {res[b]:10.1f} samples/s   (rounds: {', '.join(f'{r:.0f}' for r in rates[b])}; "
                  f"last loss {last[b]:.6f})")
        print(f"  dpt/gloo {res['dpt'] / res['gloo']:.2f}x", flush=True)
        if args.out:
            os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
            with open(args.out, "w") as f:
                json.dump({"model": args.model, "parameters": params, "ranks": n, "batch": args.batch,
                           "samples_per_s": res, "rounds": rates, "ratio": res["dpt"] / res["gloo"]}, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
