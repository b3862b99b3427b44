#!/usr/bin/env bash
# zero_overlap.sh: does stage-2 overlap shorten the step when the network is the
# bottleneck? Two network namespaces ("hosts" A and B) joined by a veth pair whose two
# ends are each shaped by a token bucket (tc tbf) to RATE, i.e. a full-duplex link of
# RATE per direction; one rank per host, tcp backend (no shared memory: different hosts).
# The GPT trainer runs ZeRO-2 with --overlap-comm on and off, interleaved REPS times, and
# the medians of the trainer's own `step_ms=` are compared.
#
# Why shape the link: on one 2-core machine loopback is so fast next to our CPU compute
# that gradient communication is a few percent of a step (docs/zero.md), so there is
# nothing to hide. What decides whether overlap pays is the ratio of communication to
# compute time; RATE sets it. 100 Mbit/s against a 2-core CPU (~25 GFLOP/s per rank)
# is about the ratio of a 100 Gbit/s link to a GPU 1000x faster than that CPU.
# The buckets (and the parameter refresh's pieces) are 0.5 MiB, so the 3.2 MiB model has
# several to overlap (the default 25 MiB would make one bucket of the whole model).
#   bench/zero_overlap.sh [BIN_DIR]        (default build/bin; needs root, ip, tc)
# Environment: RATE (100mbit), REPS (3), STEPS (12), BATCH (32), BUCKET_MB (0.5),
#   EXTRA (more train flags), MAX_RATIO (if set: exit 1 when on/off is above it).
# Exit 77 when namespaces or tbf cannot be set up (not root, no ip/tc): CTest's skip.
set -u
bin=${1:-build/bin}
RATE=${RATE:-100mbit} REPS=${REPS:-3} STEPS=${STEPS:-12} BATCH=${BATCH:-32} BUCKET_MB=${BUCKET_MB:-0.5} EXTRA=${EXTRA:-}
MAX_RATIO=${MAX_RATIO:-}
for t in ip tc; do command -v $t >/dev/null || { echo "SKIP: zero_overlap.sh needs $t (iproute2)"; exit 77; }; done
[[ -x $bin/train ]] || { echo "zero_overlap.sh: $bin/train missing"; exit 1; }
a=dpto-$$-a b=dpto-$$-b va=dpo$$a vb=dpo$$b net=10.232.$(($$ % 250))
work=$(mktemp -d)
cleanup() { ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
ip netns add "$a" 2>/dev/null && ip netns add "$b" || { echo "SKIP: cannot create network namespaces (root?)"; exit 77; }
ip link add "$va" netns "$a" type veth peer name "$vb" netns "$b" || { echo "SKIP: no veth support"; exit 77; }
ip -n "$a" addr add "$net.1/24" dev "$va" && ip -n "$b" addr add "$net.2/24" dev "$vb" || exit 1
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set "$va" up && ip -n "$b" link set "$vb" up || exit 1
# tbf: RATE with a 64 KiB bucket and up to 100 ms of queue, on each direction.
tc -n "$a" qdisc add dev "$va" root tbf rate "$RATE" burst 64kb latency 100ms &&
  tc -n "$b" qdisc add dev "$vb" root tbf rate "$RATE" burst 64kb latency 100ms ||
  { echo "SKIP: tc tbf not available"; exit 77; }
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
port=29600
one_run() {  # one_run NAME on|off: both ranks; prints the trainer's final line
  local name=$1 overlap=$2; port=$((port + 1))
  local args=(--backend tcp --model gpt --zero 2 --steps "$STEPS" --batch-size "$BATCH" --log-every 100
              --max-eval-samples 32 --overlap-comm "$overlap" --bucket-mb "$BUCKET_MB" --first-bucket-mb 0.125 $EXTRA)
  local pids=() rc=0
  for r in 0 1; do
    local ns=$a ifn=$va; ((r)) && ns=$b ifn=$vb
    ip netns exec "$ns" env RANK=$r WORLD_SIZE=2 MASTER_ADDR="$net.1" MASTER_PORT=$port COMM_JOB_TOKEN="$token" \
      COMM_TCP_IFNAME="$ifn" OPENBLAS_NUM_THREADS=1 "$bin/train" "${args[@]}" > "$work/$name.$r" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  ((rc == 0)) || { tail -n 20 "$work/$name".*; echo "zero_overlap.sh: run $name failed"; exit 1; }
  grep -h "^final:" "$work/$name.0"
}
echo "link: veth between two namespaces, tbf $RATE per direction; GPT, ZeRO-2, 2 ranks, $STEPS steps, batch $BATCH, buckets $BUCKET_MB MiB $EXTRA"
for ((i = 1; i <= REPS; i++)); do
  for o in on off; do
    line=$(one_run "$o$i" $o) || exit 1
    ms=$(sed -En 's/.* step_ms=([0-9.]+).*/\1/p' <<< "$line")
    echo "rep $i overlap $o: step_ms=$ms $(grep -oE 'comm_s=[0-9.]+ exposed_comm_s=[0-9.]+ hidden_frac=[0-9.]+' <<< "$line")"
    echo "$ms" >> "$work/ms.$o"
  done
done
median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
on=$(median "$work/ms.on") off=$(median "$work/ms.off")
awk -v a="$on" -v b="$off" -v m="$MAX_RATIO" 'BEGIN {
  printf "median step_ms: overlap on %.1f, off %.1f, on/off %.3f\n", a, b, a / b
  if (m != "" && a / b > m) { printf "FAIL: on/off %.3f > %s\n", a / b, m; exit 1 } }'
