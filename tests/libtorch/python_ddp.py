"""Python's DistributedDataParallel (gloo) on what libtorch_losses_for_python wrote: the
same model, rank 0's initial parameters and the same global batches; each rank writes
its per-step loss to DIR/py.rank<R>.txt. Run under torchrun:
    torchrun --nproc-per-node 2 python_ddp.py --model toy --steps 20 --dir DIR
"""
import argparse
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

PER_RANK = 8


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 10)
        self.net2 = nn.Linear(10, 5)

    def forward(self, x):
        return self.net2(F.relu(self.net1(x)))


class MnistNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, 5)
        self.conv2 = nn.Conv2d(10, 20, 5)
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2(x), 2))
        x = F.relu(self.fc1(x.view(-1, 320)))
        return F.log_softmax(self.fc2(x), dim=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["toy", "mnist"], required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--dir", required=True)
    a = ap.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    model = ToyModel() if a.model == "toy" else MnistNet()
    init = np.fromfile(os.path.join(a.dir, "init.bin"), dtype=np.float32)
    at = 0
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy(init[at:at + p.numel()].copy()).view_as(p))
            at += p.numel()
    assert at == init.size, f"init.bin holds {init.size} values, the model {at}"
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    n = PER_RANK * world
    x_shape = (n, 10) if a.model == "toy" else (n, 1, 28, 28)
    xs = np.fromfile(os.path.join(a.dir, "x.bin"), dtype=np.float32).reshape((a.steps,) + x_shape)
    if a.model == "toy":
        ys = np.fromfile(os.path.join(a.dir, "y.bin"), dtype=np.float32).reshape(a.steps, n, 5)
    else:
        ys = np.fromfile(os.path.join(a.dir, "y.bin"), dtype=np.int64).reshape(a.steps, n)
    rows = slice(rank * PER_RANK, (rank + 1) * PER_RANK)
    with open(os.path.join(a.dir, f"py.rank{rank}.txt"), "w") as out:
        for step in range(a.steps):
            x, y = torch.from_numpy(xs[step][rows].copy()), torch.from_numpy(ys[step][rows].copy())
            opt.zero_grad()
            out_t = ddp(x)
            loss = F.mse_loss(out_t, y) if a.model == "toy" else F.nll_loss(out_t, y)
            loss.backward()
            opt.step()
            out.write(f"{step} {loss.item():.9g}\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
