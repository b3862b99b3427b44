"""PyTorch 2.x's distributed wrappers on one small model, as a launched program: DDP with
a communication hook (PowerSGD, or fp16 compression), ZeroRedundancyOptimizer, and
FSDP (FullyShardedDataParallel on CPU tensors, and FSDP2's fully_shard).

Started like the other tutorial programs (build/bin/launch, torchrun, mpirun);
`--backend` is the only thing that differs between a gloo and a dpt run, so
compare_tutorial.py can hold the dpt run's losses to gloo's. Each rank prints
`rank <r> step <k> loss <value>` after every optimizer step; `--wrapper all` trains each
wrapper in turn in one process (one process group, one interpreter start), the steps of
the i-th numbered from 100 i.
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import dpt_torch  # noqa: F401  (registers the backend "dpt")


def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8))


def wrap(kind, m):
    """The wrapped model and its optimizer."""
    if kind in ("powersgd", "fp16_hook"):
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

        ddp = DDP(m)
        if kind == "powersgd":
            # start_powerSGD_iter 2: two steps of plain allreduce, then rank-2 compression.
            state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=2, start_powerSGD_iter=2,
                                                min_compression_rate=0.5, use_error_feedback=True, warm_start=True)
            ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
        else:
            ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
        return ddp, torch.optim.SGD(ddp.parameters(), lr=0.05)
    if kind == "zero":
        from torch.distributed.optim import ZeroRedundancyOptimizer

        ddp = DDP(m)
        return ddp, ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.Adam, lr=1e-3)
    if kind == "fsdp":
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        fsdp = FSDP(m, device_id=torch.device("cpu"), use_orig_params=True)
        return fsdp, torch.optim.Adam(fsdp.parameters(), lr=1e-3)
    if kind == "fsdp2":
        from torch.distributed.fsdp import fully_shard

        for layer in m:
            if isinstance(layer, nn.Linear):
                fully_shard(layer)
        fully_shard(m)
        return m, torch.optim.Adam(m.parameters(), lr=1e-3)
    raise SystemExit(f"unknown --wrapper {kind}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="dpt")
    kinds = ["powersgd", "fp16_hook", "zero", "fsdp", "fsdp2"]
    parser.add_argument("--wrapper", default="all", choices=kinds + ["all"])
    parser.add_argument("--steps", type=int, default=12)
    args = parser.parse_args()

    dist.init_process_group(backend=args.backend)
    rank = dist.get_rank()
    for i, kind in enumerate(kinds if args.wrapper == "all" else [args.wrapper]):
        net, opt = wrap(kind, model())
        gen = torch.Generator().manual_seed(1000 + rank)
        target = nn.Linear(32, 8)
        for step in range(args.steps):
            x = torch.randn(16, 32, generator=gen)
            with torch.no_grad():
                y = target(x)
            opt.zero_grad()
            loss = nn.functional.mse_loss(net(x), y)
            loss.backward()
            opt.step()
            print(f"rank {rank} step {100 * i + step} loss {loss.item():.9e}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
