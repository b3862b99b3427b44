#!/usr/bin/env bash
# Elastic DiLoCo across two emulated hosts: network namespaces A and B (a veth pair),
# one `launch --elastic --nnodes 2` each, two ranks per host, --strategy diloco with the
# host as the inner group (H = 10). B's link is cut mid-round (after step 25): A's ranks
# time out on B's, form the next generation without them, go back to the last round's
# end (step 20) and finish at world size 2. No sample of a completed round is lost or
# trained twice (check_rounds.py over the sample logs).
# Exit 77 (SKIP) when namespaces cannot be made (not root, no CAP_NET_ADMIN, no `ip`).
#   diloco_elastic.sh <bin dir>
set -u
bin=$1
here=$(dirname "$0")
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
source "$here/../../support/two_hosts.sh"
port=29631
work=$(mktemp -d)
pa="" pb=""
cleanup() { kill $pa $pb 2>/dev/null; wait 2>/dev/null; delete_two_hosts; rm -rf "$work"; }
trap cleanup EXIT
two_hosts dpd 10.233

token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
steps=60 h=10
args=(--backend tcp --model mlp --optimizer adamw --lr 1e-3 --lr-schedule constant --no-shuffle --batch-size 32
      --log-every 1 --max-eval-samples 64 --strategy diloco --inner-steps $h)
host() {  # host NS NODE IFNAME: one launcher with its two local ranks
  ip netns exec "$1" env COMM_JOB_TOKEN="$token" COMM_TCP_IFNAME="$3" COMM_TIMEOUT_S=5 COMM_ELASTIC_SETTLE_S=3 \
    COMM_RENDEZVOUS_TIMEOUT_S=10 OPENBLAS_NUM_THREADS=1 \
    "$bin/launch" --elastic -n 1:2 --nnodes 2 --node-rank "$2" --rdzv-host "$net.1" --master-port $port \
    "$bin/train" --elastic "${args[@]}" --steps $steps --metrics-out "$work/m$2.jsonl" --debug-sample-log "$work/samples"
}
host "$a" 0 "$va" > "$work/a.log" 2>&1 & pa=$!
host "$b" 1 "$vb" > "$work/b.log" 2>&1 & pb=$!
for _ in $(seq 1 600); do grep -q '"step":25,' "$work/m0.jsonl" 2>/dev/null && break; sleep 0.1; done
grep -q '"step":25,' "$work/m0.jsonl" 2>/dev/null || { tail -n 20 "$work/a.log" "$work/b.log"; fail "the job never reached step 25"; }
grep -q "DiLoCo(H=$h, 2 groups of 2" "$work/a.log" || fail "the job did not start as 2 inner groups of 2 (one per host)"
ip -n "$b" link set "$vb" down
echo "cut host B's link after step 25"
timeout 120 tail --pid=$pa -f /dev/null; wait $pa; rca=$?
timeout 60 tail --pid=$pb -f /dev/null; kill -KILL $pb 2>/dev/null; wait $pb
pa="" pb=""
((rca == 0)) || { tail -n 30 "$work/a.log"; fail "host A's job failed (exit $rca)"; }
final=$(grep "final:" "$work/a.log") || fail "host A: no final line"
for want in "steps=$steps " "world_size=2 " "recoveries=1 "; do
  grep -q -- "$want" <<< "$final" || { echo "$final"; fail "host A: the final line lacks '$want'"; }
done
event=$(grep '"event":"membership"' "$work/m0.jsonl") || fail "no membership event"
r=$(sed -nE 's/.*"resumed_after_step":([0-9]+).*/\1/p' <<< "$event")
lost=$(sed -nE 's/.*"lost_steps":([0-9]+).*/\1/p' <<< "$event")
((r % h == 0 && r >= 20 && lost < h)) || fail "resumed after step $r with $lost steps lost: wanted a round's end >= 20, < $h lost"
/usr/bin/python3 "$here/check_rounds.py" "$work/m0.jsonl" "$work/samples" $steps $h || fail "samples"

echo "two hosts: B cut off after step 25; A's two ranks went back to the round's end $r ($lost inner steps dropped)," \
     "finished $steps steps as one worker; every sample of a completed round trained once"
