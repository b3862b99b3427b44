#!/usr/bin/env python3
"""PyTorch DDP (gloo) on the Quick start's job, for a ratio against build/bin/train.

The same MLP as dpt's --model mlp (784-256-128-10, ReLU), the same Fashion-MNIST training
set from Debian's dataset-fashion-mnist files (pixels / 255), the same per-rank batch (32),
Adam at lr 1e-3, DistributedSampler with shuffling, one epoch over the whole set. Reported
the way train reports it: samples/s over all ranks from the steps' wall time (the first
--warmup steps excluded), printed by rank 0 as `torch_ddp: samples_per_s=N step_ms=M`.

  build/bin/launch -n 2 /usr/bin/python3 bench/torch_mlp_ddp.py
"""
import argparse
import gzip
import os
import struct
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

DATA = "/usr/share/datasets/fashion-mnist"


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    dims = [struct.unpack(">I", data[4 + 4 * i:8 + 4 * i])[0] for i in range(magic & 0xFF)]
    return torch.frombuffer(bytearray(data[4 + 4 * len(dims):]), dtype=torch.uint8).reshape(dims)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--backend", default="gloo")
    args = ap.parse_args()
    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    x = idx(os.path.join(DATA, "train-images-idx3-ubyte.gz")).float().div_(255).reshape(-1, 784)
    y = idx(os.path.join(DATA, "train-labels-idx1-ubyte.gz")).long()
    data = TensorDataset(x, y)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=args.batch, sampler=sampler)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    steps, samples, t0 = 0, 0, None
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad(set_to_none=True)
            loss_fn(model(xb), yb).backward()
            opt.step()
            steps += 1
            if steps == args.warmup:
                t0 = time.perf_counter()
            elif steps > args.warmup:
                samples += xb.shape[0] * world
    elapsed = time.perf_counter() - t0
    if rank == 0:
        timed = steps - args.warmup
        print(f"torch_ddp: samples_per_s={samples / elapsed:.1f} step_ms={1e3 * elapsed / timed:.3f} steps={steps} "
              f"threads={torch.get_num_threads()} loss={loss_fn(model(x[:1000]), y[:1000]).item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
