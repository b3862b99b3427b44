"""Every completed step's samples, from the per-process sample logs of an elastic DDP run
with --no-shuffle (sample index == position in the epoch's order), --log-every 1 and
--debug-sample-log PREFIX (one file per process: PREFIX.<elastic id>):

  * every process the caller names (--ids) left a non-empty log, and no other process
    did: a missing log is an error, never an assumed share;
  * each epoch's steps' position ranges from the metrics tile [0, end) with no gap or
    overlap, and the next epoch starts again at 0; with --epoch-size N every epoch but
    the last ends at N or within one sample per rank past it (the sampler pads the
    last step from the epoch's start: position p holds sample p mod N), so every sample
    of every completed epoch was dealt;
  * for every step 1..STEPS with world size w, rank r's line holds exactly positions
    b + r, b + r + w, ... < e of the step's range [b, e) (the sampler's dealing), each
    rank of the step has one line, and there is no line of another world size: so every
    position of each epoch's [0, end) was trained on exactly once, by exactly one rank;
  * every process ran to STEPS, its steps contiguous (a newcomer starts where it joined),
    except a process named --killed ID:S, which died inside step S: its last line is S-1.
    A survivor logs every step the group completed with its gradient in it, including
    one it failed itself while another survivor completed it (the group went on from
    that step); the one tolerated hole is a killed rank's share of the step S it died
    in. Those positions are reported, must be what the present lines left, and at least
    one rank must have logged S; a dying rank 0 may also have left S without a metrics
    line (its range is then the gap between its neighbours), and so may a rank 0 that
    failed a step another survivor completed (--adopted S: the group went on from S).

usage: check_samples.py METRICS.jsonl SAMPLE_LOG_PREFIX STEPS --ids ID[,ID...] [--killed ID:S]... [--adopted S]... [--epoch-size N]
"""
import argparse
import glob
import json
import os
import sys


