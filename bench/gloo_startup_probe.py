"""PyTorch gloo's side of bench/scale_hosts.sh: init_process_group("gloo"), a barrier,
an allreduce of 4 KiB and one of 1 MiB (checked exactly), then the mean of N barriers
and N 4 KiB allreduces. Run under build/bin/launch (it sets MASTER_ADDR, MASTER_PORT,
RANK and WORLD_SIZE). Prints, per rank:
  gloo rank R init_ms A first_ms B rss_kib K ok 1 first_done_at F barrier_us X allreduce4k_us Y
init_ms counts from the start of init_process_group (the import of torch is left out).
"""
import argparse
import time

import torch
import torch.distributed as dist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency", type=int, default=5)
    args = ap.parse_args()
    t0 = time.perf_counter()
    dist.init_process_group("gloo")
    t1 = time.perf_counter()
    rank, size = dist.get_rank(), dist.get_world_size()
    dist.barrier()
    ok = True
    for count in (1024, 256 * 1024):
        i = torch.arange(count)
        x = (rank % 7 + i % 5).float()
        dist.all_reduce(x)
        base = sum(r % 7 for r in range(size))
        ok = ok and bool(torch.equal(x, (base + size * (i % 5)).float()))
    t2 = time.perf_counter()
    first_done_at = time.time() * 1000
    barrier_us = allreduce_us = 0.0
    if args.latency > 0:
        x = torch.ones(1024)
        dist.barrier()
        t = time.perf_counter()
        for _ in range(args.latency):
            dist.barrier()
        barrier_us = (time.perf_counter() - t) / args.latency * 1e6
        dist.all_reduce(x)
        t = time.perf_counter()
        for _ in range(args.latency):
            dist.all_reduce(x)
        allreduce_us = (time.perf_counter() - t) / args.latency * 1e6
    rss = 0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    print(f"gloo rank {rank} init_ms {(t1 - t0) * 1e3:.1f} first_ms {(t2 - t1) * 1e3:.1f} rss_kib {rss} "
          f"ok {int(ok)} first_done_at {first_done_at:.2f} barrier_us {barrier_us:.1f} "
          f"allreduce4k_us {allreduce_us:.1f}", flush=True)
    dist.destroy_process_group()
    return 0 if ok else 4


if __name__ == "__main__":
    raise SystemExit(main())
