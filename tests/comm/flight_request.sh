#!/usr/bin/env bash
# Flight records asked for through the job's store (comm/dispatch/flight_request.h,
# build/bin/flight_request), with the job's secret as any store client holds it:
#   running  a 2-rank MLP job under launch, asked after its step 100: both ranks write
#            their record (reason "store request 1: ...", completed allreduces of the
#            steps so far), flight_request prints both and exits 0, and the job runs to
#            its last step and exits 0
#   stopped  rank 1 SIGSTOPped inside step 5: flight_request names rank 1 after its
#            2 s deadline (exit 1, within 4 s) and rank 0's record is written, rank 1's
#            not; after SIGCONT the job finishes normally
# Usage: flight_request.sh BIN_DIR
set -u
bin=$1
work=$(mktemp -d)
job=
trap 'if [[ -n $job ]]; then kill -CONT $(pgrep -P "$job") 2>/dev/null; kill "$job" 2>/dev/null; wait "$job"; fi; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# The job's secret, known to whoever asks (launch passes a set COMM_JOB_TOKEN to its ranks).
COMM_JOB_TOKEN=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
export COMM_JOB_TOKEN
args=(--backend tcp --model mlp --batch-size 16 --max-eval-samples 32)
check_record() {  # FILE: written on request 1, with completed allreduces
  /usr/bin/python3 - "$1" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["reason"] == "store request 1: asked by the test", doc["reason"]
world = [c for c in doc["communicators"] if c["communicator"] == 0][0]
done = [e for e in world["collectives"] if e["state"] == "completed" and e["kind"] == "allreduce"]
assert done, "no completed allreduce"
print(f"{sys.argv[1].split('/')[-1]}: step {doc['step']} ({doc['phase']}), {len(world['collectives'])} collectives")
PY
}

# running
port=$(free_port)
DPT_FLIGHT_DIR=$work/run "$bin/launch" -n 2 --master-port "$port" "$bin/train" "${args[@]}" --steps 3000 --log-every 100 \
  > "$work/run.log" 2>&1 &
job=$!
for _ in $(seq 300); do grep -q "step    100 " "$work/run.log" && break; sleep 0.1; done
grep -q "step    100 " "$work/run.log" || { cat "$work/run.log"; fail "running: the job did not reach step 100"; }
"$bin/flight_request" --master-port "$port" --deadline-s 5 --reason "asked by the test" > "$work/run.txt" 2>&1
rc=$?
cat "$work/run.txt"
[[ $rc == 0 ]] || fail "running: flight_request exited $rc"
for r in 0 1; do
  grep -q "^rank $r: .*:$work/run/rank$r.json$" "$work/run.txt" || fail "running: rank $r's record not reported"
  check_record "$work/run/rank$r.json" || fail "running: rank $r's record"
done
wait "$job"
rc=$? job=
[[ $rc == 0 ]] || { tail -n 20 "$work/run.log"; fail "running: the job exited $rc"; }
grep -q "final:.*steps=3000 " "$work/run.log" || fail "running: the job did not reach its last step"
echo "ok   running: both records written on request, the job went on to step 3000"

# stopped
port=$(free_port)
COMM_TIMEOUT_S=60 DPT_FLIGHT_DIR=$work/stop "$bin/launch" -n 2 --master-port "$port" "$bin/train" "${args[@]}" --steps 20 \
  --log-every 5 --debug-signal 1:5:forward:STOP > "$work/stop.log" 2>&1 &
job=$!
stopped=
for _ in $(seq 300); do
  for p in $(pgrep -P "$job"); do [[ $(awk '{print $3}' "/proc/$p/stat" 2>/dev/null) == T ]] && stopped=$p; done
  [[ -n $stopped ]] && break
  sleep 0.1
done
[[ -n $stopped ]] || { cat "$work/stop.log"; fail "stopped: rank 1 did not stop"; }
t0=$(date +%s.%N)
"$bin/flight_request" --master-port "$port" --deadline-s 2 --reason "asked by the test" > "$work/stop.txt" 2>&1
rc=$?
took=$(echo "$(date +%s.%N) - $t0" | bc)
cat "$work/stop.txt"
[[ $rc == 1 ]] || fail "stopped: flight_request exited $rc (1 expected: a rank did not answer)"
grep -q "^no answer within 2 s from rank(s) \[1\]" "$work/stop.txt" || fail "stopped: rank 1 not named"
awk -v t="$took" 'BEGIN { exit !(t < 4) }' || fail "stopped: flight_request took $took s (deadline 2 s)"
grep -q "^rank 0: .*:$work/stop/rank0.json$" "$work/stop.txt" || fail "stopped: rank 0's record not reported"
check_record "$work/stop/rank0.json" || fail "stopped: rank 0's record"
[[ ! -e $work/stop/rank1.json ]] || fail "stopped: the stopped rank 1 wrote a record"
kill -CONT "$stopped"
wait "$job"
rc=$? job=
[[ $rc == 0 ]] || { tail -n 20 "$work/stop.log"; fail "stopped: the job exited $rc after SIGCONT"; }
grep -q "final:.*steps=20 " "$work/stop.log" || fail "stopped: the job did not reach its last step"
echo "ok   stopped: rank 1 named after $took s, rank 0's record written; the job finished after SIGCONT"
