#!/usr/bin/env python3
"""summarize.py RAW OUT "2 4": medians over repetitions of compare.sh's raw rows, the
markdown tables (busbw per size and candidate), the issue's ratios, and the gnuplot
data + script for busbw.png. A row is `size count type redop algo time_us algbw busbw wrong`.
Labels: a candidate ("tcp-shm"), its default-mode run ("tcp-shm-async": issued, then
waited) and its run from a reference build ("tcp-shm@ref", compare.sh REF=)."""
import collections, glob, os, re, statistics, sys

raw, out, nps = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3].split()]
# data[(coll, np)][label][size] -> list of (time_us, busbw)
data = collections.defaultdict(lambda: collections.defaultdict(lambda: collections.defaultdict(list)))
limits = {}  # "tcp loopback 2-way" -> GB/s, from physical_limits
if os.path.exists(os.path.join(raw, "limits.txt")):
    for line in open(os.path.join(raw, "limits.txt")):
        m = re.match(r"(.+?)\s+([0-9.]+) GB/s", line)
        if m and not line.startswith("#"): limits[m.group(1).strip()] = float(m.group(2))
for f in glob.glob(os.path.join(raw, "*.txt")):
    if os.path.basename(f) == "limits.txt": continue
    m = re.match(r"(.+)\.(allreduce|reduce_scatter)\.np(\d+)\.rep\d+\.txt", os.path.basename(f))
    label, coll, np = m.group(1), m.group(2), int(m.group(3))
    for line in open(f):
        p = line.split()
        if len(p) == 9 and not line.startswith("#") and p[0].isdigit():
            data[(coll, np)][label][int(p[0])].append((float(p[5]), float(p[7])))

def med(vals, i):
    return statistics.median(v[i] for v in vals) if vals else None

base_order = ["tcp-shm", "tcp-noshm", "mpi-ring", "mpi-tree", "mpi-native", "gloo-ring_chunked", "gloo-bcube",
              "gloo-halving_doubling", "gloo-best"]
order = [v for b in base_order for v in (b, b + "-async", b + "@ref", b + "-async@ref")]
def fmt_size(s):
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if s >= 1 << k and s % (1 << k) == 0: return f"{s >> k} {unit}"
    return f"{s} B"

lines = ["# comm_bench comparison (float32 sum, in place, median of repetitions)", ""]
if limits:
    lines += ["## This machine's limits (bench/physical_limits)", "", "| measure | GB/s |", "|---|---:|"]
    lines += [f"| {k} | {v:.2f} |" for k, v in limits.items()] + [""]
