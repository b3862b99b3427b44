#!/usr/bin/env bash
# Start-up and small collectives at hundreds of ranks, dpt's tcp backend against Open MPI
# (and PyTorch gloo where asked), on the same layout in one run (docs/scale.md,
# "Measured here"). Each run starts P ranks of a probe that builds the world, runs a
# barrier and allreduces of 4 KiB and 1 MiB (checked exactly), then times N barriers and N
# 4 KiB allreduces:
#   dpt   build/bin/launch ... tcp_connections_probe --latency N  (the defaults: shared
#         memory between ranks of a host, connections on demand)
#   mpi   mpirun ... mpi_startup_probe --latency N                (Open MPI's defaults)
#   gloo  build/bin/launch ... python bench/gloo_startup_probe.py (init_process_group)
#
#   bench/scale_hosts.sh one-host "16 64 256 512" [GLOO_RANKS]   P ranks on this host
#   bench/scale_hosts.sh hosts "16x8 32x8 16x16"                 H network namespaces
#                                                                (bench/cluster.sh) x L ranks
# Columns: wall_s, the whole command; first_s, from the command's start until every rank
# finished its first allreduces (process start-up and rendezvous included); barrier_us and
# ar4k_us, the ranks' mean of the timed loops; conn, TCP connections per rank (dpt: the
# backend's counter; mpi: sockets held); req0 / req_max, store requests of rank 0 and of
# the busiest other rank while building (dpt); mem_MiB, the machine's peak memory in use
# (MemTotal - MemAvailable, sampled every 0.2 s) above its level before the command, and
# per host. Raw logs in $OUT (default: a temporary directory, kept).
# Env: ROUNDS (default 50), RUN_TIMEOUT (s, default 1200), PYTHON (default .venv/bin/python).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bin=${BIN:-$root/build/bin}
mode=${1:?usage: scale_hosts.sh one-host|hosts LIST [GLOO_RANKS]}
list=${2:?usage: scale_hosts.sh one-host|hosts LIST [GLOO_RANKS]}
gloo_list=${3:-}
rounds=${ROUNDS:-50}
run_timeout=${RUN_TIMEOUT:-1200}
python=${PYTHON:-$root/.venv/bin/python}
out=${OUT:-$(mktemp -d /tmp/scale_hosts.XXXXXX)}  # kept: its path is printed at the end
mkdir -p "$out"
for p in launch tcp_connections_probe mpi_startup_probe; do
  [[ -x $bin/$p ]] || { echo "scale_hosts: $bin/$p is missing (cmake --build build --target $p)" >&2; exit 2; }
done
ulimit -n 1048576 2>/dev/null || ulimit -n 65536 2>/dev/null || true
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Hundreds of ranks on 2 cores: the defaults' 60 s operation timeout is for real machines.
export COMM_RENDEZVOUS_TIMEOUT_S=900 COMM_TIMEOUT_S=900

mem_used_kib() { awk '/^MemTotal:/ { t = $2 } /^MemAvailable:/ { a = $2 } END { print t - a }' /proc/meminfo; }

# run_sampled LOG CMD...: runs CMD (output to LOG), prints "rc wall_s t0_ms peak_kib"
run_sampled() {
  local log=$1 base peak u t0 t1 pid rc
  shift
  sync
  sleep 1
  base=$(mem_used_kib)
  peak=$base
  t0=$(date +%s%N)
  # A shell function (cluster_launch, cluster_mpirun) cannot run under timeout(1): the
  # probes' own COMM_TIMEOUT_S bounds those.
  if declare -F "$1" >/dev/null; then "$@" >"$log" 2>&1 & else timeout "$run_timeout" "$@" >"$log" 2>&1 & fi
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    u=$(mem_used_kib)
    ((u > peak)) && peak=$u
    sleep 0.2
  done
  wait "$pid"
  rc=$?
  t1=$(date +%s%N)
  echo "$rc $(((t1 - t0) / 1000000)) $((t0 / 1000000)) $((peak - base))"
}

