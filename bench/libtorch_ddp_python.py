"""Python's DistributedDataParallel (gloo) on bench/libtorch_ddp_step.cpp's model and batch,
for the samples/s comparison of bench/libtorch_ddp.sh. Run under torchrun."""
import argparse
import time

import torch
import torch.distributed as dist
import torch.nn as nn

ap = argparse.ArgumentParser()
ap.add_argument("--layers", type=int, default=8)
ap.add_argument("--width", type=int, default=1024)
ap.add_argument("--batch", type=int, default=32)
ap.add_argument("--steps", type=int, default=30)
ap.add_argument("--warmup", type=int, default=5)
a = ap.parse_args()
dist.init_process_group("gloo")
torch.manual_seed(0)
layers = []
for _ in range(a.layers):
    layers += [nn.Linear(a.width, a.width), nn.ReLU()]
net = nn.Sequential(*layers)
ddp = nn.parallel.DistributedDataParallel(net)
opt = torch.optim.SGD(net.parameters(), lr=1e-4)
x, y = torch.randn(a.batch, a.width), torch.randn(a.batch, a.width)
seconds = 0.0
for step in range(a.warmup + a.steps):
    dist.barrier()
    t0 = time.perf_counter()
    opt.zero_grad()
    nn.functional.mse_loss(ddp(x), y).backward()
    opt.step()
    if step >= a.warmup:
        seconds += time.perf_counter() - t0
world = dist.get_world_size()
if dist.get_rank() == 0:
    print(f"mode=python-ddp-gloo torch={torch.__version__} ranks={world} layers={a.layers} width={a.width} "
          f"batch={a.batch} step_ms={1e3 * seconds / a.steps:.2f} samples_per_s={a.batch * world * a.steps / seconds:.1f}")
dist.destroy_process_group()
