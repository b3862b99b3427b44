#!/usr/bin/env python3
"""Bad input on the dpt torch backend ends in a Python exception carrying our message,
never in a hang. Each case starts its ranks as plain processes (no launcher that would
stop the survivors), and checks what each rank printed and how long it took:

  dtype        all_reduce and broadcast of an int16 tensor: RuntimeError naming the
               op, the dtype and the supported ones, on every rank, before any traffic.
  mismatch     rank 0 all_reduces 1000 floats, rank 1 1200: RuntimeError naming both
               sizes on both ranks; caught by the shared-memory arena's fingerprints
               (default), by the message path's size check (COMM_TCP_SHM_COLL=0), and
               by COMM_DEBUG_COLLECTIVES=1's fingerprint exchange.
  never_joins  WORLD_SIZE=2 but only rank 0 starts (file:// store): init_process_group
               raises our rendezvous TimeoutError naming the missing rank 1.
  killed       rank 1 is SIGKILLed after init; rank 0's all_reduce raises a RuntimeError
               naming peer rank 1, long before the timeout.

  bad_input_test.py --build build [--case NAME]
"""
import argparse
import datetime
import os
import signal
import subprocess
import sys
import tempfile
import time

TIMEOUT_S = 20  # the process group's timeout in these cases


def worker(case):
    import torch
    import torch.distributed as dist
    import dpt_torch  # noqa: F401

    rank = int(os.environ["RANK"])
    init = os.environ["INIT"]
    try:
        dist.init_process_group("dpt", init_method=init, rank=rank, world_size=int(os.environ["WORLD_SIZE"]),
                                timeout=datetime.timedelta(seconds=TIMEOUT_S))
    except RuntimeError as e:
        print(f"INIT-ERROR {type(e).__name__}: {e}", flush=True)
        return 3
    try:
        if case == "dtype":
            try:
                dist.all_reduce(torch.ones(4, dtype=torch.int16))
            except RuntimeError as e:
                print(f"ERROR-1 {type(e).__name__}: {e}", flush=True)
            dist.broadcast(torch.ones(4, dtype=torch.int16), src=0)
        elif case == "mismatch":
            dist.all_reduce(torch.ones(1000 if rank == 0 else 1200))
        elif case == "killed":
            dist.barrier()
            if rank == 1:
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(1.0)
            dist.all_reduce(torch.ones(1 << 16))
        print("NO-ERROR", flush=True)
        return 0
    except RuntimeError as e:
        print(f"ERROR {type(e).__name__}: {e}", flush=True)
        return 2


def start(case, rank, world, init, extra_env, build):
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), INIT=init, **extra_env)
    env["PYTHONPATH"] = os.path.join(os.path.abspath(build), "python")
    return subprocess.Popen([sys.executable, __file__, "--worker", case], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def collect(procs, limit):
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            out += "\nHUNG: killed by the test"
        outs.append((p.returncode, out))
    return outs


def expect(outs, rank, needles, what):
    rc, out = outs[rank]
    missing = [n for n in needles if n not in out]
    if missing:
        print(f"FAIL {what}: rank {rank} (exit {rc}) lacks {missing} in its output:\n{out[-3000:]}")
        return False
    print(f"ok   {what}: rank {rank}: " + next((l for l in out.splitlines() if "ERROR" in l), "")[:300])
    return True


def run_case(case, build):
    port = 20000 + os.getpid() % 20000
    tcp = f"tcp://127.0.0.1:{port}"
    t0 = time.time()
    ok = True
    if case == "dtype":
        outs = collect([start(case, r, 2, tcp, {}, build) for r in range(2)], 120)
        for r in range(2):
            ok &= expect(outs, r, ["ERROR-1 RuntimeError", "Short", "is not supported by the dpt backend",
                                   f"[rank {r}/2", "allreduce"], "int16 tensor")
            ok &= expect(outs, r, ["ERROR RuntimeError", "Short", "is not supported", "broadcast"], "int16 broadcast")
    elif case == "mismatch":
        for env, needles in (({}, ["ERROR RuntimeError", "allreduce", "1000", "1200", "mismatch"]),
                             ({"COMM_TCP_SHM_COLL": "0"}, ["ERROR RuntimeError", "allreduce", "[rank"]),
                             ({"COMM_DEBUG_COLLECTIVES": "1"}, ["ERROR RuntimeError", "allreduce", "1000", "1200"])):
            outs = collect([start(case, r, 2, tcp, env, build) for r in range(2)], 4 * TIMEOUT_S + 60)
            for r in range(2):
                ok &= expect(outs, r, needles, f"sizes 1000 vs 1200 ({env or 'arena fingerprints'})")
    elif case == "never_joins":
        path = tempfile.mktemp(prefix="dpt_never_joins_")
        outs = collect([start(case, 0, 2, f"file://{path}", {}, build)], 4 * TIMEOUT_S + 60)
        ok &= expect(outs, 0, ["INIT-ERROR RuntimeError", "[rank 0/2", "1"], "rank 1 never starts")
        if os.path.exists(path):
            os.remove(path)
    elif case == "killed":
        outs = collect([start(case, r, 2, tcp, {}, build) for r in range(2)], 4 * TIMEOUT_S + 60)
        ok &= expect(outs, 0, ["ERROR RuntimeError", "[rank 0/2", "peer", "1"], "rank 1 killed")
        if outs[1][0] != -signal.SIGKILL:
            print(f"FAIL rank 1 should have died of SIGKILL, exit {outs[1][0]}")
            ok = False
    took = time.time() - t0
    print(f"{case}: {'passed' if ok else 'FAILED'} in {took:.1f} s")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--case", default="all", choices=["all", "dtype", "mismatch", "never_joins", "killed"])
    ap.add_argument("--worker")
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker)
    cases = ["dtype", "mismatch", "never_joins", "killed"] if args.case == "all" else [args.case]
    return 0 if all([run_case(c, args.build) for c in cases]) else 1


if __name__ == "__main__":
    sys.exit(main())
