#!/usr/bin/python3
"""Reads every rank's flight record (DPT_FLIGHT_DIR/rank<R>.json, written on a timeout, a
failure, an abort or SIGUSR2: comm/dispatch/flight_recorder.h) and says what a person
needs after a hang: which collective the job stopped in, which ranks were in it and which
never entered it, a desync (ranks calling different collectives at the same sequence
number), and where each rank was (its step and phase).

usage: flight_report.py DIR [--ranks N] [--json]
  DIR        the folder of rank<R>.json files (one job's)
  --ranks N  the job's world size, when the files alone cannot say it (a rank that wrote
             nothing is then named as missing)
  --json     the verdict as one JSON object instead of text
Exit status: 0 when the records were read (whatever they show), 2 when none could be.
"""
import argparse
import glob
import json
import os
import sys


def load(folder):
    records = {}
    for path in sorted(glob.glob(os.path.join(folder, "rank*.json"))):
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            print(f"flight report: {path}: unreadable ({e}); left out", file=sys.stderr)
            continue
        if doc.get("format") != "dpt-flight-1":
            print(f"flight report: {path}: not a dpt flight record; left out", file=sys.stderr)
            continue
        records[int(doc["world_rank"])] = doc
    return records


def signature(e):
    return (e["kind"], e["count"], e["dtype"], e.get("op"), e.get("root"))


def describe(e):
    what = f'{e["kind"]} {e["dtype"]} x {e["count"]}'
    if e["kind"] in ("allreduce", "reduce", "reduce_scatter"):
        what += f' ({e["op"]})'
    if e["kind"] in ("reduce", "broadcast", "gather", "scatter"):
        what += f' root {e["root"]}'
    where = []
    if e.get("step", -1) >= 0:
        where.append(f'step {e["step"]}' + (f' {e["phase"]}' if e.get("phase") else ""))
    if e.get("bucket", -1) >= 0:
        where.append(f'bucket {e["bucket"]}')
    if e.get("algorithm"):
        where.append(e["algorithm"])
    return what + (f' [{", ".join(where)}]' if where else "")


def ranks_text(ranks):
    ranks = sorted(ranks)
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def analyse(records, world):
    """The verdict per communicator, keyed by its creation number (the same on every rank)."""
    out = {"world_size": world, "ranks_with_records": sorted(records),
           "ranks_without_records": sorted(set(range(world)) - set(records)) if world else [],
           "where": {}, "communicators": []}
    for r, doc in sorted(records.items()):
        out["where"][r] = {"step": doc.get("step", -1), "phase": doc.get("phase", ""), "reason": doc.get("reason", "")}
    numbers = sorted({c["communicator"] for doc in records.values() for c in doc["communicators"]})
    for number in numbers:
        per_rank = {}  # world rank -> (group rank, {seq: entry}, size)
        for r, doc in records.items():
            for c in doc["communicators"]:
                if c["communicator"] == number:
                    per_rank[r] = (c["rank"], {e["seq"]: e for e in c["collectives"]}, c["size"])
        if not per_rank:
            continue
        size = max(v[2] for v in per_rank.values())
        verdict = {"communicator": number, "size": size, "ranks": sorted(per_rank)}
        # A desync: the first sequence number that two ranks recorded with different calls.
        seqs = sorted({s for _, entries, _ in per_rank.values() for s in entries})
        for s in seqs:
            calls = {r: entries[s] for r, (_, entries, _) in per_rank.items() if s in entries}
            if len({signature(e) for e in calls.values()}) > 1:
                verdict["desync"] = {"seq": s, "calls": {r: describe(e) for r, e in sorted(calls.items())}}
                break
        # Where it stopped: the first collective some rank has not completed.
        first_open = {}
        for r, (_, entries, _) in per_rank.items():
            open_seqs = [s for s, e in entries.items() if e["state"] != "completed"]
            first_open[r] = min(open_seqs) if open_seqs else (max(entries) + 1 if entries else 0)
        stuck = min(first_open.values())
        if any(s in entries and entries[s]["state"] != "completed" for _, entries, _ in per_rank.values()
               for s in [stuck]) or verdict.get("desync"):
            in_it, failed, never = [], [], []
            entry = None
            for r, (_, entries, _) in per_rank.items():
                e = entries.get(stuck)
                if e is None:
                    never.append(r)
                elif e["state"] == "failed":
                    failed.append(r)
                    entry = entry or e
                elif e["state"] in ("started", "scheduled"):
                    in_it.append(r)
                    entry = entry or e
            errors = {r: entries[stuck]["error"] for r, (_, entries, _) in per_rank.items()
                      if stuck in entries and entries[stuck].get("error")}
            verdict["stopped_in"] = {"seq": stuck, "call": describe(entry) if entry else "?",
                                     "waiting": sorted(in_it), "failed": sorted(failed),
                                     "never_entered": sorted(never), "errors": errors}
        verdict["last_completed"] = {r: max([s for s, e in entries.items() if e["state"] == "completed"], default=-1)
                                     for r, (_, entries, _) in per_rank.items()}
        out["communicators"].append(verdict)
    return out


