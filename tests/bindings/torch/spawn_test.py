"""torch.multiprocessing.spawn starts the ranks of a dpt job: no launcher, no environment
variables, an explicit tcp:// init_method, as PyTorch's tutorials do it. Each rank
all-reduces its rank + 1 and checks the sum; rank 0 also broadcasts a tensor from rank 1.
Exit status 0 only when both ranks checked their results.

  .venv/bin/python tests/bindings/torch/spawn_test.py --build build
"""
import argparse
import datetime
import os
import socket
import sys


def rank_main(rank, world, port, build):
    sys.path.insert(0, os.path.join(build, "python"))
    import torch
    import torch.distributed as dist

    import dpt_torch  # noqa: F401

    dist.init_process_group("dpt", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    t = torch.full((5,), float(rank + 1))
    dist.all_reduce(t)
    want = world * (world + 1) / 2
    if not torch.equal(t, torch.full((5,), want)):
        raise AssertionError(f"rank {rank}: all_reduce gave {t.tolist()}, want {want}")
    b = torch.arange(4.0) if rank == 1 else torch.zeros(4)
    dist.broadcast(b, src=1)
    if not torch.equal(b, torch.arange(4.0)):
        raise AssertionError(f"rank {rank}: broadcast gave {b.tolist()}")
    print(f"spawn_test: rank {rank} of {world} checked all_reduce and broadcast", flush=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--np", type=int, default=2)
    args = ap.parse_args()
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    mp.spawn(rank_main, args=(args.np, port, os.path.abspath(args.build)), nprocs=args.np, join=True)
    print(f"spawn_test: OK, {args.np} ranks started by torch.multiprocessing.spawn")
    return 0


if __name__ == "__main__":
    sys.exit(main())
