"""After an elastic DiLoCo run that lost members mid-round: no sample of a completed round
was lost or trained twice.

Reads the per-process sample logs of train --debug-sample-log PREFIX (lines "step world
rank index...", --no-shuffle so an index is the sample's position in the epoch) and the
membership event of --metrics-out. A process's log restarts its step numbers when a new
generation takes over (the group went back to the round's end it resumed after, R), or
goes on from R + 1 in the new world size (the old generation stopped right at R); the
lines kept are each generation's steps that the final model contains: the first
generation's steps <= R (every member's, the lost ones' included) and the last
generation's steps > R. Those must deal the positions [0, end) exactly once, with no gap,
no repeat, each step's lines from every rank of its world. Lines of the dropped partial
round (R < step, first generation) are reported and must exist (the test killed
mid-round).

usage: check_rounds.py METRICS.jsonl SAMPLE_LOG_PREFIX STEPS H
"""
import glob
import json
import sys


def main():
    metrics, prefix, steps, h = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    events = [json.loads(l) for l in open(metrics) if '"event":"membership"' in l]
    if len(events) != 1:
        sys.exit(f"FAIL: {len(events)} membership events, expected 1")
    r = events[0]["resumed_after_step"]
    if r % h != 0:
        sys.exit(f"FAIL: the group resumed after step {r}, not a round's end (H = {h})")
    kept, dropped = {}, 0
    files = sorted(glob.glob(prefix + ".*"))
    if not files:
        sys.exit("FAIL: no sample logs")
    for path in files:
        generation, last, last_world = 0, 0, None
        for line in open(path):
            f = [int(v) for v in line.split()]
            step, world, rank, idx = f[0], f[1], f[2], f[3:]
            # A new generation restarts the step numbers (it went back to R) or, when the
            # old one stopped right at R, carries on from R + 1 in a smaller world.
            if step <= last or (last_world is not None and world != last_world):
                generation += 1
            last, last_world = step, world
            if generation > 1:
                sys.exit(f"FAIL: {path} holds more than two generations")
            if (generation == 0 and step <= r) or (generation == 1 and step > r):
                kept.setdefault(step, []).append((world, rank, idx, path))
            else:
                dropped += 1
    if dropped == 0:
        sys.exit(f"FAIL: no line of a dropped partial round: the kill was not mid-round (resumed after {r})")
    seen = {}
    for step in range(1, steps + 1):
        lines = kept.get(step)
        if not lines:
            sys.exit(f"FAIL: no line for step {step}")
        world = lines[0][0]
        ranks = sorted(l[1] for l in lines)
        if any(l[0] != world for l in lines) or ranks != list(range(world)):
            sys.exit(f"FAIL: step {step}'s lines are not one per rank of one world: {[(l[0], l[1], l[3]) for l in lines]}")
        for _, _, idx, path in lines:
            for i in idx:
                if i in seen:
                    sys.exit(f"FAIL: sample {i} trained twice (steps {seen[i]} and {step})")
                seen[i] = step
    end = max(seen) + 1
    gaps = [i for i in range(end) if i not in seen]
    if gaps:
        sys.exit(f"FAIL: samples {gaps[:10]} of [0, {end}) never trained in a kept step")
    print(f"samples: {end} positions dealt once each over {steps} steps (resumed after round end {r}; "
          f"{dropped} lines of the dropped partial round discarded)")


if __name__ == "__main__":
    main()
