#!/usr/bin/env bash
# Elastic DDP across 4 emulated hosts x 2 ranks (bench/cluster.sh), gradients reduced
# with --algo hierarchical. Rank 5 (elastic ranks follow the members' ids: host 2's
# second process) SIGKILLs itself in step 20 (train --debug-signal): the 7 survivors
# re-form (hosts of 2, 2, 1 and 2 ranks: the hierarchical allreduce's host-ordered ring)
# and finish with no step lost.
# Exit 77 (SKIP) where namespaces cannot be made.
#   elastic_hosts.sh <bin dir>
set -u
bin=$1
fail() { echo "FAIL: $*"; exit 1; }
source "$(dirname "$0")/../../../bench/cluster.sh"
cluster_up 4 "" || { rc=$?; ((rc == 77)) && echo "SKIP: emulated hosts unavailable"; exit $rc; }
work=$(mktemp -d /tmp/elastic_hosts.XXXXXX)
port=$((23000 + $$ % 20000))
export COMM_JOB_TOKEN=elastic-hosts-$$-secret COMM_TIMEOUT_S=20 COMM_RENDEZVOUS_TIMEOUT_S=30 COMM_ELASTIC_SETTLE_S=3
export OPENBLAS_NUM_THREADS=1
steps=60
pids=()
for i in 0 1 2 3; do
  cluster_exec $i "$bin/launch" --elastic -n 1:2 --nnodes 4 --node-rank $i --rdzv-host "$(cluster_addr 0)" \
    --master-port $port "$bin/train" --elastic --backend tcp --algo hierarchical --model mlp \
    --optimizer adam --lr 1e-3 --lr-schedule constant --no-shuffle --batch-size 32 --log-every 1 \
    --max-eval-samples 64 --steps $steps --metrics-out "$work/m$i.jsonl" --debug-signal 5:20:sync \
    > "$work/h$i.log" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
((rc == 0)) || { tail -n 15 "$work"/h*.log; fail "a host's launcher failed"; }
grep -q "killed by signal 9" "$work/h2.log" || { tail -n 15 "$work/h2.log"; fail "host 2's second rank was not killed"; }
final=$(grep -h "final:" "$work"/h*.log | head -1) || fail "no final line"
for want in "steps=$steps " "world_size=7 " "recoveries=1 " "lost_steps=0"; do
  grep -q -- "$want" <<< "$final" || { echo "$final"; fail "the final line lacks '$want'"; }
done
grep -q '"world_size":8' "$work/m0.jsonl" || fail "the job did not start with 8 ranks on 4 hosts"
echo "$final"
rm -rf "$work"
echo "PASS: 4 hosts x 2 ranks, hierarchical allreduce; rank 5 killed in step 20; 7 ranks finished $steps steps"
