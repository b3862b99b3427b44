#!/usr/bin/env bash
# Connections per rank, rendezvous and first-collective time, and RSS of the tcp backend
# at many ranks on one machine (docs/multihost.md, "Many ranks"). Each run starts P ranks
# of tests/backends/tcp_connections_probe with build/bin/launch on P/8 emulated hosts,
# sockets only, and summarises the ranks' lines (barrier, 4 KiB and 1 MiB allreduce
# checked exactly on every rank).
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
printf '%-28s %5s %6s %10s %9s %9s %8s %8s %9s %6s\n' build ranks wall_s conn/rank sock/rank rdzv_max first_max rss_MiB ok_ranks rc
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
                         if ($11 > rz) rz = $11; if ($13 > fm) fm = $13; rss += $15; ok += $17 }
        END { printf "%-28s %5d %6.1f %10.1f %9.1f %9.0f %8.0f %8.1f %5d/%-3d %6d\n", b, p, w,
                     n ? c / n : 0, ns ? s / ns : 0, rz, fm, n ? rss / n / 1024 : 0, ok, p, rc }' "$out/log"
      [[ $rc -eq 0 ]] || grep -m3 -iE "error|timed out|ETIMEDOUT" "$out/log" | cut -c1-300 || true
    done
  done
done
