#!/usr/bin/env python3
"""SIGKILL a process while a checkpoint is provably being written (bench/chaos.sh's
ckpt_kill fault): watch CKPT_DIR for a writer's temporary file (a step_N/*.tmp.PID that
models/io/safetensors.cpp renames into place, or latest.tmp), kill PID the moment one
appears, and check that the same temporary file still exists after the kill: the kill
was then sent between the file's creation and its rename, inside the write. Without a
hook in the product: the temporary names are how train writes atomically.

Prints one line: 'inside=<file>' (seen before and after the kill), 'after=<file>' (seen,
but renamed by the time the kill was sent; the kill landed just after that write), or
'none' (no write within WAIT seconds; killed anyway). Exit 1 if PID was gone.
usage: chaos_ckpt_kill.py CKPT_DIR PID [WAIT]
"""
import os
import signal
import sys
import time


def temporaries(ck):
    # Only the newest step folders: a long run leaves thousands.
    try:
        names = os.listdir(ck)
    except FileNotFoundError:
        return []
    found = [os.path.join(ck, n) for n in names if ".tmp" in n]
    steps = sorted((n for n in names if n.startswith("step_") and n[5:].isdigit()), key=lambda n: int(n[5:]))
    for d in steps[-2:]:
        try:
            found += [os.path.join(ck, d, n) for n in os.listdir(os.path.join(ck, d)) if ".tmp" in n]
        except FileNotFoundError:
            pass
    return found


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__.strip().splitlines()[-1])
    ck, pid = sys.argv[1], int(sys.argv[2])
    wait = float(sys.argv[3]) if len(sys.argv) == 4 else 10.0
    deadline = time.monotonic() + wait
    stale = set(temporaries(ck))  # left by a writer killed earlier: no write in progress
    seen = []
    while not seen and time.monotonic() < deadline:
        seen = [f for f in temporaries(ck) if f not in stale]
        if not seen:
            time.sleep(0.0005)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        print("gone")
        return 1
    if not seen:
        print("none")
    else:
        still = [f for f in seen if os.path.exists(f)]
        print(f"inside={os.path.relpath(still[0], ck)}" if still else f"after={os.path.relpath(seen[0], ck)}")
    return 0


sys.exit(main())
