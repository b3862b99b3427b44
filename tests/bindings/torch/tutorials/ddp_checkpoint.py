"""The DDP tutorial's checkpoint example with the notebook's all_gather_object:
rank 0 saves the model, a barrier makes the others wait for the file, every rank loads
it, trains, gathers a Python object from every rank, and rank 0 removes the file.
`--backend` is the only thing that differs between a gloo and a dpt run.
"""
import argparse
import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel as DDP

import dpt_torch  # noqa: F401
from ddp_toy import ToyModel  # the tutorial defines it once for both examples


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="dpt")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--checkpoint", default=os.path.join(tempfile.gettempdir(), "dpt_tutorial_model.checkpoint"))
    args = parser.parse_args()

    dist.init_process_group(backend=args.backend)
    rank, world_size = dist.get_rank(), dist.get_world_size()
    print(f"Running DDP checkpoint example on rank {rank}.")
    # One file per job: the launcher's port tells concurrent jobs apart.
    path = f"{args.checkpoint}.{os.environ.get('MASTER_PORT', '0')}"

    torch.manual_seed(rank)  # different on purpose: the checkpoint makes them equal
    model = ToyModel()
    ddp_model = DDP(model)
    if rank == 0:
        # All processes should see same parameters as they all start from same
        # random parameters and gradients are synchronized in backward passes.
        # Therefore, saving it in one process is sufficient.
        torch.save(ddp_model.state_dict(), path)
    # Use a barrier() to make sure that the other processes load the model after
    # process 0 saves it.
    dist.barrier()
    ddp_model.load_state_dict(torch.load(path, map_location="cpu"))

    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(ddp_model.parameters(), lr=0.001)
    gen = torch.Generator().manual_seed(2000 + rank)
    for step in range(args.steps):
        optimizer.zero_grad()
        outputs = ddp_model(torch.randn(20, 10, generator=gen))
        labels = torch.randn(20, 5, generator=gen)
        loss = loss_fn(outputs, labels)
        loss.backward()
        optimizer.step()
        print(f"rank {rank} step {step} loss {loss.item():.9e}", flush=True)

    data = {"tensor": torch.ones(3) + rank, "list": [1, 2, 3] + [rank], "dict": {"rank": rank}}
    outputs = [None for _ in range(world_size)]
    dist.all_gather_object(outputs, data)
    expected = [{"list": [1, 2, 3, r], "dict": {"rank": r}, "tensor": (torch.ones(3) + r).tolist()} for r in range(world_size)]
    got = [{"list": o["list"], "dict": o["dict"], "tensor": o["tensor"].tolist()} for o in outputs]
    if got != expected:
        raise SystemExit(f"all_gather_object gave {got}, expected {expected}")
    print(f"all_gather_object: {world_size} objects, correct", flush=True)

    # Not necessary to use a dist.barrier() to guard the file deletion below
    # as the AllReduce ops in the backward pass of DDP already served as
    # a synchronization.
    dist.barrier()
    if rank == 0:
        os.remove(path)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
