#!/usr/bin/env bash
# What the records (comm/net/record_stream.h, issue 59) cost, measured in one run:
#   1. seal/open GB/s on one core per cipher and mode (bench/record_speed), next to
#      `openssl speed` of the same ciphers;
#   2. allreduce busbw between 2 ranks over loopback TCP (COMM_TCP_SHM=0), 1-64 MiB:
#      encrypted (COMM_TCP_ENCRYPT=1), authenticated only (0), and, with BASE=DIR (the
#      bin/ of a build without records, e.g. a worktree of 8815da8), no records at all;
#   3. the same across 2 emulated hosts with 1 Gbit/s links (bench/cluster.sh);
#   4. a 4 x 2-rank training run across 4 emulated hosts at 1 Gbit/s: ms per step
#      encrypted (the default there) and authenticated only.
# Usage: bench/record_cost.sh BUILD_BIN [OUT_DIR]   (root: namespaces; REPS=3 runs each)
set -u
bin=$(cd "${1:?usage: record_cost.sh BUILD_BIN [OUT_DIR]}" && pwd)
out=${2:-$(mktemp -d /tmp/record_cost.XXXXXX)}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
source "$here/cluster.sh"
REPS=${REPS:-3} BASE=${BASE:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 COMM_RENDEZVOUS_TIMEOUT_S=60
export COMM_JOB_TOKEN=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
port=$((20000 + $$ % 20000))
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; $(openssl version)"

echo "## 1. one core"
"$bin/record_speed"
for c in aes-256-gcm chacha20-poly1305; do
  openssl speed -evp "$c" -seconds 2 -bytes 65536 2>/dev/null | tail -1 | awk -v c="$c" '{printf "openssl speed %-18s %.2f GB/s\n", c, $2 / 1e6}'
done

bench_cols() { awk '$1 ~ /^[0-9]+$/ && NF >= 9 {printf "%s ", $7} END {print ""}' "$1"; }
loopback() {  # BIN VAR=VALUE...: busbw per size, 1-64 MiB
  local b=$1
  shift
  env COMM_TCP_SHM=0 "$@" "$b/launch" -n 2 --no-prefix "$b/comm_bench" --backend tcp -b 1M -e 64M -f 4 -n 10 -w 2 \
    > "$out/lo.log" 2>&1 || { tail -5 "$out/lo.log"; return 1; }
  bench_cols "$out/lo.log"
}
echo "## 2. loopback, 2 ranks, busbw GB/s at 1M 4M 16M 64M (run by run)"
for rep in $(seq "$REPS"); do
  echo "encrypted      $(loopback "$bin" COMM_TCP_ENCRYPT=1)"
  echo "authenticated  $(loopback "$bin" COMM_TCP_ENCRYPT=0)"
  [[ -n $BASE ]] && echo "no records     $(loopback "$BASE")"
done

cluster_up 2 1gbit || exit $?
hosts() {  # VAR=VALUE...: comm_bench across the 2 hosts, 1 rank each
  port=$((port + 1))
  (export "$@"; cluster_launch "$bin" 1 block "$port" "$out/h2" "$bin/comm_bench" --backend tcp -b 1M -e 64M -f 4 -n 5 -w 1) ||
    { tail -5 "$out"/h2.h*; return 1; }
  bench_cols "$out/h2.h0"
}
echo "## 3. 2 hosts at 1 Gbit/s, busbw GB/s at 1M 4M 16M 64M"
for rep in $(seq "$REPS"); do
  echo "encrypted      $(hosts COMM_TCP_ENCRYPT=auto)"
  echo "authenticated  $(hosts COMM_TCP_ENCRYPT=0)"
done
cluster_down

cluster_up 4 1gbit || exit $?
train_ms() {  # VAR=VALUE...: rank 0's ms per step of a 4 x 2-rank run
  port=$((port + 1))
  (export "$@" OPENBLAS_NUM_THREADS=1; cluster_launch "$bin" 2 block "$port" "$out/t4" "$bin/train" --backend tcp \
    --model cnn --batch-size 32 --steps 40 --log-every 20) || { tail -5 "$out"/t4.h*; return 1; }
  grep -m1 "final:" "$out/t4.h0" | grep -oE "step_ms=[0-9.]+|ms_per_step=[0-9.]+|[0-9.]+ ms/step" | head -1
}
echo "## 4. 4 hosts x 2 ranks at 1 Gbit/s, train --model cnn: ms per step"
for rep in $(seq "$REPS"); do
  echo "encrypted      $(train_ms COMM_TCP_ENCRYPT=auto)"
  echo "authenticated  $(train_ms COMM_TCP_ENCRYPT=0)"
done