# summarise SYSTEM LAYOUT P HOSTS "rc wall_ms t0_ms peak_kib" LOG...
summarise() {
  local sys=$1 layout=$2 p=$3 hosts=$4 run=$5
  shift 5
  read -r rc wall t0 peak <<<"$run"
  cat "$@" | awk -v sys="$sys" -v lay="$layout" -v p="$p" -v h="$hosts" -v rc="$rc" -v wall="$wall" \
    -v t0="$t0" -v peak="$peak" '
    / rank [0-9]+ / && /first_done_at/ {  # a probe line (a warning names ranks too)
      for (i = 1; i < NF; i++) f[$i] = $(i + 1)
      n++; ok += f["ok"]; b += f["barrier_us"]; a += f["allreduce4k_us"]
      if (f["first_done_at"] > fd) fd = f["first_done_at"]
      c += ("connections" in f) ? f["connections"] : f["sockets"]
      if ("store_requests" in f) {
        if (f["rank"] == 0) q0 = f["store_requests"]; else if (f["store_requests"] > qm) qm = f["store_requests"]
      }
      delete f
    }
    END {
      printf "| %s | %s | %d | %d/%d | %d | %.1f | %.1f | %.0f | %.0f | %.1f | %s | %s | %.0f | %.0f |\n",
        sys, lay, p, ok, p, rc, wall / 1000, n ? (fd - t0) / 1000 : -1, n ? b / n : -1, n ? a / n : -1,
        n ? c / n : -1, q0 == "" ? "-" : q0, qm == "" ? "-" : qm, peak / 1024, peak / 1024 / h
    }'
}

echo "| system | layout | ranks | ok | rc | wall_s | first_s | barrier_us | ar4k_us | conn | req0 | req_max | mem_MiB | MiB/host |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
case $mode in
  one-host)
    for p in $list; do
      r=$(run_sampled "$out/dpt.$p" "$bin/launch" -n "$p" --no-prefix "$bin/tcp_connections_probe" --latency "$rounds")
      summarise dpt "1x$p" "$p" 1 "$r" "$out/dpt.$p"
      r=$(run_sampled "$out/mpi.$p" mpirun -np "$p" --oversubscribe --bind-to none "$bin/mpi_startup_probe" \
        --latency "$rounds")
      summarise mpi "1x$p" "$p" 1 "$r" "$out/mpi.$p"
      if [[ " $gloo_list " == *" $p "* ]]; then
        r=$(run_sampled "$out/gloo.$p" "$bin/launch" -n "$p" --no-prefix "$python" "$here/gloo_startup_probe.py" \
          --latency "$rounds")
        summarise "gloo $("$python" -c 'import torch; print(torch.__version__.split("+")[0])')" "1x$p" "$p" 1 "$r" \
          "$out/gloo.$p"
      fi
    done
    ;;
  hosts)
    # shellcheck source=cluster.sh
    source "$here/cluster.sh"
    COMM_JOB_TOKEN=$(openssl rand -hex 32)  # launch --nnodes wants the job's secret
    export COMM_JOB_TOKEN
    for hl in $list; do
      h=${hl%x*} l=${hl#*x} p=$((${hl%x*} * ${hl#*x}))
      cluster_up "$h" "" || exit $?
      r=$(run_sampled "$out/dpt.$hl" cluster_launch "$bin" "$l" block 29555 "$out/dpt.$hl" \
        "$bin/tcp_connections_probe" --latency "$rounds")
      summarise dpt "${h}x$l" "$p" "$h" "$r" "$out/dpt.$hl".h*
      r=$(run_sampled "$out/mpi.$hl" cluster_mpirun "$l" -n "$p" "$bin/mpi_startup_probe" --latency "$rounds")
      summarise mpi "${h}x$l" "$p" "$h" "$r" "$out/mpi.$hl"
      cluster_down
    done
    ;;
  *) echo "scale_hosts: mode one-host or hosts, not '$mode'" >&2; exit 2 ;;
esac
echo "logs: $out" >&2
