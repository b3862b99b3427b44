#!/usr/bin/env python3
"""Merges the per-rank timelines of `train --trace DIR` (DIR/rank<R>.json, Chrome trace
events) into one trace with two lanes per rank (compute: the trainer's phases;
communication: each collective from its start to its completion), which Perfetto
(ui.perfetto.dev) and chrome://tracing open, and reports per rank:

  wall      first event's start to last event's end
  compute   time in forward, backward and update
  comm      time with at least one collective running (their union)
  grad      the same for the gradients' collectives only (DDP/ZeRO buckets)
  hidden    the share of grad that ran during forward or backward (overlap; the trainer's
            hidden_frac measures the same from its bucket timings)
  exposed   grad outside compute: what the steps waited for the gradients
  waiting   time in the sync phase with no collective of this rank running (its
            collectives done, the step still waiting: usually nothing)
and per step the slowest rank (longest forward + backward + update), i.e. the rank on the
critical path of the step.

usage: trace_merge.py DIR [-o OUT] [--json]
  OUT     the merged trace (default DIR/trace.json)
  --json  print the summary as one JSON object instead of text
"""
import argparse
import glob
import json
import os
import statistics
import sys

COMPUTE = ("forward", "backward", "update")


def union(intervals):
    out = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def length(intervals):
    return sum(b - a for a, b in intervals)


def intersect(xs, ys):
    out, i, j = [], 0, 0
    while i < len(xs) and j < len(ys):
        a, b = max(xs[i][0], ys[j][0]), min(xs[i][1], ys[j][1])
        if a < b:
            out.append([a, b])
        if xs[i][1] < ys[j][1]:
            i += 1
        else:
            j += 1
    return out


def minus(xs, ys):
    return length(xs) - length(intersect(xs, ys))


def summarize(events_by_rank):
    ranks = {}
    step_compute = {}  # step -> {rank: ms}
    for rank, events in sorted(events_by_rank.items()):
        spans = [e for e in events if e.get("ph") == "X"]
        if not spans:
            continue
        phases = [e for e in spans if e["tid"] == 0]
        comms = [e for e in spans if e["tid"] == 1]
        iv = lambda es: union([[e["ts"], e["ts"] + e["dur"]] for e in es])
        compute = iv([e for e in phases if e["name"] in COMPUTE])
        fwd_bwd = iv([e for e in phases if e["name"] in ("forward", "backward")])
        comm = iv(comms)
        grad = iv([e for e in comms if e["args"].get("bucket", -1) >= 0])
        sync = iv([e for e in phases if e["name"] == "sync"])
        wall = max(e["ts"] + e["dur"] for e in spans) - min(e["ts"] for e in spans)
        grad_len = length(grad)
        ranks[rank] = {
            "wall_ms": wall / 1e3,
            "compute_ms": length(compute) / 1e3,
            "comm_ms": length(comm) / 1e3,
            "grad_ms": grad_len / 1e3,
            "hidden": (length(intersect(grad, fwd_bwd)) / grad_len) if grad_len else 0.0,
            "exposed_ms": minus(grad, compute) / 1e3,
            "waiting_ms": minus(sync, comm) / 1e3,
            "collectives": len(comms),
            "steps": sorted({e["args"]["step"] for e in phases if e["name"] in COMPUTE}),
        }
        for e in phases:
            if e["name"] in COMPUTE and e["args"]["step"] >= 1:
                d = step_compute.setdefault(e["args"]["step"], {})
                d[rank] = d.get(rank, 0.0) + e["dur"] / 1e3
    slowest = {}
    for step, per_rank in step_compute.items():
        if len(per_rank) == len(ranks) and len(ranks) > 1:
            r = max(per_rank, key=per_rank.get)
            slowest.setdefault(r, []).append(per_rank[r] / statistics.median(per_rank.values()))
    return {
        "ranks": {str(r): {k: v for k, v in d.items() if k != "steps"} | {"steps": len(d["steps"])}
                  for r, d in ranks.items()},
        "slowest_rank_steps": {str(r): len(v) for r, v in sorted(slowest.items())},
        "slowest_by": {str(r): round(statistics.median(v), 3) for r, v in sorted(slowest.items())},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("-o", "--out")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    files = sorted(glob.glob(os.path.join(a.dir, "rank*.json")))
    if not files:
        sys.exit(f"trace_merge: no rank*.json in {a.dir} (written by train --trace {a.dir} when the run ends)")
    merged, by_rank = [], {}
    for f in files:
        try:
            doc = json.load(open(f))
        except (OSError, ValueError) as e:
            sys.exit(f"trace_merge: {f}: {e}")
        rank = doc["otherData"]["rank"]
        by_rank[rank] = doc["traceEvents"]
        merged += doc["traceEvents"]
    out = a.out or os.path.join(a.dir, "trace.json")
    with open(out, "w") as f:
        json.dump({"displayTimeUnit": "ms", "traceEvents": merged}, f)
    s = summarize(by_rank)
    s["merged"] = out
    if a.json:
        print(json.dumps(s))
        return
    print(f"merged {len(files)} ranks into {out} (open it in ui.perfetto.dev or chrome://tracing)")
    for r, d in s["ranks"].items():
        print(f"rank {r}: wall {d['wall_ms']:.1f} ms, compute {d['compute_ms']:.1f} ms, comm {d['comm_ms']:.1f} ms "
              f"({d['collectives']} collectives); gradients' {d['grad_ms']:.1f} ms: {100 * d['hidden']:.0f}% hidden "
              f"behind forward/backward, {d['exposed_ms']:.1f} ms exposed; waiting {d['waiting_ms']:.1f} ms; "
              f"{d['steps']} steps")
    for r, n in s["slowest_rank_steps"].items():
        print(f"slowest rank of {n} steps: rank {r} (median {s['slowest_by'][r]:.2f}x the steps' median compute)")


if __name__ == "__main__":
    main()
