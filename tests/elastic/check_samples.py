"""Every completed step's samples, from the per-process sample logs of a run with
--no-shuffle (sample index == position in the epoch's order) and --log-every 1:

  * the steps' position ranges from the metrics tile [0, end) with no gap or overlap;
  * for every completed step, the indices its ranks trained on are exactly that range,
    each once (a step during which a rank died may lack that rank's line: the rank
    died after contributing; its share is then checked to be what the others left);
  * so every sample of the epoch up to the last step was seen exactly once.

usage: check_samples.py METRICS.jsonl SAMPLE_LOG_PREFIX STEPS
"""
import glob
import json
import sys


def main():
    metrics, prefix, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ranges = {}
    for line in open(metrics):
        j = json.loads(line)
        if "sample_begin" in j:
            ranges[j["step"]] = (j["sample_begin"], j["sample_end"], j["world_size"])
    by_step = {}
    for path in glob.glob(prefix + ".*"):
        for line in open(path):
            f = line.split()
            step, world, rank = int(f[0]), int(f[1]), int(f[2])
            by_step.setdefault(step, []).append((world, rank, [int(x) for x in f[3:]], path))
    problems = []
    end = 0
    inferred = 0
    for s in range(1, steps + 1):
        if s not in ranges:
            # The step a dying rank 0 completed but could not log: its range is what lies
            # between its neighbours, its world size what its ranks' lines say. Once only.
            worlds = [x[0] for x in by_step.get(s, [])]
            if s + 1 in ranges and worlds and inferred == 0:
                inferred += 1
                ranges[s] = (end, ranges[s + 1][0], max(worlds))
            else:
                problems.append(f"step {s}: no metrics line")
                continue
        b, e, w = ranges[s]
        if b != end:
            problems.append(f"step {s}: starts at position {b}, the previous step ended at {end}")
        end = e
        seen = []
        ranks = set()
        for world, rank, idx, path in by_step.get(s, []):
            if world != w:
                continue  # a line of a group that did not complete this step (another world size)
            ranks.add(rank)
            seen += idx
        want = list(range(b, e))
        if len(ranks) < w:
            # A rank died after this step completed everywhere else: its samples are the
            # positions the others did not take (rank r of w takes b + r, b + r + w, ...).
            missing = sorted(set(want) - set(seen))
            absent = sorted(set(range(w)) - ranks)
            expect = sorted(p for r in absent for p in range(b + r, e, w))
            if missing != expect:
                problems.append(f"step {s}: ranks {absent} absent and positions {missing[:8]}... unaccounted")
            seen += missing
        if sorted(seen) != want:
            dup = len(seen) - len(set(seen))
            problems.append(f"step {s}: trained on {len(seen)} samples ({dup} duplicates), want [{b}, {e})")
    if problems:
        print("\n".join(problems[:20]))
        sys.exit(1)
    print(f"samples: {steps} steps, positions [0, {end}) each trained on exactly once")


main()
