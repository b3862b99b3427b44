#!/usr/bin/env python3
"""One self-contained HTML page about a training run, for a person to look at: the
timeline of every rank (train --trace DIR: its phases and collectives, the last steps
drawn as lanes), each rank's time split (compute, communication hidden or exposed,
waiting), the mean time of each phase per step, the stragglers (the trainer's events in
--metrics-out, and the slowest rank per step from the trace), and, for a run that failed,
the flight recorder's verdict (DPT_FLIGHT_DIR: which collective, which ranks). No
external file, script or font: the page opens anywhere, offline.

usage: run_report.py [--trace DIR] [--metrics FILE] [--flight DIR] [--steps N] -o OUT.html
  --trace    the folder of train --trace (rank<R>.json)
  --metrics  rank 0's --metrics-out file (JSON lines)
  --flight   the folder of the flight records (a failed run)
  --steps    how many of the last steps the timeline draws (default 20)
"""
import argparse
import html
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flight_report  # noqa: E402
import trace_merge  # noqa: E402

COLORS = {"data": "#b0bec5", "forward": "#1e88e5", "backward": "#fb8c00", "sync": "#9e9e9e", "update": "#43a047",
          "eval": "#8e24aa", "save": "#6d4c41", "outer": "#e53935", "reform": "#212121", "other": "#cfd8dc",
          "comm": "#00897b"}
PHASES = ("data", "forward", "backward", "sync", "update", "eval", "save", "outer", "reform")


def load_trace(folder):
    by_rank = {}
    for name in sorted(os.listdir(folder)):
        if name.startswith("rank") and name.endswith(".json"):
            doc = json.load(open(os.path.join(folder, name)))
            by_rank[doc["otherData"]["rank"]] = doc["traceEvents"]
    return by_rank


def timeline_svg(by_rank, last_steps):
    spans = {r: [e for e in es if e.get("ph") == "X"] for r, es in by_rank.items()}
    steps = sorted({e["args"]["step"] for es in spans.values() for e in es if e["tid"] == 0 and e["args"]["step"] > 0})
    keep = set(steps[-last_steps:])
    shown = {r: [e for e in es if e["args"]["step"] in keep] for r, es in spans.items()}
    starts = [e["ts"] for es in shown.values() for e in es]
    if not starts:
        return "<p>No step in the trace.</p>"
    t0, t1 = min(starts), max(e["ts"] + e["dur"] for es in shown.values() for e in es)
    width, lane, left = 1100, 18, 120
    scale = (width - left - 10) / max(t1 - t0, 1.0)
    rows = sorted(shown)
    height = 30 + len(rows) * (2 * lane + 10)
    out = [f'<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">']
    for i, r in enumerate(rows):
        y = 20 + i * (2 * lane + 10)
        out.append(f'<text x="4" y="{y + 13}">rank {r} compute</text><text x="4" y="{y + lane + 13}">communication</text>')
        out.append(f'<g class="lane" data-rank="{r}">')
        for e in shown[r]:
            x = left + (e["ts"] - t0) * scale
            w = max(e["dur"] * scale, 0.5)
            color = COLORS["comm"] if e["tid"] == 1 else COLORS.get(e["name"], COLORS["other"])
            yy = y + (lane if e["tid"] == 1 else 0)
            tip = html.escape(f'{e["name"]} step {e["args"]["step"]}: {e["dur"] / 1e3:.2f} ms'
                              + (f', {e["args"].get("bytes", 0)} B, bucket {e["args"].get("bucket")}' if e["tid"] == 1 else ""))
            out.append(f'<rect class="{"comm" if e["tid"] == 1 else "phase"}" x="{x:.1f}" y="{yy}" width="{w:.1f}" '
                       f'height="{lane - 2}" fill="{color}"><title>{tip}</title></rect>')
        out.append("</g>")
    out.append(f'<text x="{left}" y="{height - 4}">{(t1 - t0) / 1e3:.1f} ms: steps {min(keep)}-{max(keep)}</text></svg>')
    return "\n".join(out)


