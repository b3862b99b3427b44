"""check_rounds.py on hand-made sample logs with known answers (CTest diloco.check_rounds_selftest).

Two hosts of 2 ranks, H = 10, 40 steps, 2 samples per rank and step, --no-shuffle positions.
Host B's ranks (2, 3) stop after step 32; host A's ranks (0, 1) go back to R = 30 and finish
as a world of 2. Cases: A's first generation ran on to step 32 before it noticed (its log's
step numbers restart: 31 after 32); A's first generation stopped right at 30 (its log goes on
31, 32, ... in world 2: the case the suite met); and one kept step's lines missing (must fail).
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
R, STEPS, H, B = 30, 40, 10, 2


def positions(step, world, rank):
    """The samples a rank trains at a step: world 4 up to R, world 2 after it."""
    if world == 4:
        base = ((step - 1) * 4 + rank) * B
    else:
        base = R * 4 * B + ((step - R - 1) * 2 + rank) * B
    return list(range(base, base + B))


def write_run(folder, a_first_gen_last, drop_step=None):
    with open(os.path.join(folder, "m.jsonl"), "w") as f:
        f.write('{"event":"membership","resumed_after_step":%d,"lost_steps":2}\n' % R)
    for rank in range(4):
        lines = []
        last = a_first_gen_last if rank < 2 else 32
        lines += [(s, 4, rank) for s in range(1, last + 1)]
        if rank < 2:
            lines += [(s, 2, rank) for s in range(R + 1, STEPS + 1) if s != drop_step]
        with open(os.path.join(folder, "samples.%d" % rank), "w") as f:
            for s, w, r in lines:
                f.write(" ".join(str(v) for v in [s, w, r] + positions(s, w, r)) + "\n")


def verdict(a_first_gen_last, drop_step=None):
    with tempfile.TemporaryDirectory() as d:
        write_run(d, a_first_gen_last, drop_step)
        p = subprocess.run([sys.executable, os.path.join(HERE, "check_rounds.py"), os.path.join(d, "m.jsonl"),
                            os.path.join(d, "samples"), str(STEPS), str(H)], capture_output=True, text=True)
        return p.returncode, (p.stdout + p.stderr).strip()


def main():
    ok = True
    for what, args, want_pass in [("A ran on to step 32, then restarted at 31", (32,), True),
                                  ("A stopped right at the round end 30", (30,), True),
                                  ("step 35 of the new generation missing", (32, 35), False)]:
        rc, out = verdict(*args)
        good = (rc == 0) == want_pass
        ok &= good
        print(f"{'ok  ' if good else 'FAIL'} {what}: exit {rc}: {out}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
