#!/bin/bash
# train --trace (comm/dispatch/timeline.h) on 2 ranks for 12 steps, merged by
# tools/trace_merge.py: one trace with a compute and a communication lane per rank that
# loads as JSON; every step's forward, backward and update on every rank; DDP's bucket
# allreduces on the communication lane inside the run, filed under their step and
# bucket; the summary's figures in range (overlap a share, no negative time), and rank 0's
# exposed gradient communication equal to what the trainer measured itself from its
# bucket timings (exposed_comm_s) within 25% or 2 ms.
#   trace_timeline.sh BIN_DIR REPO
set -euo pipefail
bin=$1 repo=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin/launch" -n 2 "$bin/train" --steps 12 --overlap-comm on --trace "$tmp/trace" > "$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
exposed_s=$(grep -o 'exposed_comm_s=[0-9.]*' "$tmp/log" | cut -d= -f2)
/usr/bin/python3 "$repo/tools/trace_merge.py" "$tmp/trace"
/usr/bin/python3 "$repo/tools/trace_merge.py" "$tmp/trace" --json > "$tmp/summary.json"
/usr/bin/python3 - "$tmp" "$exposed_s" <<'PY'
import json, sys
d, trainer_exposed_ms = sys.argv[1], 1e3 * float(sys.argv[2])
s = json.load(open(f"{d}/summary.json"))
merged = json.load(open(s["merged"]))["traceEvents"]
fail = []
def need(ok, what):
    if not ok:
        fail.append(what)
lanes = {(e["pid"], e["args"]["name"]) for e in merged if e.get("name") == "thread_name"}
need(lanes == {(0, "compute"), (0, "communication"), (1, "compute"), (1, "communication")}, f"lanes {sorted(lanes)}")
spans = [e for e in merged if e.get("ph") == "X"]
need(all(e["dur"] >= 0 for e in spans), "a negative duration")
for r in (0, 1):
    mine = [e for e in spans if e["pid"] == r]
    for name in ("forward", "backward", "update"):
        steps = sorted(e["args"]["step"] for e in mine if e["tid"] == 0 and e["name"] == name)
        need(steps == list(range(1, 13)), f"rank {r}: {name} in steps {steps}, not 1..12")
    comm = [e for e in mine if e["tid"] == 1]
    bucketed = [e for e in comm if e["name"] == "allreduce" and e["args"]["bucket"] >= 0]
    need({e["args"]["step"] for e in bucketed} == set(range(1, 13)),
         f"rank {r}: bucket allreduces in steps {sorted({e['args']['step'] for e in bucketed})}, not 1..12")
    first = min(e["ts"] for e in mine if e["tid"] == 0)
    last = max(e["ts"] + e["dur"] for e in mine if e["tid"] == 0)
    need(all(first <= e["ts"] and e["ts"] + e["dur"] <= last + 1e3 for e in bucketed),
         f"rank {r}: a collective outside the run's phases")
    x = s["ranks"][str(r)]
    need(0 <= x["hidden"] <= 1 and x["comm_ms"] > 0 and x["grad_ms"] > 0 and x["compute_ms"] > 0 and x["exposed_ms"] >= 0
         and x["waiting_ms"] >= -1e-6 and x["steps"] == 12, f"rank {r}: summary {x}")
x0 = s["ranks"]["0"]["exposed_ms"]
need(abs(x0 - trainer_exposed_ms) <= max(2.0, 0.25 * trainer_exposed_ms),
     f"rank 0's exposed gradient time {x0:.1f} ms, the trainer's {trainer_exposed_ms:.1f} ms")
print(f"rank 0: exposed gradient communication {x0:.1f} ms in the trace, {trainer_exposed_ms:.1f} ms by the trainer")
need(sum(s["slowest_rank_steps"].values()) == 12, f"slowest rank counted over {s['slowest_rank_steps']}")
if fail:
    print("FAIL:\n  " + "\n  ".join(fail))
    sys.exit(1)
print("timeline: 2 ranks x 12 steps, both lanes, every step's phases and bucket allreduces")
PY
