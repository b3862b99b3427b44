"""check_samples.py on small hand-made runs (8 samples, 2 ranks, 2 samples each per step),
where the right answer is known:

  * a step rank 0 failed while the other rank completed it (no metrics line for it,
    --adopted) that OPENED an epoch: its range is [0, the next step's start) of the new
    epoch (chaos seed 3403: step 29407 was taken for a padded end of the old epoch);
  * the same step at the END of an epoch: the old epoch's last positions;
  * without --adopted either run fails ("no metrics line"), and a process that skips the
    adopted step in its own log fails (a survivor logs the steps the group completed).

usage: check_samples_test.py CHECK_SAMPLES_PY
"""
import json
import os
import subprocess
import sys
import tempfile

check = sys.argv[1]
failures = []


def run(steps, missing, adopted, skip_line=None):
    """steps: [(epoch, begin)] in step order (1-based); 2 ranks x 2 samples per step."""
    d = tempfile.mkdtemp()
    with open(f"{d}/m.jsonl", "w") as m:
        for s, (ep, b) in enumerate(steps, 1):
            if s != missing:
                m.write(json.dumps({"step": s, "epoch": ep, "sample_begin": b, "sample_end": b + 4, "world_size": 2}) + "\n")
    for r in (0, 1):
        with open(f"{d}/samples.p{r}", "w") as f:
            for s, (ep, b) in enumerate(steps, 1):
                if (r, s) != skip_line:
                    f.write(f"{s} 2 {r} {(b + r) % 8} {(b + r + 2) % 8}\n")
    cmd = [sys.executable, check, f"{d}/m.jsonl", f"{d}/samples", str(len(steps)), "--ids", "p0,p1", "--epoch-size", "8"]
    if adopted: cmd += ["--adopted", str(missing)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def expect(name, ok, result):
    rc, out = result
    if (rc == 0) != ok:
        failures.append(f"{name}: exit {rc}, want {'0' if ok else 'non-zero'}:\n  " + out.strip().replace("\n", "\n  "))
    else:
        print(f"ok: {name}: exit {rc}" + ("" if ok else f" ({out.strip().splitlines()[0]})"))


opens = [(0, 0), (0, 4), (1, 0), (1, 4)]  # step 3 opens epoch 1
ends = [(0, 0), (0, 4), (1, 0), (1, 4)]   # step 2 ends epoch 0
expect("adopted step opening an epoch", True, run(opens, 3, True))
expect("adopted step ending an epoch", True, run(ends, 2, True))
expect("missing metrics line, not adopted (opening)", False, run(opens, 3, False))
expect("missing metrics line, not adopted (ending)", False, run(ends, 2, False))
expect("a survivor's log skips the adopted step", False, run(opens, 3, True, skip_line=(0, 3)))
if failures:
    print("\n".join("FAIL: " + f for f in failures))
    sys.exit(1)
