#!/usr/bin/env python3
"""Bad input on the dpt torch backend ends in a Python exception carrying our message,
never in a hang. Each case starts its ranks as plain processes (no launcher that would
stop the survivors), and checks what each rank printed and how long it took:

  dtype        all_reduce and broadcast of an int16 tensor: RuntimeError naming the
               op, the dtype and the supported ones, on every rank, before any traffic
               (each call refused within AT_ONCE_S).
  mismatch     rank 0 all_reduces 1000 floats, rank 1 1200: RuntimeError naming both
               sizes on both ranks; caught by the shared-memory arena's fingerprints
               (default), by the message path's size check (COMM_TCP_SHM_COLL=0, in
               bytes: 4000 and 4800), and by COMM_DEBUG_COLLECTIVES=1's fingerprint
               exchange; each within AT_ONCE_S, long before the group's timeout.
  never_joins  WORLD_SIZE=2 but only rank 0 starts (file:// store): init_process_group
               raises our rendezvous TimeoutError naming the missing rank 1, after the
               group's timeout (NEVER_JOINS_TIMEOUT_S) and within it + LATE_S.
  killed       rank 1 is SIGKILLed after init; rank 0's all_reduce raises a RuntimeError
               naming peer rank 1 at once (within AT_ONCE_S), long before the timeout.

Each check looks for one line (by its prefix) and requires every needle in that line;
the worker times each call that must be refused and prints "TIME <what> <seconds>".
The tcp:// store's port is probed free on 127.0.0.1 below the ephemeral range
(/proc/sys/net/ipv4/ip_local_port_range), where no outgoing connection takes it.

  bad_input_test.py --build build [--case NAME]
"""
import argparse
import datetime
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time

TIMEOUT_S = 20  # the process group's timeout in these cases
NEVER_JOINS_TIMEOUT_S = 8  # never_joins waits it out: shorter, still above AT_ONCE_S
AT_ONCE_S = 5.0  # "at once": a refusal measured in milliseconds, bounded well under TIMEOUT_S
LATE_S = 10.0  # never_joins: the timeout's error comes within TIMEOUT_S + LATE_S (measured: + 2 s)
START_LIMIT_S = 90  # a case's processes, torch's import included, end within this (else: hung)


def worker(case):
    import torch
    import torch.distributed as dist
    import dpt_torch  # noqa: F401

    rank = int(os.environ["RANK"])
    init = os.environ["INIT"]
    t0 = time.monotonic()

    def took(what):  # the seconds since t0, printed for the checker
        print(f"TIME {what} {time.monotonic() - t0:.3f}", flush=True)

    try:
        dist.init_process_group("dpt", init_method=init, rank=rank, world_size=int(os.environ["WORLD_SIZE"]),
                                timeout=datetime.timedelta(seconds=float(os.environ.get("GROUP_TIMEOUT_S", TIMEOUT_S))))
    except RuntimeError as e:
        took("init")
        print(f"INIT-ERROR {type(e).__name__}: {e}", flush=True)
        return 3
    try:
        if case == "dtype":
            try:
                t0 = time.monotonic()
                dist.all_reduce(torch.ones(4, dtype=torch.int16))
            except RuntimeError as e:
                took("allreduce")
                print(f"ERROR-1 {type(e).__name__}: {e}", flush=True)
            t0 = time.monotonic()
            dist.broadcast(torch.ones(4, dtype=torch.int16), src=0)
        elif case == "mismatch":
            t0 = time.monotonic()
            dist.all_reduce(torch.ones(1000 if rank == 0 else 1200))
        elif case == "killed":
            dist.barrier()
            if rank == 1:
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(1.0)
            t0 = time.monotonic()
            dist.all_reduce(torch.ones(1 << 16))
        print("NO-ERROR", flush=True)
        return 0
    except RuntimeError as e:
        took("op")
        print(f"ERROR {type(e).__name__}: {e}", flush=True)
        return 2


