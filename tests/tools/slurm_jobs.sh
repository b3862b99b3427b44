#!/usr/bin/env bash
# dpt under a real Slurm: a controller and slurmd's on emulated hosts (bench/slurm_cluster.sh),
# jobs submitted with sbatch and srun from node0, nothing of MASTER_* set anywhere.
#   slurm_jobs.sh REPO BUILD srun      2 nodes x 2 CPUs: `srun -n 4 train --backend tcp` with
#                                      nothing set (4 ranks, 2 hosts seen); two 2-task jobs
#                                      at once on one node (their derived ports differ); the
#                                      tcp, mpi and PyTorch scripts of docs/slurm.md as written
#   slurm_jobs.sh REPO BUILD preempt|preempt-term|preempt-usr1
#                                      1 node x 2 CPUs: docs/slurm.md's preemptible script
#                                      stopped mid-run by `scancel --signal=TERM` (the ranks)
#                                      and (preempt: then, on the same cluster, against the
#                                      same reference run) by `scancel --batch --signal=USR1`
#                                      (the batch shell, as --signal=B:USR1@N does): it
#                                      requeues itself, resumes, and ends with the
#                                      uninterrupted run's final model, bit for bit, no step
#                                      lost
# Exit 77 (skipped, with the reason) where namespaces or the Slurm packages are missing.
set -u
repo=$1 build=$2 mode=$3
source "$repo/bench/slurm_cluster.sh"
fail() { echo "FAIL: $*"; [[ -n ${SLURM_DIR:-} ]] && tail -5 "$SLURM_DIR"/slurmctld.log; exit 1; }
work=$(mktemp -d /var/tmp/dpt-slurm-test.XXXXXX)   # every node sees it (not /tmp: each node has its own)
cleanup() { slurm_down; rm -rf "$work"; }
trap cleanup EXIT
# The jobs run from a folder where build/ is this build and tests/ and .venv/ (PyTorch,
# for the dpt_torch script) the repository's: the docs' relative paths hold.
ln -s "$build" "$work/build"
ln -s "$repo/tests" "$work/tests"
[[ -d $repo/.venv ]] && ln -s "$repo/.venv" "$work/.venv"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# docs/slurm.md's script number N (the fences tagged sbatch, in order).
doc_script() {
  awk -v want="$1" '/^```sbatch$/ {n++; on = (n == want); next} /^```/ {on = 0} on' "$repo/docs/slurm.md"
}
submit() {  # submit SCRIPT: the job id
  (cd "$work" && slurm_exec sbatch --parsable "$1") | tail -1
}

