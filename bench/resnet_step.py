#!/usr/bin/python3
"""ResNet-18 training steps in PyTorch 2.x (torchvision), the reference resnet_step.sh
times our train_local against.

Usage: resnet_step.py --threads T --batch B --steps S --stem imagenet|cifar --data DIR [--bf16]

Trains torchvision.models.resnet18(num_classes=10) (the cifar stem: conv1 3x3/1 and no
max-pool) with SGD (lr 0.01, momentum 0.9) on batches of the CIFAR-10 binary files in
DIR, read, scaled and normalised once before timing (what train_local's prefetching
loader hides), and prints the figure train_local prints: samples / (sum of step times),
a step being zero_grad + forward + loss + backward + optimizer step, every step counted.
--bf16: forward and loss under torch.autocast("cpu", dtype=torch.bfloat16) (bf16
convolutions and matmuls through oneDNN, fp32 master weights), backward outside it, as
PyTorch's CPU mixed-precision recipe does.
"""
import argparse
import os
import time

import numpy as np
import torch
import torchvision

p = argparse.ArgumentParser()
p.add_argument("--threads", type=int, required=True)
p.add_argument("--batch", type=int, default=32)
p.add_argument("--steps", type=int, default=30)
p.add_argument("--stem", default="imagenet")
p.add_argument("--data", required=True)
p.add_argument("--bf16", action="store_true")
a = p.parse_args()
torch.set_num_threads(a.threads)

raw = b"".join(open(os.path.join(a.data, f"data_batch_{i}.bin"), "rb").read() for i in range(1, 6))
rec = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3073)
labels = torch.from_numpy(rec[:, 0].astype(np.int64))
mean = np.array([0.4914, 0.4822, 0.4465], np.float32).reshape(1, 3, 1, 1)
std = np.array([0.2023, 0.1994, 0.2010], np.float32).reshape(1, 3, 1, 1)
images = torch.from_numpy(((rec[:, 1:].reshape(-1, 3, 32, 32).astype(np.float32) / 255.0) - mean) / std)

model = torchvision.models.resnet18(num_classes=10)
if a.stem == "cifar":
    model.conv1 = torch.nn.Conv2d(3, 64, 3, 1, 1, bias=False)
    model.maxpool = torch.nn.Identity()
model.train()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()
total = 0.0
n = images.shape[0] // a.batch
for s in range(a.steps):
    i = (s % n) * a.batch
    x, y = images[i:i + a.batch], labels[i:i + a.batch]
    t0 = time.perf_counter()
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
        loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    total += time.perf_counter() - t0
print(f"training throughput     : {a.batch * a.steps / total:.1f} samples/s (pytorch {torch.__version__}, "
      f"{torch.get_num_threads()} threads{', bf16 autocast' if a.bf16 else ''}, loss {loss.item():.4f})")