ratio_lines = []
gp_plots = []
for coll in ("allreduce", "reduce_scatter"):
    for np in nps:
        d = data.get((coll, np))
        if not d: continue
        gloo = [l for l in d if l.startswith("gloo-")]
        sizes = sorted({s for l in d for s in d[l]})
        if gloo:  # best Gloo algorithm per size (highest busbw median)
            for s in sizes:
                best = max((d[l][s] for l in gloo if d[l][s]), key=lambda v: med(v, 1), default=None)
                if best: d["gloo-best"][s] = best
        labels = [l for l in order if l in d]
        lines += [f"## {coll}, {np} ranks: busbw (GB/s), and time (us) at the smallest size", "",
                  "| size | " + " | ".join(labels) + " |", "|---:|" + "---:|" * len(labels)]
        for s in sizes:
            lines.append(f"| {fmt_size(s)} | " + " | ".join(
                f"{med(d[l][s], 1):.3f}" if d[l][s] else "-" for l in labels) + " |")
        s0 = sizes[0]
        lines.append(f"| time_us @ {fmt_size(s0)} | " + " | ".join(
            f"{med(d[l][s0], 0):.1f}" if d[l][s0] else "-" for l in labels) + " |")
        lines.append("")
        # data file for gnuplot: size then one busbw column per label
        dat = os.path.join(out, f"{coll}.np{np}.dat")
        with open(dat, "w") as f:
            f.write("# size " + " ".join(labels) + "\n")
            for s in sizes:
                f.write(f"{s} " + " ".join(f"{med(d[l][s], 1):.4f}" if d[l][s] else "NaN" for l in labels) + "\n")
        gp_plots.append((coll, np, os.path.basename(dat), [l for l in labels if not l.endswith("@ref")], labels))

        def ratio(a, b, lo, hi, i=1, invert=False):
            rs = []
            for s in sizes:
                if lo <= s <= hi and d.get(a, {}).get(s) and d.get(b, {}).get(s):
                    x, y = med(d[a][s], i), med(d[b][s], i)
                    rs.append((s, (y / x) if invert else (x / y)))
            return rs
        def show(name, rs, target, ge=True):
            if not rs: return
            if target is None:  # reported, no target
                ratio_lines.append(f"| {coll} np{np} | {name} | " + ", ".join(f"{fmt_size(s)}: {r:.2f}" for s, r in rs) +
                                   f" | - | median {statistics.median(r for _, r in rs):.2f} |")
                return
            worst = min(r for _, r in rs) if ge else max(r for _, r in rs)
            ok = worst >= target if ge else worst <= target
            ratio_lines.append(f"| {coll} np{np} | {name} | " + ", ".join(f"{fmt_size(s)}: {r:.2f}" for s, r in rs) +
                               f" | {'>=' if ge else '<='} {target} | {'met' if ok else 'NOT met'} (worst {worst:.2f}) |")
        MiB = 1 << 20
        if coll == "allreduce" and "gloo-best" in d:
            show("tcp-noshm / gloo-best busbw", ratio("tcp-noshm", "gloo-best", MiB, 64 * MiB), 2.0)
            if "tcp loopback 2-way" in limits:
                # The 2-way stream (two processes, each sending and receiving at rate R)
                # is what this machine's cores move over loopback in all: 2R bytes/s. A
                # ring's ranks move n * busbw bytes/s between them, so busbw <= 2R / n:
                # the highest ratio to Gloo reachable here (n = 2: R, every byte both ways).
                rate = 2 * limits["tcp loopback 2-way"] / np
                cap = [(s, rate / med(d["gloo-best"][s], 1)) for s in sizes
                       if MiB <= s <= 64 * MiB and d["gloo-best"][s]]
                ratio_lines.append(f"| {coll} np{np} | reference: ceiling 2 x (tcp loopback 2-way rate) / {np} ranks, over gloo-best busbw (what loopback TCP lets a ring reach on this machine; measured once at the start, so a cell may pass it) | " +
                                   ", ".join(f"{fmt_size(s)}: {r:.2f}" for s, r in cap) + " | (physical) | - |")
            show("tcp-noshm / gloo-best time @4 KiB", ratio("tcp-noshm", "gloo-best", 4096, 4096, 0), 0.25, ge=False)
        show("tcp-shm / mpi-native busbw", ratio("tcp-shm", "mpi-native", 64 << 10, 64 * MiB), 1.0)
        # Default mode (issued, then waited) against blocking calls, and against Open MPI
        # in the same mode.
        show("tcp-shm-async / tcp-shm time", ratio("tcp-shm-async", "tcp-shm", 0, 64 * MiB, 0), 1.2, ge=False)
        show("tcp-shm-async / mpi-native-async busbw", ratio("tcp-shm-async", "mpi-native-async", 64 << 10, 64 * MiB), 1.0)
        show("mpi-native-async / mpi-native time", ratio("mpi-native-async", "mpi-native", 0, 64 * MiB, 0), None)
        for l in [l for l in labels if l.endswith("@ref")]:
            show(f"{l[:-4]} / {l} time (this build against the reference build)", ratio(l[:-4], l, 0, 1 << 40, 0), None)
        if coll == "allreduce":
            best_ours = {s: max(d["mpi-ring"][s], d["mpi-tree"][s], key=lambda v: med(v, 1) if v else -1)
                         for s in sizes if d["mpi-ring"][s] or d["mpi-tree"][s]}
            d["mpi-ours"] = best_ours
            show("max(mpi-ring, mpi-tree) / mpi-native busbw", ratio("mpi-ours", "mpi-native", MiB, 1 << 40), 0.9)
        else:
            show("mpi-ring / mpi-native busbw", ratio("mpi-ring", "mpi-native", MiB, 1 << 40), 0.9)

lines += ["## The issue's ratios", "", "| case | ratio | per size | target | verdict |", "|---|---|---|---|---|"]
lines += ratio_lines
open(os.path.join(out, "results.md"), "w").write("\n".join(lines) + "\n")

# gnuplot: one panel per (collective, ranks), busbw against size, log-log.
styles = {"tcp-shm": "lw 3 lc rgb '#d62728'", "tcp-noshm": "lw 3 lc rgb '#ff7f0e'", "mpi-ring": "lw 2 lc rgb '#2ca02c'",
          "mpi-tree": "lw 2 dt 2 lc rgb '#2ca02c'", "mpi-native": "lw 3 lc rgb '#1f77b4'",
          "gloo-ring_chunked": "lw 1 lc rgb '#7f7f7f'", "gloo-bcube": "lw 1 dt 2 lc rgb '#7f7f7f'",
          "gloo-halving_doubling": "lw 1 dt 3 lc rgb '#7f7f7f'", "gloo-best": "lw 3 lc rgb '#000000'"}
rows = max(1, (len(gp_plots) + 1) // 2)
gp = [f"set terminal pngcairo size 1400,{520 * rows} font 'sans,11'", f"set output '{out}/busbw.png'",
      f"set multiplot layout {rows},2 title 'busbw (GB/s) vs message size, float32 sum (median; higher is better)'",
      "set logscale x 2", "set logscale y 10", "set grid", "set key left top font ',9' noenhanced",
      "set format x '%.0b%B'", "set xlabel 'message size (bytes)'", "set ylabel 'busbw (GB/s)'"]
for coll, np, dat, labels, all_labels in gp_plots:
    gp.append(f"set title '{coll}, {np} ranks' noenhanced")
    cols = {l: i + 2 for i, l in enumerate(all_labels)}
    parts = [f"'{out}/{dat}' using 1:{cols[l]} with linespoints {styles.get(l.replace('-async', ''), '')}"
             f"{' dt 3' if l.endswith('-async') else ''} pt 7 ps 0.6 title '{l}'"
             for l in labels if l not in ("gloo-ring_chunked", "gloo-bcube", "gloo-halving_doubling")
             or "gloo-best" not in labels]
    gp.append("plot " + ", \\\n     ".join(parts))
gp.append("unset multiplot")
open(os.path.join(out, "busbw.gp"), "w").write("\n".join(gp) + "\n")
print(open(os.path.join(out, "results.md")).read())