def phase_table(by_rank):
    rows = []
    for r, es in sorted(by_rank.items()):
        per = {}
        steps = set()
        for e in es:
            if e.get("ph") == "X" and e["tid"] == 0 and e["args"]["step"] > 0:
                per[e["name"]] = per.get(e["name"], 0.0) + e["dur"] / 1e3
                steps.add(e["args"]["step"])
        n = max(len(steps), 1)
        cells = "".join(f"<td>{per.get(p, 0.0) / n:.2f}</td>" for p in PHASES)
        rows.append(f"<tr><td>rank {r}</td>{cells}</tr>")
    head = "".join(f'<th><span class="key" style="background:{COLORS[p]}"></span>{p}</th>' for p in PHASES)
    return f'<table id="phases"><tr><th>ms per step</th>{head}</tr>{"".join(rows)}</table>'


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace")
    ap.add_argument("--metrics")
    ap.add_argument("--flight")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    if not (a.trace or a.metrics or a.flight):
        sys.exit("run_report: give at least one of --trace, --metrics, --flight")
    parts = []
    verdict_text, failed = "", False
    if a.flight:
        records = flight_report.load(a.flight)
        if records:
            # The world communicator (creation number 0) says the job's size.
            sizes = [c["size"] for doc in records.values() for c in doc["communicators"] if c["communicator"] == 0]
            v = flight_report.analyse(records, max(sizes) if sizes else 0)
            verdict_text = flight_report.text(v)
            failed = True
    final, events = None, []
    if a.metrics:
        for line in open(a.metrics):
            try:
                j = json.loads(line)
            except ValueError:
                continue
            if j.get("final"):
                final = j
            elif "event" in j:
                events.append(j["event"])
    status = ('<div id="status" class="failed">FAILED: the flight recorder\'s verdict is below</div>' if failed else
              '<div id="status" class="ok">finished</div>' if final else '<div id="status">no final line</div>')
    parts.append(status)
    if final:
        keys = ("steps", "loss", "eval_loss", "test_acc", "samples_per_s", "step_ms", "comm_s", "exposed_comm_s",
                "straggler_rank", "straggler_ratio")
        cells = "".join(f"<tr><th>{k}</th><td>{final[k]:.4g}</td></tr>" if isinstance(final.get(k), float) else
                        f"<tr><th>{k}</th><td>{final[k]}</td></tr>" for k in keys if k in final)
        parts.append(f'<h2>Run</h2><table id="final">{cells}</table>')
    if a.trace:
        by_rank = load_trace(a.trace)
        s = trace_merge.summarize(by_rank)
        parts.append("<h2>Timeline</h2>" + "".join(
            f'<span class="key" style="background:{c}"></span>{n} ' for n, c in COLORS.items() if n != "other"))
        parts.append(timeline_svg(by_rank, a.steps))
        rows = "".join(
            f"<tr><td>rank {r}</td><td>{d['wall_ms']:.1f}</td><td>{d['compute_ms']:.1f}</td><td>{d['comm_ms']:.1f}</td>"
            f"<td>{100 * d['hidden']:.0f}%</td><td>{d['exposed_ms']:.1f}</td><td>{d['waiting_ms']:.1f}</td>"
            f"<td>{d['collectives']}</td><td>{d['steps']}</td></tr>" for r, d in s["ranks"].items())
        parts.append('<h2>Where the time went (ms)</h2><table id="ranks"><tr><th></th><th>wall</th><th>compute</th>'
                     '<th>communication</th><th>hidden</th><th>exposed</th><th>waiting</th><th>collectives</th>'
                     f'<th>steps</th></tr>{rows}</table>')
        parts.append("<h2>Phases</h2>" + phase_table(by_rank))
        slow = "".join(f"<li>rank {r}: slowest in {n} steps (median {s['slowest_by'][r]:.2f}x the steps' median)</li>"
                       for r, n in s["slowest_rank_steps"].items())
        parts.append(f'<h2>Stragglers</h2><ul id="slowest">{slow or "<li>one rank: nothing to compare</li>"}</ul>')
    straggler_events = [e for e in events if e.startswith("straggler")]
    if a.metrics:
        items = "".join(f"<li>{html.escape(e)}</li>" for e in straggler_events) or "<li>none named during the run</li>"
        parts.append(f'<ul id="straggler-events">{items}</ul>')
    if failed:
        parts.append(f'<h2>Flight recorder</h2><pre id="verdict">{html.escape(verdict_text)}</pre>')
    page = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>dpt run report</title><style>
body {{ font-family: sans-serif; margin: 16px; color: #222; }}
table {{ border-collapse: collapse; margin: 6px 0 12px; }} td, th {{ border: 1px solid #ccc; padding: 3px 8px; text-align: right; }}
#status {{ font-size: 20px; font-weight: bold; padding: 8px; color: white; background: #607d8b; }}
#status.ok {{ background: #2e7d32; }} #status.failed {{ background: #c62828; }}
.key {{ display: inline-block; width: 12px; height: 12px; margin: 0 4px 0 8px; vertical-align: middle; }}
pre {{ background: #fff3e0; padding: 8px; border-left: 4px solid #c62828; white-space: pre-wrap; }}
</style></head><body><h1>dpt run report</h1>
{chr(10).join(parts)}
</body></html>
"""
    with open(a.out, "w") as f:
        f.write(page)
    print(f"run_report: {a.out}")


if __name__ == "__main__":
    main()
