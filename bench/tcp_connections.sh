#!/usr/bin/env bash
# Connections per rank, rendezvous and first-collective time, and RSS of the tcp backend
# at many ranks on one machine (docs/multihost.md, "Many ranks"). Each run starts P ranks
# of tests/backends/tcp_connections_probe with build/bin/launch on P/8 emulated hosts,
# sockets only, and summarises the ranks' lines (barrier, 4 KiB and 1 MiB allreduce
# checked exactly on every rank).
#
# The store's own part of the build, from the ranks' milestones (tcp::Mesh; ms, one
# host's clock): publish_max, the slowest rank's store connect + first requests (waits
# for rank 0's server if it starts late); store_rdzv, from the last rank's publication
# until every rank has met (rendezvous, job id); digests_max, the slowest rank's read of
# every rank's host; store_all, from the last publication until every rank has read
# them. A build without them shows "-".
#
#   bench/tcp_connections.sh [-p "64 256 512"] [-r ROUNDS] BIN_DIR...
#
# BIN_DIR holds launch and tcp_connections_probe (and ../lib); several BIN_DIRs run
# interleaved (A B A B ...) to compare builds on a shared machine. A BIN_DIR whose
# library has no connection counter is run with --no-stats (connections shown as -1:
# read the sockets column: peers + the store client).
set -euo pipefail
ranks="64 256"
rounds=1
while getopts "p:r:" o; do
  case $o in
    p) ranks=$OPTARG ;;
    r) rounds=$OPTARG ;;
    *) echo "usage: $0 [-p \"64 256\"] [-r ROUNDS] BIN_DIR..." >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[[ $# -ge 1 ]] || { echo "$0: name at least one BIN_DIR (e.g. build/bin)" >&2; exit 2; }
for d in "$@"; do
  [[ -x $d/launch && -x $d/tcp_connections_probe ]] ||
    { echo "$0: $d lacks launch or tcp_connections_probe (build the tcp_connections_probe target)" >&2; exit 2; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
[[ -n ${KEEP_LOG:-} ]] && trap - EXIT && echo "logs in $out"
printf '%-28s %5s %6s %10s %9s %9s %8s %8s %9s %6s %11s %10s %11s %9s\n' build ranks wall_s conn/rank sock/rank rdzv_max first_max rss_MiB ok_ranks rc \
  publish_max store_rdzv digests_max store_all
for p in $ranks; do
  for ((i = 0; i < rounds; i++)); do
    for d in "$@"; do
      stats=(--no-stats)
      [[ $(nm -D "$d/../lib/libdpt_backend_tcp.so" 2>/dev/null | grep -c Connector) -gt 0 ]] && stats=()
      t0=$(date +%s.%N)
      rc=0
      COMM_TCP_SHM=0 COMM_FAKE_HOSTS=$((p / 8)) COMM_RENDEZVOUS_TIMEOUT_S=300 \
        timeout 600 "$d/launch" -n "$p" "$d/tcp_connections_probe" "${stats[@]}" >"$out/log" 2>&1 || rc=$?
      t1=$(date +%s.%N)
      # Rank 0 also holds the store server's sockets: the socket column skips it.
      awk -v b="$d" -v p="$p" -v w="$(echo "$t1 - $t0" | bc)" -v rc="$rc" '
        / probe rank / { n++; c += $7; if ($5 != 0) { s += $9; ns++ }
                         if ($11 > rz) rz = $11; if ($13 > fm) fm = $13; rss += $15; ok += $17
                         if ($18 == "arrived_at" && $19 > 0) { nt++
                           if ($21 - $19 > cm) cm = $21 - $19; if ($21 > pu) pu = $21; if ($23 > jo) jo = $23
                           if ($25 > ed) ed = $25; if ($25 - $23 > dg) dg = $25 - $23 } }
        END { printf "%-28s %5d %6.1f %10.1f %9.1f %9.0f %8.0f %8.1f %5d/%-3d %6d", b, p, w,
                     n ? c / n : 0, ns ? s / ns : 0, rz, fm, n ? rss / n / 1024 : 0, ok, p, rc
              if (nt == n && n > 0) printf " %11.1f %10.1f %11.1f %9.1f\n", cm, jo - pu, dg, ed - pu
              else printf " %11s %10s %11s %9s\n", "-", "-", "-", "-" }' "$out/log"
      [[ $rc -eq 0 ]] || grep -m3 -iE "error|timed out|ETIMEDOUT" "$out/log" | cut -c1-300 || true
    done
  done
done
