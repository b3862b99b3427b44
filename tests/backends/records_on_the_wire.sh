#!/usr/bin/env bash
# What crosses the network between two emulated hosts (bench/cluster.sh), seen by a
# packet capture on host 1's link (tcpdump), and what a third host without the secret
# gets (issue 59's "must show"):
#   1. by default (nothing but the job's COMM_JOB_TOKEN set) an allreduce of known data
#      leaves no trace of that data on the wire: the records are encrypted;
#   2. with COMM_TCP_ENCRYPT=0 (authenticated only) the same data shows in the capture
#      (the check can tell, so 1 means something);
#   3. an intruder on a third host that knows the job's address but not its secret can
#      neither read the store nor join as a rank: rank 0's store refuses it, it fails with
#      the token check, and the real job completes;
#   4. launch --nnodes (plain and --elastic) across the hosts with nothing set by the user:
#      with munge (as on every Slurm cluster) the token comes by it and the job runs.
# Exit 77 where namespaces, tcpdump or munged are missing.
set -u
repo=$1 build=$2
source "$repo/bench/cluster.sh"
command -v tcpdump >/dev/null || { echo "SKIP: no tcpdump (apt-get install tcpdump)"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
work=$(mktemp -d /tmp/dpt-wire.XXXXXX)
cluster_up 3 ""
rc=$?
((rc == 0)) || { rm -rf "$work"; exit $rc; }
trap 'cluster_down; [[ -f $work/munged.pid ]] && kill "$(cat "$work/munged.pid")" 2>/dev/null; sleep 0.2; rm -rf "$work"' EXIT
token=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
port=$((20000 + RANDOM % 20000))

# The demo's data: rank 0 holds x[i] = i % 100, so floats 10, 11, 12, 13 follow each other
# in its buffer (and 30, 33, 36, 39 in the sums of two ranks).
pattern_count() {  # pcap file: how often either 16-byte run occurs
  python3 - "$1" <<'EOF'
import struct, sys
data = open(sys.argv[1], "rb").read()
runs = [struct.pack("<4f", 10, 11, 12, 13), struct.pack("<4f", 30, 33, 36, 39)]
print(sum(data.count(r) for r in runs))
EOF
}

# rank R of 2 on host R, by hand (RANK/WORLD_SIZE, as any launcher sets them).
rank() {
  local r=$1
  shift
  cluster_exec "$r" env RANK="$r" WORLD_SIZE=2 MASTER_ADDR="$(cluster_addr 0)" MASTER_PORT="$port" \
    COMM_TCP_IFNAME=eth0 COMM_RENDEZVOUS_TIMEOUT_S=15 "$@" "$build/bin/demo" --backend tcp --count 1000000
}

captured_run() {  # NAME VAR=VALUE...: both ranks with a capture on host 1's link
  local name=$1
  shift
  cluster_exec 1 tcpdump -i eth0 -s 0 -U -w "$work/$name.pcap" tcp >/dev/null 2>&1 &
  sleep 1
  rank 0 COMM_JOB_TOKEN="$token" "$@" > "$work/$name.0" 2>&1 &
  local p0=$!
  rank 1 COMM_JOB_TOKEN="$token" "$@" > "$work/$name.1" 2>&1 || { cat "$work/$name.1"; fail "$name: rank 1 failed"; }
  wait $p0 || { cat "$work/$name.0"; fail "$name: rank 0 failed"; }
  sleep 0.5
  pkill -INT -f "tcpdump .*$work/$name.pcap"  # (tcpdump runs as its own user, under ip netns exec)
  wait
  port=$((port + 1))
  grep -q "correct" "$work/$name.1" || { cat "$work/$name.1"; fail "$name: the allreduce was not correct"; }
}

# 1-2. The capture.
captured_run default
captured_run plain COMM_TCP_ENCRYPT=0
enc=$(pattern_count "$work/default.pcap") plain=$(pattern_count "$work/plain.pcap")
bytes_enc=$(stat -c %s "$work/default.pcap") bytes_plain=$(stat -c %s "$work/plain.pcap")
((plain >= 1000)) || fail "authenticated-only run: the data's pattern shows only $plain times in the capture ($bytes_plain bytes)"
((enc == 0)) || fail "default run: the data's pattern shows $enc times in the capture: not encrypted"
echo "ok   capture of a 4 MB allreduce on host 1's link: the data's pattern $enc times by default ($bytes_enc bytes captured), $plain times with COMM_TCP_ENCRYPT=0 ($bytes_plain bytes)"

# 3. An intruder on host 2 without the secret, while rank 0 waits for its rank 1.
rank 0 COMM_JOB_TOKEN="$token" > "$work/job.0" 2>&1 &
p0=$!
sleep 1
cluster_exec 2 env RANK=1 WORLD_SIZE=2 MASTER_ADDR="$(cluster_addr 0)" MASTER_PORT="$port" COMM_TCP_IFNAME=eth0 \
  COMM_JOB_TOKEN="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" COMM_RENDEZVOUS_TIMEOUT_S=5 \
  "$build/bin/demo" --backend tcp > "$work/intruder" 2>&1 && { cat "$work/intruder"; fail "the intruder joined the job"; }
grep -q "job token" "$work/intruder" || { cat "$work/intruder"; fail "the intruder's failure does not name the token check"; }
# Without any token it does not get in either, nor may it run open.
cluster_exec 2 env -u COMM_JOB_TOKEN RANK=1 WORLD_SIZE=2 MASTER_ADDR="$(cluster_addr 0)" MASTER_PORT="$port" \
  COMM_TCP_IFNAME=eth0 COMM_RENDEZVOUS_TIMEOUT_S=5 "$build/bin/demo" --backend tcp > "$work/intruder2" 2>&1 &&
  { cat "$work/intruder2"; fail "a rank without a token ran"; }
grep -q "refusing to run open" "$work/intruder2" || { cat "$work/intruder2"; fail "a rank without a token across hosts was not refused"; }
rank 1 COMM_JOB_TOKEN="$token" > "$work/job.1" 2>&1 || { cat "$work/job.1"; fail "the real rank 1 failed after the intruder"; }
wait $p0 || { cat "$work/job.0"; fail "rank 0 failed after the intruder"; }
grep -q "closing connection from 10\.[0-9.]*\.3:[0-9]*: failed the job token check" "$work/job.0" ||
  { cat "$work/job.0"; fail "rank 0's store did not log the intruder's refusal"; }
port=$((port + 1))
echo "ok   intruder on host 2 with a wrong token: '$(grep -m1 -o 'rejected our proof of the job token[^:]*' "$work/intruder")'; without one: refused to run open; the job then completes"

# 4. launch --nnodes 2, nothing set: the token by munge.
if command -v munged >/dev/null; then
  dd if=/dev/urandom bs=1 count=1024 of="$work/munge.key" status=none
  chmod 600 "$work/munge.key"
  munged --force --key-file="$work/munge.key" --socket="$work/munge.socket" --pid-file="$work/munged.pid" \
    --log-file="$work/munged.log" --seed-file="$work/munged.seed" || fail "munged did not start"
  pids=()
  for i in 0 1; do
    cluster_exec $i env -u COMM_JOB_TOKEN COMM_MUNGE_SOCKET="$work/munge.socket" COMM_TCP_IFNAME=eth0 \
      "$build/bin/launch" --nnodes 2 --node-rank $i --master-addr "$(cluster_addr 0)" --master-port "$port" -n 1 \
      --no-prefix "$build/bin/demo" --backend tcp > "$work/launch.h$i" 2>&1 &
    pids+=($!)
  done
  wait "${pids[0]}" && wait "${pids[1]}" || { cat "$work/launch.h0" "$work/launch.h1"; fail "launch --nnodes 2 with the token by munge failed"; }
  grep -q "correct" "$work/launch.h1" || { cat "$work/launch.h1"; fail "launch --nnodes: no correct allreduce"; }
  ! grep -qi "running open\|empty token" "$work/launch.h0" "$work/launch.h1" || fail "launch --nnodes ran open"
  echo "ok   launch --nnodes 2 across 2 hosts, nothing set: the token by munge, allreduce correct"
  # The elastic launchers agree on it themselves (node 0's store hands it to node 1's).
  port=$((port + 1))
  pids=()
  for i in 0 1; do
    cluster_exec $i env -u COMM_JOB_TOKEN COMM_MUNGE_SOCKET="$work/munge.socket" COMM_TCP_IFNAME=eth0 \
      "$build/bin/launch" --elastic -n 1:1 --nnodes 2 --node-rank $i --rdzv-host "$(cluster_addr 0)" --master-port "$port" \
      --no-prefix "$build/bin/train" --elastic --model mlp --steps 6 --log-every 3 > "$work/elastic.h$i" 2>&1 &
    pids+=($!)
  done
  wait "${pids[0]}" && wait "${pids[1]}" || { cat "$work/elastic.h0" "$work/elastic.h1"; fail "launch --elastic --nnodes 2 with the token by munge failed"; }
  grep -q "final: " "$work/elastic.h0" || { cat "$work/elastic.h0"; fail "launch --elastic --nnodes: no final line"; }
  echo "ok   launch --elastic --nnodes 2, nothing set: the launchers agree on the token by munge, training finishes"
else
  echo "note: no munged, launch --nnodes with the token by munge not checked"
fi
