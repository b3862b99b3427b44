#!/usr/bin/python3
"""Compute-only step time of bench/torch_ddp.py's "large" model (784-4096-4096-512-10): the
floor under any DDP step of it. Run two at once, one torch thread each, as the 2-rank
DDP run has 2 ranks on 2 cores:
  /usr/bin/python3 bench/torch_compute_only.py & /usr/bin/python3 bench/torch_compute_only.py; wait
"""
import time

import torch
import torch.nn as nn
torch.set_num_threads(1)
w = [784, 4096, 4096, 512, 10]
layers = []
for i in range(len(w) - 1):
    layers.append(nn.Linear(w[i], w[i + 1]))
    if i < len(w) - 2: layers.append(nn.ReLU())
m = nn.Sequential(*layers)
opt = torch.optim.SGD(m.parameters(), lr=0.01)
x = torch.randn(64, 784); y = torch.randint(0, 10, (64,))
def step():
    opt.zero_grad(); nn.functional.cross_entropy(m(x), y).backward(); opt.step()
for _ in range(3): step()
t = time.time()
for _ in range(10): step()
print(f"{(time.time() - t) / 10 * 1000:.1f} ms per step")