def free_port():
    """A port free on 127.0.0.1 now, below the ephemeral range (so no outgoing connection
    of another process is given it before our store binds it)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral_low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    for _ in range(200):
        port = rng.randrange(10000, ephemeral_low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free port on 127.0.0.1 in 10000..{ephemeral_low - 1} after 200 tries")


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


def expect(outs, rank, prefix, needles, what, timed=None, within=(0.0, AT_ONCE_S)):
    """Rank's output has a line starting with prefix that holds every needle; with timed,
    its "TIME <timed> s" line has s within [within[0], within[1])."""
    rc, out = outs[rank]
    lines = out.splitlines()
    line = next((l for l in lines if l.startswith(prefix)), None)
    if line is None:
        print(f"FAIL {what}: rank {rank} (exit {rc}) printed no line starting with {prefix!r}:\n{out[-3000:]}")
        return False
    missing = [n for n in needles if n not in line]
    if missing:
        print(f"FAIL {what}: rank {rank} (exit {rc}): {missing} not in the line\n  {line}\n{out[-3000:]}")
        return False
    timing = ""
    if timed:
        secs = [float(l.split()[2]) for l in lines if l.startswith(f"TIME {timed} ")]
        if not secs:
            print(f"FAIL {what}: rank {rank} (exit {rc}) printed no 'TIME {timed}' line:\n{out[-3000:]}")
            return False
        if not within[0] <= secs[0] < within[1]:
            print(f"FAIL {what}: rank {rank}: refused after {secs[0]:.2f} s, not within "
                  f"[{within[0]:.1f}, {within[1]:.1f}) s\n  {line}")
            return False
        timing = f" ({secs[0]:.2f} s)"
    print(f"ok   {what}: rank {rank}{timing}: {line[:300]}")
    return True


def tcp_init():
    return f"tcp://127.0.0.1:{free_port()}"


def run_case(case, build):
    t0 = time.time()
    ok = True
    if case == "dtype":
        tcp = tcp_init()
        outs = collect([start(case, r, 2, tcp, {}, build) for r in range(2)], START_LIMIT_S)
        for r in range(2):
            ok &= expect(outs, r, "ERROR-1 RuntimeError: ",
                         [f"[rank {r}/2 tcp] allreduce: ", "tensor of dtype Short is not supported by the dpt backend",
                          "(supported: float32, "], "int16 all_reduce", timed="allreduce")
            ok &= expect(outs, r, "ERROR RuntimeError: ",
                         [f"[rank {r}/2 tcp] broadcast: ", "tensor of dtype Short is not supported by the dpt backend",
                          "(supported: float32, "], "int16 broadcast", timed="op")
    elif case == "mismatch":
        sizes = {0: 1000, 1: 1200}
        cases = (({}, lambda r: ["collective mismatch", f"this rank runs allreduce(f32, {sizes[r]} elements",
                                 f"rank {1 - r} runs allreduce(f32, {sizes[1 - r]} elements"]),
                 ({"COMM_TCP_SHM_COLL": "0"}, lambda r: [f"peer rank {1 - r} sent {4 * sizes[1 - r]} bytes",
                                                         f"holds {4 * sizes[r]}"]),
                 ({"COMM_DEBUG_COLLECTIVES": "1"}, lambda r: ["collective mismatch",
                                                              "rank 0 issued allreduce(f32, count 1000, op sum)",
                                                              "rank 1 issued allreduce(f32, count 1200, op sum)"]))
        for env, needles in cases:
            tcp = tcp_init()
            outs = collect([start(case, r, 2, tcp, env, build) for r in range(2)], START_LIMIT_S)
            for r in range(2):
                ok &= expect(outs, r, "ERROR RuntimeError: ", [f"[rank {r}/2 tcp] allreduce"] + needles(r),
                             f"sizes 1000 vs 1200 ({env or 'arena fingerprints'})", timed="op")
    elif case == "never_joins":
        path = tempfile.mktemp(prefix="dpt_never_joins_")
        t = NEVER_JOINS_TIMEOUT_S
        outs = collect([start(case, 0, 2, f"file://{path}", {"GROUP_TIMEOUT_S": str(t)}, build)], START_LIMIT_S)
        ok &= expect(outs, 0, "INIT-ERROR RuntimeError: ",
                     [f"[rank 0/2 tcp] rendezvous: 1 of 2 ranks joined within {t} s, missing ranks [1]"],
                     "rank 1 never starts", timed="init", within=(t - 1.0, t + LATE_S))
        if os.path.exists(path):
            os.remove(path)
    elif case == "killed":
        tcp = tcp_init()
        outs = collect([start(case, r, 2, tcp, {}, build) for r in range(2)], START_LIMIT_S)
        ok &= expect(outs, 0, "ERROR RuntimeError: ",
                     ["[rank 0/2 tcp] allreduce", "(peer 1)", "rank 1 (pid ",
                      "exited while this rank waited for it in a shared-memory allreduce: did it crash or get killed?"],
                     "rank 1 killed", timed="op")
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
