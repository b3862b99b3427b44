#!/bin/bash
# dpt::torch::ElasticLoop takes a restarted process back in: launch --elastic -n 2:3
# --max-restarts 1, the ToyModel for 150 steps of at least 40 ms on 3 ranks; the process
# that started as rank 1 SIGKILLs itself as step 10's backward starts, the two survivors
# re-form and go on at world size 2, the launcher restarts it, its dpt::init waits until
# the members' loop sees it waiting (rank 0 asks the store before each step) and takes it
# in at a step boundary J, where it takes their parameters and momentum. All three end with
# 150 steps at world size 3, bitwise equal parameters, within 1e-5 relative of one process
# over the same samples (3 ranks' batches for steps 0-9, 2 ranks' for 10 to J-1, 3 ranks'
# from J; a newcomer that kept its own initial weights, or a join at another step than the
# log says, misses by 1e-2 or more).
#   elastic_grow.sh BIN_DIR PYTHON
set -euo pipefail
source "$(dirname "$0")/elastic_job.sh"
"$bin/launch" --elastic -n 2:3 --max-restarts 1 "$prog" --steps 150 --kill 1:10 --pace-ms 40 --out "$tmp/params" \
  > "$tmp/log" 2>&1 || fail "the elastic job failed"
grep -E "elastic: generation|elastic: joined|summary" "$tmp/log"
join=$(sed -nE 's/.*elastic: generation 2: world size 3 \(lost \[\], joined \[n0\.l1\.i1\]\); resuming at step ([0-9]+),.*/\1/p' "$tmp/log")
[[ $join =~ ^[0-9]+$ ]] || fail "no 'generation 2: world size 3 (lost [], joined [n0.l1.i1])' line: the restarted process was not taken in"
grep -q "elastic: joined generation 2 as rank 2 of 3, at step $join " "$tmp/log" ||
  fail "the restarted process did not report joining generation 2 as rank 2 of 3 at step $join"
for who in 0 2 joined; do
  line=$(grep "start rank $who: summary" "$tmp/log") || fail "no summary from start rank $who"
  want=("steps=150 " "lost_steps=0 " "world_size=3 " "generation=2")
  [[ $who == joined ]] || want+=("recoveries=1 " "joins=1 ")
  for w in "${want[@]}"; do grep -q -- "$w" <<< "$line" || fail "start rank $who: '$line' lacks '$w'"; done
done
[[ ! -e $tmp/params.1 ]] || fail "the killed process wrote parameters"
cmp "$tmp/params.0" "$tmp/params.2" && cmp "$tmp/params.0" "$tmp/params.joined" || fail "the three ranks' parameters differ"
"$prog" --reference --steps 150 --worlds "0:3,10:2,$join:3" --out "$tmp/reference"
"$py" - "$tmp" "$join" <<'PY'
import sys, numpy as np
d, join = sys.argv[1], sys.argv[2]
ref = np.fromfile(f"{d}/reference", dtype=np.float32)
a = np.fromfile(f"{d}/params.joined", dtype=np.float32)
rel = float(np.abs(a - ref).max() / np.abs(ref).max())
print(f"joined at step {join}: all three equal; max relative difference from one process over the same samples "
      f"{rel:.3g} (limit 1e-5)")
sys.exit(0 if a.size == ref.size and rel < 1e-5 else 1)
PY
