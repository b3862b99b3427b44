"""A DDP MLP on Fashion-MNIST (Debian's dataset-fashion-mnist), the Lab 3 way:
DistributedSampler, set_epoch, DDP, destroy_process_group. `--backend` is the only
thing that differs between a gloo and a dpt run. Each rank prints
`rank <r> step <k> loss <value>` after every optimizer step, and rank 0 the test accuracy.
"""
import argparse
import gzip
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import dpt_torch  # noqa: F401

DATA = os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")


def load_idx(split):
    with gzip.open(os.path.join(DATA, f"{split}-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
    with gzip.open(os.path.join(DATA, f"{split}-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    x = torch.from_numpy(images.astype(np.float32) / 255.0)
    return TensorDataset(x, torch.from_numpy(labels.astype(np.int64)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="dpt")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=256)
    args = parser.parse_args()

    dist.init_process_group(backend=args.backend)
    rank, world_size = dist.get_rank(), dist.get_world_size()

    train, test = load_idx("train"), load_idx("t10k")
    train_sampler = DistributedSampler(train, num_replicas=world_size, rank=rank, shuffle=True, seed=0)
    train_loader = DataLoader(train, batch_size=args.batch_size, sampler=train_sampler)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, args.hidden), nn.ReLU(), nn.Linear(args.hidden, args.hidden), nn.ReLU(),
                          nn.Linear(args.hidden, 10))
    model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    step = 0
    for epoch in range(1, args.epochs + 1):
        train_sampler.set_epoch(epoch)
        model.train()
        for x, y in train_loader:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            print(f"rank {rank} step {step} loss {loss.item():.9e}", flush=True)
            step += 1
            if step >= args.max_steps:
                break
    if rank == 0:
        model.eval()
        with torch.no_grad():
            x, y = test.tensors
            acc = (model(x[:2000]).argmax(1) == y[:2000]).float().mean().item()
        print(f"test accuracy {acc:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
