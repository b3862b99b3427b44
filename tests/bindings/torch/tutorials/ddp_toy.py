"""The PyTorch DDP tutorial's basic example (ToyModel), as a launched program.

Started by torchrun-style launchers (build/bin/launch, torch.distributed.run) or by
mpirun; `--backend` is the only thing that differs between a gloo and a dpt run.
Each rank prints `rank <r> step <k> loss <value>` after every optimizer step.
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel as DDP

import dpt_torch  # noqa: F401  (registers the backend "dpt")


class ToyModel(nn.Module):
    def __init__(self):
        super(ToyModel, self).__init__()
        self.net1 = nn.Linear(10, 10)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(10, 5)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="dpt")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()

    dist.init_process_group(backend=args.backend)
    rank = dist.get_rank()
    print(f"Running basic DDP example on rank {rank}.")

    torch.manual_seed(0)  # the same initial model everywhere (DDP broadcasts it anyway)
    model = ToyModel()
    ddp_model = DDP(model)
    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(ddp_model.parameters(), lr=0.001)

    gen = torch.Generator().manual_seed(1000 + rank)
    for step in range(args.steps):
        optimizer.zero_grad()
        outputs = ddp_model(torch.randn(20, 10, generator=gen))
        labels = torch.randn(20, 5, generator=gen)
        loss = loss_fn(outputs, labels)
        loss.backward()
        optimizer.step()
        print(f"rank {rank} step {step} loss {loss.item():.9e}", flush=True)

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
