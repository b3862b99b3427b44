#!/usr/bin/env python3
"""Runs one tutorial program twice under one launcher, with --backend gloo and with
--backend dpt (nothing else differs), and checks that every rank's loss at every step
is the same within --rtol (default 1e-6, relative).

  compare_tutorial.py --launcher launch|torchrun|mpirun --np 2 --build build \\
      tests/bindings/torch/tutorials/ddp_toy.py [program args]

launch: build/bin/launch; torchrun: the torchrun beside this Python (PyTorch's own
launcher, as users type it: torchrun --nproc-per-node N prog.py); mpirun: Open MPI,
the dpt run with DPT_BACKEND=mpi (dpt_torch fills RANK/WORLD_SIZE/MASTER_* from it).
The programs print `rank <r> step <k> loss <v>`. Exit status 0 only when both runs
succeed, report the same steps and agree.
"""
import argparse
import os
import re
import subprocess
import sys
import time

# Open MPI forwards output in chunks, so one rank's line may run into another's.
LINE = re.compile(r"rank (\d+) step (\d+) loss ([-+]?\d\.\d+e[-+]\d+)")


def command(args, backend, port):
    py = sys.executable
    prog = [py, args.program, "--backend", backend] + args.program_args
    if args.launcher == "launch":
        return [os.path.join(args.build, "bin", "launch"), "-n", str(args.np)] + prog
    if args.launcher == "torchrun":
        torchrun = os.path.join(os.path.dirname(py), "torchrun")
        return [torchrun, "--nproc-per-node", str(args.np), "--master-port", str(port)] + prog[1:]
    return ["mpirun", "-np", str(args.np), "--oversubscribe", "--bind-to", "none"] + prog


def run_reference(args, port):
    """The gloo run, retried: gloo's process can fail at exit after its last step, which is
    the reference failing, not the backend under test. PyTorch 1.13 could deadlock there
    (issue 25: the main thread, holding the GIL, destroyed DDP's Reducer, whose
    ProcessGroupGloo joined a worker thread waiting for the GIL); PyTorch 2.15 was seen to
    abort there once in a full suite ("terminate called without an active exception" on
    rank 1, after every loss and the all_gather_object check were printed). So it gets up
    to 3 tries of --gloo-timeout s each, a try that times out or exits non-zero counting as
    failed; the dpt run gets exactly one."""
    for attempt in range(1, 4):
        try:
            rc, losses, out = run(args, "gloo", port + 2 * attempt, args.gloo_timeout)
        except subprocess.TimeoutExpired:
            print(f"gloo: attempt {attempt} did not end within {args.gloo_timeout} s (an exit deadlock?); retrying")
            continue
        if rc == 0:
            return rc, losses, out
        print(f"gloo: attempt {attempt} exited with {rc}; retrying")
    return 1, {}, ""


def run(args, backend, port, timeout=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(os.path.abspath(args.build), "python")
    env.setdefault("OMP_NUM_THREADS", "1")
    if args.launcher == "mpirun":
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        if backend == "dpt":
            env["DPT_BACKEND"] = "mpi"
    if backend == "dpt":
        env["COMM_LOG_LEVEL"] = "info"  # the registry names the transport of each group
    cmd = command(args, backend, port)
    t0 = time.time()
    # A session of its own: on a timeout every process of the run goes, the ranks too
    # (the launchers put each rank in a process group of its own).
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout or args.timeout)
    except subprocess.TimeoutExpired:
        subprocess.run(["pkill", "-KILL", "-s", str(proc.pid)])
        proc.kill()
        proc.communicate()
        raise
    p = subprocess.CompletedProcess(cmd, proc.returncode, out)
    losses = {}
    for m in LINE.finditer(p.stdout):
        losses[(int(m.group(1)), int(m.group(2)))] = float(m.group(3))
    print(f"{backend}: exit {p.returncode}, {len(losses)} losses, {time.time() - t0:.1f} s: {' '.join(cmd)}")
    if p.returncode != 0:
        print(p.stdout[-4000:])
    return p.returncode, losses, p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--launcher", choices=["launch", "torchrun", "mpirun"], default="launch")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--build", default="build")
    ap.add_argument("--rtol", type=float, default=1e-6)
    ap.add_argument("--timeout", type=int, default=120, help="seconds for the dpt run")
    ap.add_argument("--gloo-timeout", type=int, default=35, help="seconds for each try of the gloo reference")
    ap.add_argument("program")
    ap.add_argument("program_args", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    port = 29000 + os.getpid() % 2000
    rc_g, gloo, out_g = run_reference(args, port)
    rc_d, dpt, out_d = run(args, "dpt", port + 1)
    if rc_g or rc_d:
        return 1
    want = "mpi" if args.launcher == "mpirun" else "tcp"
    made = re.findall(r"group '0': (\w+) communicator, rank (\d+)", out_d)
    if len(made) != args.np or any(t != want for t, _ in made):
        print(f"expected {args.np} default groups on the {want} transport, the log says {made}")
        return 1
    if not gloo or set(gloo) != set(dpt):
        print(f"the runs report different steps: gloo {sorted(gloo)[:5]}..., dpt {sorted(dpt)[:5]}...")
        return 1
    worst = 0.0
    for key in sorted(gloo):
        g, d = gloo[key], dpt[key]
        rel = abs(g - d) / max(abs(g), 1e-30)
        worst = max(worst, rel)
        if rel > args.rtol:
            print(f"rank {key[0]} step {key[1]}: gloo {g!r} dpt {d!r} (relative difference {rel:.3g} > {args.rtol})")
            return 1
    ranks = len({k[0] for k in gloo})
    steps = len({k[1] for k in gloo})
    print(f"OK: {ranks} ranks x {steps} steps, largest relative difference {worst:.3g} (limit {args.rtol})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