case $mode in
srun)
  slurm_up 2 2 1gbit
  rc=$?
  trap cleanup EXIT   # slurm_up set its own
  ((rc == 0)) || exit $rc
  # 1. srun with nothing set: 4 ranks over 2 nodes find each other (port from the job id).
  (cd "$work" && slurm_exec srun -N 2 -n 4 build/bin/train --backend tcp --model mlp --steps 20 --log-every 10) \
    > "$work/srun.log" 2>&1 || { cat "$work/srun.log"; fail "srun -N 2 -n 4 train --backend tcp failed"; }
  grep -q "final: " "$work/srun.log" || { cat "$work/srun.log"; fail "no final line from srun's job"; }
  grep -qE "world size +\| 4 \(2 hosts x 2 ranks\)" "$work/srun.log" ||
    { grep -iE "world|host" "$work/srun.log" | head -5; fail "rank 0 did not report 4 ranks as 2 hosts x 2 ranks"; }
  echo "ok   srun -N 2 -n 4 train --backend tcp, nothing set: $(grep -m1 -oE 'test_acc=[0-9.]+' "$work/srun.log"), 2 hosts x 2 ranks"
  # Every rank sees the allocation: srun's block distribution puts ranks 2h, 2h+1 on node h.
  (cd "$work" && slurm_exec srun -N 2 -n 4 build/bin/demo --backend tcp) > "$work/demo.log" 2>&1 ||
    { cat "$work/demo.log"; fail "srun demo failed"; }
  for r in 0 1 2 3; do
    grep -q "^rank $r/4 .*correct.*; host $((r / 2)) of 2 hosts x 2 ranks$" "$work/demo.log" ||
      { cat "$work/demo.log"; fail "rank $r does not report host $((r / 2)) of 2 hosts x 2 ranks"; }
  done
  echo "ok   each rank reports its node as its host (host = SLURM_NODEID, 2 hosts x 2 ranks)"
  # What --algo auto picks per size on the real nodes is what it picks on the same layout
  # emulated on one host (COMM_FAKE_HOSTS=2): the selector sees the allocation's topology.
  bench=(build/bin/comm_bench --backend tcp -b 4K -e 16M -f 4 -n 3 -w 1)
  (cd "$work" && slurm_exec srun -N 2 -n 4 "${bench[@]}") > "$work/bench.slurm" 2>&1 || { cat "$work/bench.slurm"; fail "srun comm_bench failed"; }
  # One host: its ranks would meet in the shared-memory arena ("native"); as messages here.
  (cd "$work" && COMM_TCP_SHM_COLL=0 COMM_FAKE_HOSTS=2 "$build/bin/launch" -n 4 --no-prefix "${bench[@]}") > "$work/bench.fake" 2>&1 ||
    { cat "$work/bench.fake"; fail "comm_bench under launch failed"; }
  algos() { awk '$1 ~ /^[0-9]+$/ && NF >= 9 {print $1, $5}' "$1"; }
  [[ -n $(algos "$work/bench.slurm") ]] || { cat "$work/bench.slurm"; fail "no rows in comm_bench's output"; }
  diff <(algos "$work/bench.slurm") <(algos "$work/bench.fake") > "$work/algo.diff" ||
    { cat "$work/algo.diff"; fail "auto picks differently on the Slurm nodes than on 2 emulated hosts"; }
  echo "ok   --algo auto per size on 2 Slurm nodes = on COMM_FAKE_HOSTS=2: $(algos "$work/bench.slurm" | awk '{printf "%s:%s ", $1, $2}')"
  # 2. Two jobs at once on node0 (2 tasks each on its 2 CPUs: one job per node, so pin both
  # to node0 with oversubscription allowed for the test).
  for j in a b; do
    # Each holds its rendezvous port for its whole run; the other starts meanwhile.
    printf '#!/bin/bash\n#SBATCH --nodes=1 --ntasks=2 --nodelist=node0 --oversubscribe --output=%s.out\necho "start $(date +%%s.%%N)"\nsrun build/bin/train --backend tcp --model mlp --steps 1500 --log-every 500\necho "end $(date +%%s.%%N)"\n' \
      "concurrent-$j" > "$work/concurrent-$j.sh"
  done
  ja=$(submit concurrent-a.sh) jb=$(submit concurrent-b.sh)
  slurm_wait_job "$ja" 180 && slurm_wait_job "$jb" 180 || fail "the concurrent jobs did not finish"
  for j in a b; do grep -q "final: " "$work/concurrent-$j.out" || { cat "$work/concurrent-$j.out"; fail "concurrent job $j failed"; }; done
  t() { sed -n "s/^$2 //p" "$work/concurrent-$1.out"; }
  awk -v sa="$(t a start)" -v ea="$(t a end)" -v sb="$(t b start)" -v eb="$(t b end)" 'BEGIN {exit !(sa < eb && sb < ea)}' ||
    fail "the two jobs did not run at the same time (a $(t a start)-$(t a end), b $(t b start)-$(t b end))"
  echo "ok   two jobs on node0 at the same time (ids $ja, $jb: ports $((10000 + (ja % 2500) * 8)) and $((10000 + (jb % 2500) * 8)))"
  # 3. docs/slurm.md's tcp, mpi and PyTorch scripts, as written.
  for n in 1 2 3; do
    doc_script $n > "$work/doc$n.sh"
    id=$(submit doc$n.sh)
    slurm_wait_job "$id" 240 || fail "docs/slurm.md's script $n did not finish"
    out=$(ls "$work"/dpt-*-"$id".out 2>/dev/null | head -1)
    [[ -n $out ]] || fail "docs/slurm.md's script $n wrote no output file"
    finals=$(grep -c "final: \|^rank [0-3] step 9 loss" "$out")
    want=1
    ((n == 2)) && want=2
    ((n == 3)) && want=4   # every rank's last step
    ((finals == want)) || { cat "$out"; fail "docs/slurm.md's script $n: $finals final lines, want $want"; }
    echo "ok   docs/slurm.md script $n ($(head -3 "$work/doc$n.sh" | sed -n 's/#SBATCH --job-name=//p')): $finals run(s) finished"
  done
  ;;
