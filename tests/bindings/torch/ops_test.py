"""Every operation of the dpt torch backend against a reference computed locally with
PyTorch: each rank builds every rank's input from (rank, seed), so it knows what the
collective must return. Run under any launcher at any world size >= 2:

  build/bin/launch -n 3 .venv/bin/python tests/bindings/torch/ops_test.py
  mpirun -np 3 env DPT_BACKEND=mpi .venv/bin/python tests/bindings/torch/ops_test.py

Checks exact equality where the reduction order cannot matter (integers, min, max,
two ranks) and closeness otherwise; prints `ops_test: N checks passed` on success.
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist

import dpt_torch

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int8, torch.uint8, torch.int32, torch.int64]
checks = 0


def data(rank, n, dtype, salt=0):
    g = torch.Generator().manual_seed(1000 * rank + 17 * salt + 1)
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    if dtype in INTS:
        return torch.randint(1, 4, (n,), generator=g).to(dtype)
    return (torch.rand(n, generator=g, dtype=torch.float64) + 0.5).to(dtype)


def same(got, want, what):
    global checks
    checks += 1
    if got.dtype != want.dtype or got.shape != want.shape:
        raise AssertionError(f"{what}: got {got.dtype} {tuple(got.shape)}, want {want.dtype} {tuple(want.shape)}")
    if got.is_floating_point():
        tol = {torch.float16: 2e-3, torch.bfloat16: 2e-2}.get(got.dtype, 1e-6)
        ok = torch.allclose(got.double(), want.double(), rtol=tol, atol=tol)
    else:
        ok = torch.equal(got, want)
    if not ok:
        raise AssertionError(f"{what}: got {got[:6].tolist()}..., want {want[:6].tolist()}...")


def reference(op, tensors):
    acc = tensors[0].double() if tensors[0].is_floating_point() else tensors[0].long()
    for t in tensors[1:]:
        t = t.double() if t.is_floating_point() else t.long()
        if op == dist.ReduceOp.SUM:
            acc = acc + t
        elif op == dist.ReduceOp.PRODUCT:
            acc = acc * t
        elif op == dist.ReduceOp.MIN:
            acc = torch.minimum(acc, t)
        else:
            acc = torch.maximum(acc, t)
    return acc


def main():
    dist.init_process_group("dpt", timeout=datetime.timedelta(seconds=60))
    rank, n = dist.get_rank(), dist.get_world_size()
    backend = dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))
    assert isinstance(backend, dpt_torch.ProcessGroupDpt) and dist.get_backend() == "dpt", (type(backend), dist.get_backend())
    print(f"rank {rank}: transport {backend.transport}", flush=True)
    N = 1000

    # all_reduce: every op on every dtype (bool: sum/max are "or", product/min "and")
    for dtype in FLOATS + INTS + [torch.bool]:
        for op in [dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX]:
            ins = [data(r, N, dtype) for r in range(n)]
            if op == dist.ReduceOp.PRODUCT and dtype in FLOATS:
                ins = [(t.double() * 0 + 1 + (t.double() - 1) * 0.01).to(dtype) for t in ins]  # near 1: no overflow
            t = ins[rank].clone()
            dist.all_reduce(t, op=op)
            if dtype == torch.bool:
                want = torch.stack(ins).any(0) if op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX) else torch.stack(ins).all(0)
            else:
                want = reference(op, ins).to(dtype)
            same(t, want, f"all_reduce {op} {dtype}")
    # average (PyTorch exposes ReduceOp.AVG)
    t = data(rank, N, torch.float32)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    same(t, (reference(dist.ReduceOp.SUM, [data(r, N, torch.float32) for r in range(n)]) / n).float(), "all_reduce avg")
    # non-contiguous tensors (a column of a matrix) are handled, not refused
    m = torch.stack([data(rank, 8, torch.float64, salt=c) for c in range(4)], 1)
    col = m[:, 2]
    assert not col.is_contiguous()
    dist.all_reduce(col)
    same(m[:, 2], reference(dist.ReduceOp.SUM, [data(r, 8, torch.float64, salt=2) for r in range(n)]), "non-contiguous")
    same(m[:, 1], data(rank, 8, torch.float64, salt=1), "neighbouring column untouched")
    # all_reduce_coalesced
    ts = [data(rank, 10 + i, torch.float64, salt=i) for i in range(3)]
    dist.all_reduce_coalesced(ts)
    for i in range(3):
        same(ts[i], reference(dist.ReduceOp.SUM, [data(r, 10 + i, torch.float64, salt=i) for r in range(n)]), "coalesced")
    # broadcast from every root
    for root in range(n):
        t = data(rank, N, torch.int64, salt=root)
        dist.broadcast(t, src=root)
        same(t, data(root, N, torch.int64, salt=root), f"broadcast root {root}")
    # reduce: the root gets it, the others keep their tensor
    for root in range(n):
        t = data(rank, N, torch.int32, salt=root)
        dist.reduce(t, dst=root, op=dist.ReduceOp.SUM)
        want = reference(dist.ReduceOp.SUM, [data(r, N, torch.int32, salt=root) for r in range(n)]).int()
        same(t, want if rank == root else data(rank, N, torch.int32, salt=root), f"reduce root {root}")
    # all_gather (list and _allgather_base), all_gather_coalesced, all_gather_object
    outs = [torch.empty(7, dtype=torch.bfloat16) for _ in range(n)]
    dist.all_gather(outs, data(rank, 7, torch.bfloat16))
    for r in range(n):
        same(outs[r], data(r, 7, torch.bfloat16), "all_gather")
    flat = torch.empty(7 * n)
    dist._all_gather_base(flat, data(rank, 7, torch.float32))
    same(flat, torch.cat([data(r, 7, torch.float32) for r in range(n)]), "_all_gather_base")
    lists = [[torch.empty(3), torch.empty(5)] for _ in range(n)]
    dist.all_gather_coalesced(lists, [data(rank, 3, torch.float32), data(rank, 5, torch.float32, 1)])
    for r in range(n):
        same(lists[r][1], data(r, 5, torch.float32, 1), "all_gather_coalesced")
    objs = [None] * n
    dist.all_gather_object(objs, {"rank": rank, "text": "x" * rank})
    assert objs == [{"rank": r, "text": "x" * r} for r in range(n)], objs
    # PyTorch 2.x's tensor forms, and the coalescing manager's fast path for them
    flat = torch.empty(3 * n, 2, dtype=torch.float16)
    dist.all_gather_into_tensor(flat, data(rank, 6, torch.float16).view(3, 2))
    same(flat, torch.cat([data(r, 6, torch.float16).view(3, 2) for r in range(n)]), "all_gather_into_tensor")
    out = torch.empty(4, dtype=torch.float64)
    dist.reduce_scatter_tensor(out, torch.cat([data(rank, 4, torch.float64, p) for p in range(n)]))
    same(out, reference(dist.ReduceOp.SUM, [data(r, 4, torch.float64, rank) for r in range(n)]), "reduce_scatter_tensor")
    gathered = [torch.empty(k * n) for k in (2, 5)]
    scattered = [torch.empty(k) for k in (2, 5)]
    with dist._coalescing_manager():
        for i, k in enumerate((2, 5)):
            dist.all_gather_into_tensor(gathered[i], data(rank, k, torch.float32, 20 + i))
    with dist._coalescing_manager():
        for i, k in enumerate((2, 5)):
            dist.reduce_scatter_tensor(scattered[i], torch.cat([data(rank, k, torch.float32, 30 + p) for p in range(n)]))
    for i, k in enumerate((2, 5)):
        same(gathered[i], torch.cat([data(r, k, torch.float32, 20 + i) for r in range(n)]), "coalesced all_gather_into_tensor")
        want = reference(dist.ReduceOp.SUM, [data(r, k, torch.float32, 30 + rank) for r in range(n)]).float()
        same(scattered[i], want, "coalesced reduce_scatter_tensor")
    # the other object collectives
    obj = [{"from": 0, "list": list(range(5))}] if rank == 0 else [None]
    dist.broadcast_object_list(obj, src=0)
    assert obj == [{"from": 0, "list": list(range(5))}], obj
    got_objs = [None] * n if rank == 0 else None
    dist.gather_object(("r", rank), got_objs, dst=0)
    if rank == 0:
        assert got_objs == [("r", r) for r in range(n)], got_objs
    one = [None]
    dist.scatter_object_list(one, [f"to {r}" for r in range(n)] if rank == 0 else None, src=0)
    assert one == [f"to {rank}"], one
    # gather / scatter
    root = n - 1
    got = [torch.empty(6, dtype=torch.uint8) for _ in range(n)] if rank == root else None
    dist.gather(data(rank, 6, torch.uint8), gather_list=got, dst=root)
    if rank == root:
        for r in range(n):
            same(got[r], data(r, 6, torch.uint8), "gather")
    out = torch.empty(6, dtype=torch.int8)
    dist.scatter(out, [data(r, 6, torch.int8, 9) for r in range(n)] if rank == 0 else None, src=0)
    same(out, data(rank, 6, torch.int8, 9), "scatter")
    # reduce_scatter (list and _reduce_scatter_base)
    out = torch.empty(5, dtype=torch.float64)
    dist.reduce_scatter(out, [data(rank, 5, torch.float64, p) for p in range(n)])
    same(out, reference(dist.ReduceOp.SUM, [data(r, 5, torch.float64, rank) for r in range(n)]), "reduce_scatter")
    out = torch.empty(5, dtype=torch.int64)
    dist._reduce_scatter_base(out, torch.cat([data(rank, 5, torch.int64, p) for p in range(n)]), op=dist.ReduceOp.MAX)
    same(out, reference(dist.ReduceOp.MAX, [data(r, 5, torch.int64, rank) for r in range(n)]), "_reduce_scatter_base")
    # all_to_all_single even and with split sizes; all_to_all with tensors of different sizes
    inp = torch.cat([data(rank, 4, torch.float32, p) for p in range(n)])
    out = torch.empty(4 * n)
    dist.all_to_all_single(out, inp)
    same(out, torch.cat([data(p, 4, torch.float32, rank) for p in range(n)]), "all_to_all_single")
    send_rows = [rank + p + 1 for p in range(n)]  # rows this rank sends to p
    inp = torch.cat([data(rank, 2 * send_rows[p], torch.float32, p).view(-1, 2) for p in range(n)])
    recv_rows = [p + rank + 1 for p in range(n)]
    out = torch.empty(sum(recv_rows), 2)
    dist.all_to_all_single(out, inp, output_split_sizes=recv_rows, input_split_sizes=send_rows)
    same(out, torch.cat([data(p, 2 * recv_rows[p], torch.float32, rank).view(-1, 2) for p in range(n)]), "split sizes")
    outs = [torch.empty(p + 1, dtype=torch.int32) for p in range(n)]
    dist.all_to_all(outs, [data(rank, rank + 1, torch.int32, p) for p in range(n)])
    for p in range(n):
        same(outs[p], data(p, p + 1, torch.int32, rank), "all_to_all")
    # point-to-point: a ring with tags, then a receive from any source
    nxt, prv = (rank + 1) % n, (rank - 1) % n
    req = dist.isend(data(rank, 9, torch.float64, 5), nxt, tag=5)
    t = torch.empty(9, dtype=torch.float64)
    dist.recv(t, prv, tag=5)
    req.wait()
    same(t, data(prv, 9, torch.float64, 5), "send/recv")
    if rank == 0:
        senders = set()
        for _ in range(n - 1):
            t = torch.empty(3)
            src = dist.recv(t)  # from whichever rank sent first
            same(t, torch.full((3,), float(src)), "recv from any source")
            senders.add(src)
        assert senders == set(range(1, n)), senders
    else:
        dist.send(torch.full((3,), float(rank)), 0)
    # Work objects and futures
    t = torch.ones(16)
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future().then(lambda f: f.value()[0] * 2)
    assert work.wait()
    assert work.is_completed() and work.is_success() and work.exception() is None
    same(work.result()[0], torch.full((16,), float(n)), "work.result")
    same(fut.wait(), torch.full((16,), 2.0 * n), "future then")
    # a subgroup of all ranks but the last, then the barrier
    members = list(range(n - 1)) if n > 2 else [0, 1]
    g = dist.new_group(members)
    if rank in members:
        t = torch.full((4,), float(rank))
        dist.all_reduce(t, group=g)
        same(t, torch.full((4,), float(sum(members))), "new_group")
    dist.barrier()
    # monitored_barrier (PyTorch 2.x hands it to the backend): every rank arrives in time
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=30))
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=30), wait_all_ranks=True)
    dist.destroy_process_group()
    print(f"ops_test: {checks} checks passed on rank {rank}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