def text(v):
    lines = []
    world = v["world_size"]
    have = v["ranks_with_records"]
    head = f"flight report: records from {ranks_text(have)}"
    if world:
        head += f" of {world}"
    if v["ranks_without_records"]:
        head += (f"; none from {ranks_text(v['ranks_without_records'])} (stopped, killed or hung outside the "
                 "communicator: it never wrote its record)")
    lines.append(head)
    for c in v["communicators"]:
        if "stopped_in" not in c and "desync" not in c:
            continue
        lines.append(f'communicator {c["communicator"]} ({c["size"]} ranks):')
        if "desync" in c:
            d = c["desync"]
            lines.append(f'  DESYNC at collective {d["seq"]}: the ranks called different collectives:')
            for r, call in d["calls"].items():
                lines.append(f"    rank {r}: {call}")
        if "stopped_in" in c:
            s = c["stopped_in"]
            lines.append(f'  stopped in collective {s["seq"]}: {s["call"]}')
            if s["waiting"]:
                lines.append(f'    in it, waiting: {ranks_text(s["waiting"])}')
            if s["failed"]:
                lines.append(f'    in it when it failed: {ranks_text(s["failed"])}')
            missing = sorted(set(s["never_entered"]) | (set(v["ranks_without_records"]) if c["size"] == world else set()))
            if missing:
                lines.append(f"    never entered it: {ranks_text(missing)}")
            for r, err in sorted(s["errors"].items()):
                lines.append(f"    rank {r}'s error: {err}")
    lines.append("where each rank was when it wrote its record:")
    for r, w in sorted(v["where"].items()):
        last = [c["last_completed"].get(r, -1) for c in v["communicators"] if c["communicator"] == 0]
        step = f'step {w["step"]}' + (f' ({w["phase"]})' if w["phase"] else "") if w["step"] >= 0 else "no step"
        lines.append(f'  rank {r}: {step}; last collective completed: {last[0] if last else "-"}; '
                     f'written on: {w["reason"]}')
    if not any("stopped_in" in c or "desync" in c for c in v["communicators"]):
        lines.append("no communicator has an unfinished collective or a desync in these records")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--ranks", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    records = load(a.folder)
    if not records:
        print(f"flight report: no flight records (rank*.json) in {a.folder}", file=sys.stderr)
        return 2
    world = a.ranks
    if not world:
        # The world communicator (creation number 0) says the job's size.
        sizes = [c["size"] for doc in records.values() for c in doc["communicators"] if c["communicator"] == 0]
        world = max(sizes) if sizes else 0
    v = analyse(records, world)
    print(json.dumps(v, indent=1) if a.json else text(v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
