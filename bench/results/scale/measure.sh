#!/usr/bin/env bash
# The one-host measurements of bench/alpha_beta_model.py (docs/scale.md): comm_bench allreduce,
# tcp backend over shared memory (shm) and loopback TCP (noshm), 2, 4 and 8 ranks, ring, tree
# and recursive doubling forced, 4 KiB to 16 MiB; REPS repetitions (about 26 s each on 2 cores).
#   bash bench/results/scale/measure.sh          (from the repository root, after a build)
set -u
export COMM_JOB_TOKEN=scale-model-bench-$$-secret
out=bench/results/scale/raw
mkdir -p $out
for rep in ${REPS:-1 2 3 4}; do
for tr in shm noshm; do
  shm=1; [[ $tr == noshm ]] && shm=0
  for np in 2 4 8; do
    for algo in ring tree recursive_doubling; do
      f=$out/$tr.np$np.$algo.r$rep.txt
      COMM_TCP_SHM=$shm nice -n 19 timeout 60 build/bin/launch -n $np build/bin/comm_bench --backend tcp --algo $algo \
        -b 4K -e 16M -f 4 -n 5 -w 2 -c 0 2>&1 | sed 's/^\[rank 0\] //' > $f || echo "FAIL $f"
    done
  done
done
done
