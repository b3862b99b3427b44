#!/usr/bin/env bash
# Elastic across two hosts: network namespaces A and B joined by a veth pair, one
# `launch --elastic --nnodes 2` per host (A serves the rendezvous store, --rdzv-host),
# two ranks on each. B's link is cut mid-run: A's ranks time out on B's, form the next
# generation without them (B never arrives: it cannot reach the store) and finish the
# run at world size 2; B's launcher ends with an error instead of hanging.
# Exit 77 (SKIP) when namespaces cannot be made (not root, no CAP_NET_ADMIN, no `ip`).
#   elastic_netns.sh <bin dir>
set -u
bin=$1
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
source "$(dirname "$0")/../../support/two_hosts.sh"
port=29611
work=$(mktemp -d)
pa="" pb=""
cleanup() { kill $pa $pb 2>/dev/null; wait 2>/dev/null; delete_two_hosts; rm -rf "$work"; }
trap cleanup EXIT
two_hosts dpe 10.232

token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
steps=400
args=(--elastic --backend tcp --model mlp --optimizer adam --lr 1e-3 --lr-schedule constant --no-shuffle
      --batch-size 64 --log-every 5 --max-eval-samples 64 --steps $steps)
host() {  # host NS NODE IFNAME: one launcher with its two local ranks
  ip netns exec "$1" env COMM_JOB_TOKEN="$token" COMM_TCP_IFNAME="$3" COMM_TIMEOUT_S=5 COMM_ELASTIC_SETTLE_S=3 \
    COMM_RENDEZVOUS_TIMEOUT_S=10 OPENBLAS_NUM_THREADS=1 \
    "$bin/launch" --elastic -n 1:2 --nnodes 2 --node-rank "$2" --rdzv-host "$net.1" --master-port $port \
    "$bin/train" "${args[@]}" --metrics-out "$work/m$2.jsonl"
}
host "$a" 0 "$va" > "$work/a.log" 2>&1 & pa=$!
host "$b" 1 "$vb" > "$work/b.log" 2>&1 & pb=$!
# Cut B's link once the 4-rank group has run a few steps.
for _ in $(seq 1 600); do grep -q '"step":20,' "$work/m0.jsonl" 2>/dev/null && break; sleep 0.1; done
grep -q '"step":20,' "$work/m0.jsonl" 2>/dev/null || { tail -n 20 "$work/a.log" "$work/b.log"; fail "the job never reached step 20"; }
grep -q '"world_size":4' "$work/m0.jsonl" || fail "the job did not start with 4 ranks across the hosts"
ip -n "$b" link set "$vb" down
echo "cut host B's link after step 20"
timeout 120 tail --pid=$pa -f /dev/null; wait $pa; rca=$?
timeout 60 tail --pid=$pb -f /dev/null; kill -KILL $pb 2>/dev/null && fail "host B did not end within 60 s of the cut"; wait $pb; rcb=$?
pa="" pb=""
((rca == 0)) || { tail -n 30 "$work/a.log"; fail "host A's job failed (exit $rca)"; }
((rcb != 0)) || { tail -n 20 "$work/b.log"; fail "host B's launcher exited 0 although its link was cut"; }
final=$(grep "final:" "$work/a.log") || fail "host A: no final line"
for want in "steps=$steps " "world_size=2 " "recoveries=1 "; do
  grep -q -- "$want" <<< "$final" || { echo "$final"; fail "host A: the final line lacks '$want'"; }
done
grep '"event":"membership"' "$work/m0.jsonl" | grep -q '"lost":\["n1.l0.i0","n1.l1.i0"\]' ||
  { grep membership "$work/m0.jsonl"; fail "the new generation does not name B's two ranks as lost"; }
grep -E "elastic: generation" "$work/a.log" | sed 's/^/  /'
echo "two hosts: B cut off after step 20; A's two ranks re-formed and finished $steps steps; B's launcher exited $rcb"
echo ok
