#!/usr/bin/env bash
# The flight recorder (comm/dispatch/flight_recorder.h) and its reader (tools/flight_report.py):
#   hang     4-rank MLP job, rank 2 SIGSTOPped inside step 5's backward: the others fail
#            at the timeout and write their records (launch asks the live ones for theirs
#            too); the report names rank 2 as the one that wrote none and never entered
#            the collective the others stopped in, that collective (an allreduce of step 5's
#            gradient bucket) and the ranks in it
#   desync   2 ranks calling an allreduce and a broadcast at the same point: the report
#            says DESYNC at that collective and shows both calls (and the send/recv pair
#            before it is in the records, completed)
#   usr2     SIGUSR2 to rank 1 inside step 3: its record is written and training goes on
#            to the end (exit 0), the record showing completed collectives of step 3
# Usage: flight_recorder.sh BIN_DIR SOURCE_DIR
set -u
bin=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
report() { /usr/bin/python3 "$src/tools/flight_report.py" "$@"; }
args=(--backend tcp --model mlp --batch-size 16 --log-every 1 --max-eval-samples 32)

# hang
start=$(date +%s)
COMM_TIMEOUT_S=5 DPT_FLIGHT_DIR=$work/hang "$bin/launch" -n 4 "$bin/train" "${args[@]}" --steps 40 \
  --debug-signal 2:5:backward:STOP > "$work/hang.log" 2>&1 && fail "hang: the job with a stopped rank succeeded"
took=$(($(date +%s) - start))
report "$work/hang" > "$work/hang.txt" || { cat "$work/hang.log"; fail "hang: no report"; }
cat "$work/hang.txt"
grep -q "none from rank 2 " "$work/hang.txt" || fail "hang: rank 2 not named as the rank without a record"
grep -qE "stopped in collective [0-9]+: allreduce f32 x [0-9]+ \(avg\) \[step 5 (backward|sync), bucket 0" "$work/hang.txt" ||
  fail "hang: the collective of step 5's bucket 0 is not named"
grep -qE "never entered it: rank 2$" "$work/hang.txt" || fail "hang: rank 2 not named as never entering it"
grep -qE "in it(, waiting| when it failed): ranks? [013]" "$work/hang.txt" || fail "hang: no rank named as in it"
echo "ok   hang: rank 2 and the collective named ($took s to the end of the job)"

# desync
COMM_TIMEOUT_S=4 DPT_FLIGHT_DIR=$work/desync "$bin/launch" -n 2 "$bin/flight_desync" --backend tcp \
  > "$work/desync.log" 2>&1 && { cat "$work/desync.log"; fail "desync: the program did not fail"; }
report "$work/desync" > "$work/desync.txt" || { cat "$work/desync.log"; fail "desync: no report"; }
cat "$work/desync.txt"
grep -q "DESYNC at collective 1: the ranks called different collectives" "$work/desync.txt" || fail "desync: not named"
grep -q "rank 0: allreduce f32 x 100 (sum)" "$work/desync.txt" || fail "desync: rank 0's call not shown"
grep -q "rank 1: broadcast f32 x 30 root 0" "$work/desync.txt" || fail "desync: rank 1's call not shown"
/usr/bin/python3 - "$work/desync/rank0.json" "$work/desync/rank1.json" <<'PY' || fail "desync: the point-to-point pair is not recorded"
import json, sys
for path, kind, peer in ((sys.argv[1], "send", 1), (sys.argv[2], "recv", 0)):
    world = [c for c in json.load(open(path))["communicators"] if c["communicator"] == 0][0]
    p2p = world["p2p"]
    assert len(p2p) == 1 and p2p[0]["kind"] == kind and p2p[0]["peer"] == peer and p2p[0]["count"] == 5, p2p
    assert p2p[0]["state"] == "completed" and p2p[0]["t_finished_ns"] >= p2p[0]["t_scheduled_ns"], p2p
PY
echo "ok   desync: named at collective 1 with both calls; the send/recv pair before it recorded, completed"

# SIGUSR2: write and go on
DPT_FLIGHT_DIR=$work/usr2 "$bin/launch" -n 2 "$bin/train" "${args[@]}" --steps 8 --debug-signal 1:3:forward:USR2 \
  > "$work/usr2.log" 2>&1 || { tail -n 20 "$work/usr2.log"; fail "usr2: the job failed"; }
grep -q "final:.*steps=8 " "$work/usr2.log" || fail "usr2: the job did not run to the end"
[[ -f $work/usr2/rank1.json ]] || fail "usr2: rank 1 wrote no record"
[[ ! -f $work/usr2/rank0.json ]] || fail "usr2: rank 0 wrote a record without a reason"
/usr/bin/python3 - "$work/usr2/rank1.json" <<'PY' || fail "usr2: the record lacks what it should hold"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["reason"] == "SIGUSR2", doc["reason"]
world = [c for c in doc["communicators"] if c["communicator"] == 0][0]
done = [e for e in world["collectives"] if e["state"] == "completed"]
assert any(e["step"] == 2 and e["kind"] == "allreduce" for e in done), "no completed allreduce of step 2"
assert all(e["t_finished_ns"] >= e["t_started_ns"] >= e["t_scheduled_ns"] > 0 for e in done), "times out of order"
PY
echo "ok   usr2: rank 1's record written on SIGUSR2, the job went on to step 8"
