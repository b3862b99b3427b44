#!/usr/bin/env python3
"""The agreement cadence of a DiLoCo run (train/agreement_cadence.h), from its metrics alone.

  cadence_check.py METRICS.jsonl INTERVAL_S AGREEMENTS [SIGNAL_STEP STOP_STEP]

The run: 2 emulated hosts, --log-every 1, no round end. Rank 0's other_hosts_bytes grows
by the step's loss report at every step, and by one agreement more where the world agreed
before that step: so the metrics show after which steps the world agreed, and their
unix_time how long each stretch between agreements took. An agreement after step p takes
the steps that fit in INTERVAL_S at the pace since the one before (after step p0):
k = floor(INTERVAL_S / pace), pace = (t[p] - t[p0]) / (p - p0), at least 1; the next comes
after step p + k. Each stretch's ratio k / max(1, INTERVAL_S / pace) is then in (0.5, 1] by
the trainer's clock, whatever the machine's speed or load (slow steps make the next
proposal smaller, or 1 step, not the test fail). This one's clock is the metrics lines', a
little off the trainer's, so the median over the stretches must lie in [0.4, 1.5]: 8x too
sparse a cadence gives 8, an agreement before every step pace / INTERVAL_S (about 0.1 here).

AGREEMENTS (the final line's count) must equal the ones seen plus the pass's first (before
step 1, inside the first line's bytes), and the first proposal, made without a pace, is 1.
With SIGNAL_STEP and STOP_STEP (a run stopped by a signal raised during step SIGNAL_STEP,
its last line STOP_STEP): the stop came at the first agreement after the signal (none in
between) and that agreement came when the cadence said, its ratio <= 3 (one stretch, so a
wider bound than the median's; 8x too sparse gives 8).
"""
import json
import statistics
import sys


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def main():
    path, interval, agreements = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    signal_step = int(sys.argv[4]) if len(sys.argv) > 4 else None
    stop_step = int(sys.argv[5]) if len(sys.argv) > 5 else None
    lines = {}
    with open(path) as f:
        for text in f:
            j = json.loads(text)
            if "other_hosts_bytes" in j and "unix_time" in j:
                lines[j["step"]] = j
    last = max(lines)
    if sorted(lines) != list(range(1, last + 1)):
        fail(f"{path}: not one line per step from 1 to {last}")
    t = {s: lines[s]["unix_time"] for s in lines}
    deltas = {s: lines[s]["other_hosts_bytes"] - lines[s - 1]["other_hosts_bytes"] for s in range(2, last + 1)}
    report = min(deltas.values())
    extra = sorted({d - report for d in deltas.values()} - {0})
    if len(extra) > 1:
        fail(f"the bytes between the hosts per step take {len(extra) + 1} values (loss report {report} + {extra}): "
             "more than the loss report and one agreement cross")
    # The steps after which the world agreed (0: the pass's start, seen in no line).
    points = [0] + [s - 1 for s in range(2, last + 1) if deltas[s] > report]
    if stop_step is None and len(points) != agreements:
        fail(f"{len(points)} agreements seen in the metrics, the run counted {agreements}")
    if len(points) > 1 and points[1] != 1:
        fail(f"the first agreement proposed {points[1]} steps without a pace (1 expected)")

    def pace(p0, p):  # seconds a step from the line after step p0 to the one after step p
        return (t[p] - t[p0]) / (p - p0)

    def ratio(k, pace_s):  # the steps taken over those that fit (at least 1)
        return k / max(1.0, interval / pace_s)

    ratios = [ratio(points[i + 1] - points[i], pace(points[i - 1], points[i])) for i in range(2, len(points) - 1)]
    if stop_step is None:
        if len(ratios) < 3:
            fail(f"{len(points)} agreements in {last} steps at --agree-every-s {interval}: too few stretches to measure")
        med = statistics.median(ratios)
        if not 0.4 <= med <= 1.5:
            fail(f"the agreements came {med:.2f}x the steps that fit in the interval apart (median over "
                 f"{len(ratios)} stretches; [0.4, 1.5] expected): {[round(r, 2) for r in ratios]}")
        print(f"{agreements} agreements in {last} steps, each stretch's steps over those that fit: median {med:.2f} "
              f"(min {min(ratios):.2f}, max {max(ratios):.2f})")
        return
    if stop_step != last:
        fail(f"the stopped run's last line is step {last}, it stopped after {stop_step}")
    if stop_step < signal_step:
        fail(f"stopped after step {stop_step}, before the signal in step {signal_step}")
    between = [p for p in points if signal_step <= p < stop_step]
    if between:
        fail(f"agreements after steps {between} came after the signal in step {signal_step} and did not stop the run")
    q = points[-1]  # the agreement that proposed the stretch the stop ended
    if q == 0:
        fail(f"no agreement seen between the pass's first and the stop after step {stop_step}")
    k = stop_step - q
    i = len(points) - 1
    # Its pace: the stretch before it, where the metrics show one; the first proposal's
    # stretch (after step 1) has none, so the steps it covered.
    p = pace(points[i - 1], q) if i >= 2 else pace(q, stop_step)
    r = ratio(k, p)
    if r > 3:
        fail(f"the stop came {k} steps after the agreement after step {q}: {r:.2f}x the steps that fit in the interval")
    print(f"the signal in step {signal_step} stopped the run at the next agreement, after step {stop_step} "
          f"({k} steps after the one after step {q}: {r:.2f}x the steps that fit in the interval)")


if __name__ == "__main__":
    main()