preempt|preempt-term|preempt-usr1)
  SLURM_KILL_WAIT=30 slurm_up 1 2
  rc=$?
  trap cleanup EXIT   # slurm_up set its own
  ((rc == 0)) || exit $rc
  doc_script 4 > "$work/preemptible.sh"
  grep -q -- "--auto-resume" "$work/preemptible.sh" || fail "docs/slurm.md's fourth sbatch script is not the preemptible one"
  # The same job, uninterrupted, in a checkpoint folder of its own.
  sed 's/ckpt-preemptible/ckpt-reference/; s/dpt-preemptible/dpt-reference/g' "$work/preemptible.sh" > "$work/reference.sh"
  id=$(submit reference.sh)
  slurm_wait_job "$id" 240 || fail "the uninterrupted job did not finish"
  grep -q "restart 0: srun exited 0" "$work/dpt-reference-$id.out" || { cat "$work/dpt-reference-$id.out"; fail "the uninterrupted job failed"; }
  [[ -f $work/ckpt-reference/model.safetensors ]] || fail "the uninterrupted job wrote no final model"
  hows=${mode#preempt-}
  [[ $mode == preempt ]] && hows="term usr1"
  for how in $hows; do
    rm -rf "$work/ckpt-preemptible"
    id=$(submit preemptible.sh)
    out=$work/dpt-preemptible-$id.out
    # Wait for step 100's checkpoint, then signal.
    for _ in $(seq 1 600); do [[ -f $work/ckpt-preemptible/latest ]] && break; sleep 0.1; done
    [[ -f $work/ckpt-preemptible/latest ]] || { cat "$out"; fail "$how: no checkpoint within 60 s"; }
    sent=$(date +%s.%N)
    if [[ $how == term ]]; then slurm_exec scancel --signal=TERM "$id"
    else slurm_exec scancel --batch --signal=USR1 "$id"; fi
    # The stop, the requeue, the second run to the end.
    for _ in $(seq 1 600); do grep -q "stopped by a signal after step" "$out" 2>/dev/null && break; sleep 0.1; done
    stopped=$(date +%s.%N)
    grep -q "stopped by a signal after step" "$out" || { cat "$out"; fail "$how: the job did not stop on the signal"; }
    slurm_wait_job "$id" 240 || { cat "$out"; fail "$how: the requeued job did not finish"; }
    at=$(sed -n 's/.*stopped by a signal after step \([0-9]*\).*/\1/p' "$out" | head -1)
    grep -q "restart 0: srun exited 75" "$out" || { cat "$out"; fail "$how: the first run did not exit 75"; }
    grep -q "auto-resume: continuing from step $at of" "$out" || { cat "$out"; fail "$how: the requeued run did not continue from step $at"; }
    grep -q "restart 1: srun exited 0" "$out" || { cat "$out"; fail "$how: the requeued run did not finish"; }
    cmp -s "$work/ckpt-reference/model.safetensors" "$work/ckpt-preemptible/model.safetensors" ||
      fail "$how: the final model differs from the uninterrupted run's"
    echo "ok   $how: stopped after step $at ($(awk -v a="$sent" -v b="$stopped" 'BEGIN {printf "%.1f", b - a}') s from the signal to the stop line), requeued, resumed at step $at (0 steps lost), final model bitwise the uninterrupted run's"
  done
  ;;
*) echo "slurm_jobs.sh: unknown mode '$mode' (srun, preempt, preempt-term, preempt-usr1)"; exit 2 ;;
esac
