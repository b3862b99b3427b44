#!/bin/bash
# --straggler-action evict (train/dist_trainer_elastic.cpp, evict_straggler): an elastic
# job of 2 ranks, each bound to its own core, training the CNN, with rank 1 slowed. Rank 1
# is named a straggler, leaves with exit 79, is not restarted although --max-restarts
# allows it, and rank 0 re-forms alone and runs every requested step; the final line and
# the metrics name the eviction. Without --elastic the action is refused naming the flag.
#
# Rank 1 is slowed as slow_rank1.sh says (a CPU limit of 20% of a core, else a busy loop).
#   straggler_evict.sh BIN_DIR
set -euo pipefail
bin=$1
here=$(cd "$(dirname "$0")" && pwd)
(( $(nproc) >= 2 )) || { echo "SKIP: needs 2 CPUs (one per rank), this process has $(nproc)"; exit 77; }
tmp=$(mktemp -d)
source "$here/slow_rank1.sh"
trap 'slow_rank1_release; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

if "$bin/train" --model cnn --steps 1 --straggler-action evict > "$tmp/refused.log" 2>&1; then fail "evict without --elastic ran"; fi
grep -q -- "--straggler-action evict needs --elastic" "$tmp/refused.log" || { cat "$tmp/refused.log"; fail "the refusal does not name the flag"; }

slow_rank1_prepare "$bin"
echo "rank 1 slowed by: $slow_how"
rc=0
slow_rank1_run "$tmp/run.log" "$bin/launch" --elastic -n 1:2 --max-restarts 1 --bind cores "$bin/train" --elastic \
  --model cnn --steps 80 --log-every 20 --straggler-action evict --metrics-out "$tmp/metrics.jsonl" || rc=$?
grep -E 'straggler|evict|restart|final:' "$tmp/run.log" | sed 's/ samples_per_s=.* recoveries=/ ... recoveries=/' || true
[[ $rc == 0 ]] || { tail -n 30 "$tmp/run.log"; fail "the job exited $rc"; }
line=$(grep -m1 'straggler: evicting rank' "$tmp/run.log" || true)
[[ $line =~ evicting\ rank\ 1\ \(n0\.l1\.i0\),\ which\ computed\ ([0-9.]+)x ]] || { tail -n 30 "$tmp/run.log"; fail "rank 1 not evicted"; }
grep -q 'exited with code 79' "$tmp/run.log" || fail "the evicted rank did not exit 79"
grep -q 'not restarting slot 1: n0.l1.i0 was evicted as a straggler' "$tmp/run.log" || fail "launch did not say it keeps the slot empty"
if grep -q 'restarting slot 1 as' "$tmp/run.log"; then fail "launch restarted the evicted rank"; fi
grep -Eq 'final: .* steps=80 world_size=1 .* evictions=1 evicted=n0\.l1\.i0( |$)' "$tmp/run.log" ||
  fail "the final line does not show 60 steps on 1 rank with the eviction"
/usr/bin/python3 - "$tmp/metrics.jsonl" <<'PY' || fail "the metrics do not name the eviction"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
final = [r for r in recs if r.get("final")][-1]
assert final["evictions"] == 1 and final["evicted"] == ["n0.l1.i0"], final
assert any("evicting rank 1" in json.dumps(r) for r in recs if not r.get("final")), "no eviction event"
PY
echo "rank 1 evicted at ${BASH_REMATCH[1]}x, not restarted; rank 0 alone ran to step 80"
