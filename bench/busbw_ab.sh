#!/usr/bin/env bash
# Two builds' tcp bus bandwidth at 2, 4 and 8 ranks on this host, interleaved (old, new per
# configuration, REPS times) so both see the same load: the collectives in the shared-memory
# arena (the default) and as messages over the shared-memory rings (COMM_TCP_SHM_COLL=0);
# allreduce 4 KiB-16 MiB (x16), 100 timed iterations after 10. Then the median busbw per
# cell, new/old, and each cell's per-run values (run-to-run spread on 2 shared cores).
#   bench/busbw_ab.sh OLD_BUILD NEW_BUILD [OUT]     (folders with bin/launch, bin/comm_bench)
# Env: REPS (5).  Issue 58: the build before its shared-memory rework (088aba3) against now.
set -euo pipefail
old=${1:?usage: busbw_ab.sh OLD_BUILD NEW_BUILD [OUT]} new=${2:?usage: busbw_ab.sh OLD_BUILD NEW_BUILD [OUT]}
out=${3:-$(mktemp -d /tmp/busbw_ab.XXXXXX)}  # kept: the per-run logs and JSON rows
mkdir -p "$out"
echo "busbw_ab: logs and rows in $out" >&2
for ((rep = 1; rep <= ${REPS:-5}; rep++)); do
  for mode in arena messages; do
    for p in 2 4 8; do
      for b in old new; do
        d=$old; [[ $b == new ]] && d=$new
        env $([[ $mode == messages ]] && echo COMM_TCP_SHM_COLL=0) COMM_TIMEOUT_S=300 "$d/bin/launch" -n $p \
          "$d/bin/comm_bench" -b 4K -e 16M -f 16 -n 100 -w 10 --backend tcp --json "$out/$b.$mode.$p.$rep.json" \
          >"$out/$b.$mode.$p.$rep.log" 2>&1 || echo "busbw_ab: $b $mode $p ranks run $rep failed ($out)" >&2
      done
    done
  done
done
python3 - "$out" <<'PY'
import glob, json, statistics, sys
res = {}
for f in glob.glob(sys.argv[1] + "/*.json"):
    b, mode, p, rep = f.split("/")[-1][:-5].split(".")
    for r in json.load(open(f))["rows"]:
        res.setdefault((mode, int(p), r["size"], b), []).append(r["busbw"])
size = lambda n: f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"
ratios = []
for mode in ("arena", "messages"):
    sizes = sorted({k[2] for k in res if k[0] == mode})
    print(f"\n{mode}: busbw GB/s, new / old (medians of the runs) = ratio")
    print("| ranks | " + " | ".join(size(s) for s in sizes) + " |\n|---:|" + "---|" * len(sizes))
    for p in (2, 4, 8):
        cells = []
        for s in sizes:
            o, n = statistics.median(res[(mode, p, s, "old")]), statistics.median(res[(mode, p, s, "new")])
            ratios.append(n / o)
            cells.append(f"{n:.2f} / {o:.2f} = {n / o:.2f}x")
        print(f"| {p} | " + " | ".join(cells) + " |")
print(f"\n{len(ratios)} cells: new/old median {statistics.median(ratios):.2f}, min {min(ratios):.2f}, max {max(ratios):.2f}")
print("\nper-run busbw (sorted), old | new:")
for k in sorted({k[:3] for k in res}):
    print(f"  {k[0]:8s} {k[1]} ranks {size(k[2]):>7s}: " + " ".join(f"{x:.3f}" for x in sorted(res[k + ('old',)])) +
          " | " + " ".join(f"{x:.3f}" for x in sorted(res[k + ('new',)])))
PY
