#!/usr/bin/env bash
# algo_auto.sh: --algo auto against every algorithm forced, allreduce float sum 4 KiB to
# 64 MiB, on this host (launch -n NP, tcp backend: auto takes the shared-memory arena when
# every rank is here) and, with HOSTS set, on emulated hosts (bench/hierarchical.sh with
# auto among its algorithms: block and round-robin numbering, links at RATE). Interleaved:
# each repetition runs every algorithm's sweep in turn; per size the median over the
# repetitions, then auto's time over the best forced algorithm's (>= 0.9x is the goal,
# issue 44: auto must be as good as the best choice a user could force).
#
#   bench/algo_auto.sh [build]          (about 2 minutes; with HOSTS=4, 8 more)
# Environment: NP (2), REPS (3), ITERS (20, per size), ALGOS ("native ring tree recursive_doubling"),
#   HOSTS ("": this host only), HOST_ALGOS ("ring tree recursive_doubling", with hierarchical),
#   LOCAL (2), RATE (1gbit), OUT (bench/results/algo_auto)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bin=$(cd "$build/bin" && pwd)
NP=${NP:-2} REPS=${REPS:-3} ITERS=${ITERS:-20} ALGOS=${ALGOS:-"native ring tree recursive_doubling"} HOSTS=${HOSTS:-}
OUT=${OUT:-bench/results/algo_auto}
mkdir -p "$OUT/raw"

table() {  # FILES_PREFIX ALGO...: per size, each algorithm's median time (us) and auto / best
  local prefix=$1
  shift
  python3 - "$prefix" "$@" <<'PY'
import glob, statistics, sys
prefix, algos = sys.argv[1], sys.argv[2:]
times, ran = {}, {}
for a in ["auto"] + algos:
    for path in glob.glob("%s.%s.r*.txt" % (prefix, a)):
        for line in open(path):
            f = line.split()
            if len(f) >= 6 and f[0].isdigit():
                times.setdefault(a, {}).setdefault(int(f[0]), []).append(float(f[5]))
                if a == "auto":
                    ran[int(f[0])] = f[4]  # the algorithm auto resolved to
sizes = sorted(times.get("auto", {}))
print("| bytes | auto ran | " + " | ".join(["auto"] + algos) + " | best forced | auto / best |")
print("|---" * (len(algos) + 5) + "|")
worst = None
for s in sizes:
    med = {a: statistics.median(times[a][s]) for a in ["auto"] + algos if s in times.get(a, {})}
    best_a = min((a for a in algos if a in med), key=lambda a: med[a])
    ratio = med[best_a] / med["auto"]  # >= 1: auto as fast as the best or faster
    worst = ratio if worst is None else min(worst, ratio)
    print("| %d | %s | " % (s, ran.get(s, "?")) + " | ".join("%.1f" % med[a] if a in med else "-" for a in ["auto"] + algos)
          + " | %s | %.2fx |" % (best_a, ratio))
print("\nworst size: auto at %.2fx the best forced algorithm's speed (where auto ran the best forced"
      " algorithm itself, a ratio off 1 is run-to-run noise)" % worst)
PY
}

if [[ -z $HOSTS ]]; then
  export COMM_JOB_TOKEN=${COMM_JOB_TOKEN:-algo-auto-bench-$$-secret}
  read -r -a order <<< "auto $ALGOS"
  for ((rep = 1; rep <= REPS; rep++)); do
    # Rotated each repetition, so no algorithm always runs first (a cold start).
    for ((k = 0; k < ${#order[@]}; k++)); do
      algo=${order[(k + rep - 1) % ${#order[@]}]}
      "$bin/launch" -n "$NP" "$bin/comm_bench" --backend tcp --algo "$algo" -b 4K -e 64M -f 4 -n "$ITERS" -w 5 -c 1 \
        2>&1 | sed 's/^\[rank 0\] //' > "$OUT/raw/host.np$NP.$algo.r$rep.txt" || { echo "FAIL: $algo"; exit 1; }
    done
  done
  echo "== $NP ranks on this host (tcp), allreduce float sum; us, median of $REPS"
  table "$OUT/raw/host.np$NP" $ALGOS | tee "$OUT/host_np$NP.md"
else
  OUT_H=$OUT/raw/hosts
  # Across hosts the tcp backend has no native collective (its arena is one host's).
  ALGOS=${HOST_ALGOS:-"ring tree recursive_doubling"}
  HOSTS=$HOSTS ALGOS="auto hierarchical $ALGOS" REPS=$REPS bash bench/hierarchical.sh "$bin" "$OUT_H" | tee "$OUT/hosts.log"
  for H in $HOSTS; do
    for order in ${ORDERS:-block cyclic}; do
      echo "== $H emulated hosts x ${LOCAL:-2} ranks, ${RATE:-1gbit} links, $order numbering; us, median of $REPS"
      table "$OUT_H/sweep.h$H.$order" hierarchical $ALGOS | tee "$OUT/hosts_h${H}_$order.md"
    done
  done
fi