def main():
    ap = argparse.ArgumentParser(usage=__doc__.strip().splitlines()[-1].replace("usage: ", ""))
    ap.add_argument("metrics")
    ap.add_argument("prefix")
    ap.add_argument("steps", type=int)
    ap.add_argument("--ids", required=True, help="every process that ran (elastic ids), comma-separated")
    ap.add_argument("--killed", action="append", default=[], metavar="ID:S", help="ID died inside step S")
    ap.add_argument("--adopted", action="append", default=[], type=int, metavar="S",
                    help="the group went on from step S, which rank 0 failed and another survivor completed "
                         "(a membership event's resumed_after_step): rank 0 logged no metrics line for it")
    ap.add_argument("--epoch-size", type=int, default=0, metavar="N",
                    help="the data set's size: each completed epoch must deal all N samples")
    a = ap.parse_args()
    ids = [x for x in a.ids.split(",") if x]
    if not ids or len(set(ids)) != len(ids):
        sys.exit(f"--ids: need distinct ids, got {a.ids!r}")
    killed = {}
    for k in a.killed:
        ident, _, step = k.rpartition(":")
        if ident not in ids or not step.isdigit():
            sys.exit(f"--killed {k!r}: want ID:STEP with ID one of --ids")
        killed[ident] = int(step)
    death_steps = set(killed.values())
    problems = []

    # ---- the logs: exactly the named processes', none empty ----
    lines = {}  # id -> [(step, world, rank, [index...])]
    found = {p[len(a.prefix) + 1:] for p in glob.glob(glob.escape(a.prefix) + ".*")}
    for extra in sorted(found - set(ids)):
        problems.append(f"{a.prefix}.{extra}: a sample log of a process the caller did not name")
    for ident in ids:
        path = f"{a.prefix}.{ident}"
        if not os.path.isfile(path):
            problems.append(f"{path}: missing (every process that ran must leave its sample log)")
            continue
        rows = []
        for n, line in enumerate(open(path), 1):
            f = line.split()
            try:
                step, world, rank = int(f[0]), int(f[1]), int(f[2])
                idx = [int(x) for x in f[3:]]
            except (ValueError, IndexError):
                problems.append(f"{path}:{n}: garbled line")
                continue
            if not 0 <= rank < world or not idx:
                problems.append(f"{path}:{n}: rank {rank} of world {world} with {len(idx)} samples")
                continue
            rows.append((step, world, rank, idx))
        if not rows:
            problems.append(f"{path}: empty (the process trained no step)")
            continue
        lines[ident] = rows

    # ---- each process: contiguous steps to STEPS, or to its death ----
    by_step = {}  # step -> [(world, rank, idx, id)]
    for ident, rows in lines.items():
        prev = None
        for step, world, rank, idx in rows:
            if prev is not None and step != prev + 1:
                problems.append(f"{ident}: step {step} follows step {prev}")
            prev = step
            by_step.setdefault(step, []).append((world, rank, idx, ident))
        last = rows[-1][0]
        want_last = killed[ident] - 1 if ident in killed else a.steps
        if last != want_last:
            what = f"died inside step {killed[ident]}" if ident in killed else "ran to the end"
            problems.append(f"{ident}: last logged step {last}, want {want_last} (it {what})")

    # ---- the steps ----
    ranges = {}
    for line in open(a.metrics):
        j = json.loads(line)
        if "sample_begin" in j:
            if j["step"] in ranges:
                problems.append(f"metrics: step {j['step']} logged twice")
            ranges[j["step"]] = (j["sample_begin"], j["sample_end"], j["world_size"], j["epoch"])
    N = a.epoch_size
    end, epoch, ends = 0, None, {}
    tolerated = []
    for s in range(1, a.steps + 1):
        here = by_step.get(s, [])
        if s not in ranges:
            # A rank 0 that completed s and died before logging it: only at a death step.
            # Its range: up to the next step's start; where the next step is in a new
            # epoch, s opened that epoch if the next step starts past 0 (s: [0, its
            # start)), else s ended the old one (as many positions as a present rank's
            # line holds per rank).
            worlds = {x[0] for x in here}
            if (s in death_steps or s in a.adopted) and s + 1 in ranges and len(worlds) == 1:
                w = worlds.pop()
                nb, ne = ranges[s + 1][0], ranges[s + 1][3]
                if ne == epoch: ranges[s] = (end, nb, w, ne)
                elif nb > 0: ranges[s] = (0, nb, w, ne)
                else: ranges[s] = (end, end + w * len(here[0][2]), w, epoch)
            else:
                problems.append(f"step {s}: no metrics line")
                continue
        b, e, w, ep = ranges[s]
        if ep != epoch:
            if epoch is not None:
                if ep != epoch + 1:
                    problems.append(f"step {s}: epoch {ep} follows epoch {epoch}")
                if N and not N <= end < N + ends.get(epoch, (0, 1))[1]:
                    problems.append(f"epoch {epoch} ended at position {end}, not at the data set's {N} "
                                    f"(or within one sample per rank past it): samples {min(end, N)}..{N - 1} were never dealt")
            epoch, end = ep, 0
        if b != end:
            problems.append(f"step {s}: starts at position {b}, the previous step ended at {end}")
        end = e
        ends[ep] = (e, w)
        if (e - b) % w:
            problems.append(f"step {s}: range [{b}, {e}) does not split over {w} ranks")
        present = {}
        for world, rank, idx, ident in here:
            if world != w:
                problems.append(f"step {s}: {ident} logged it at world size {world}, the group completed it at {w}")
                continue
            if rank in present:
                problems.append(f"step {s}: rank {rank} logged by both {present[rank]} and {ident}")
                continue
            present[rank] = ident
            want = [p % N if N else p for p in range(b + rank, e, w)]
            if idx != want:
                extra, lack = sorted(set(idx) - set(want)), sorted(set(want) - set(idx))
                problems.append(f"step {s}: {ident} (rank {rank}/{w}) trained on {len(idx)} positions "
                                f"({len(idx) - len(set(idx))} repeated, not its share: {extra[:4]}, lacking: {lack[:4]}), "
                                f"want {len(want)}: {b + rank}, {b + rank + w}, ... of [{b}, {e})")
        absent = sorted(set(range(w)) - set(present))
        if absent:
            dead_here = [i for i, k in killed.items() if k == s]
            if s not in death_steps:
                problems.append(f"step {s}: ranks {absent} of {w} left no line (no process died in this step)")
            elif not present:
                problems.append(f"step {s}: no rank logged it")
            elif any(i in present.values() for i in dead_here):
                problems.append(f"step {s}: {dead_here} logged the step it died in")
            elif len(absent) > len(dead_here):
                problems.append(f"step {s}: ranks {absent} of {w} left no line, but only {dead_here} died in it "
                                f"(a survivor must log a step the group completed)")
            else:
                share = sum(len(range(b + r, e, w)) for r in absent)
                tolerated.append(f"step {s}: ranks {absent} of {w} died in it "
                                 f"({share} positions, trained before the death, unlogged)")
    if problems:
        print("\n".join(problems[:20]) + (f"\n... {len(problems) - 20} more" if len(problems) > 20 else ""))
        sys.exit(1)
    for t in tolerated:
        print("samples: " + t)
    span = ", ".join(f"epoch {k}: [0, {v[0]})" for k, v in sorted(ends.items()))
    print(f"samples: {a.steps} steps, each position trained on exactly once ({span}), by the logs of "
          f"{len(ids)} processes")


main()
