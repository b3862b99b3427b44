#!/usr/bin/env bash
# slurm_4x2.sh: dpt under a real Slurm on 4 emulated nodes x 2 tasks, each node's link
# shaped to RATE (default 1gbit), nothing of MASTER_* set anywhere. Writes
# bench/results/slurm/results.md (and prints it):
#   1. sbatch + `srun train --backend tcp`, `srun --mpi=pmix train --backend mpi` and
#      `mpirun train --backend mpi` inside the allocation: the layout each reports, the
#      final line, the wall time
#   2. what `--algo auto` picks per allreduce size on the real nodes, and each size's time
#      under auto, ring and hierarchical (comm_bench, blocking, 3 runs' median)
#   3. a time limit: docs/slurm.md's preemptible job with --time=3 and --signal=B:USR1@100
#      submitted on the 4 nodes x 2, stopped by the warning, requeued, finished; compared
#      bit for bit with the same job uninterrupted; the time from signal to stop
# Needs root, namespaces and Debian's slurmd/slurmctld/slurm-client/munge. A few minutes.
#   bench/slurm_4x2.sh [BUILD] [RATE]
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$repo/build}" && pwd)
rate=${2:-1gbit}
out=$repo/bench/results/slurm
mkdir -p "$out"
source "$repo/bench/slurm_cluster.sh"
work=$(mktemp -d /var/tmp/dpt-slurm-bench.XXXXXX)
trap 'slurm_down; rm -rf "$work"' EXIT
ln -s "$build" "$work/build"
ln -s "$repo/tests" "$work/tests"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
slurm_up 4 2 "$rate"
rc=$?
trap 'slurm_down; rm -rf "$work"' EXIT   # slurm_up set its own
((rc == 0)) || exit $rc
submit() { (cd "$work" && slurm_exec sbatch --parsable "$@") | tail -1; }
res=$work/results.md
{
  echo "# dpt under Slurm: 4 emulated nodes x 2 tasks, links at $rate"
  echo
  echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $(slurmd -V),"
  echo "every node a network namespace with its own slurmd (bench/slurm_cluster.sh). Command: bench/slurm_4x2.sh."
  echo
  echo "## 1. Launchers, nothing set"
  echo
  echo "| launcher | layout rank 0 reports | result | wall s |"
  echo "|---|---|---|---|"
} > "$res"
job='--model mlp --steps 300 --log-every 100'
cat > "$work/launchers.sh" <<EOF
#!/bin/bash
#SBATCH --nodes=4 --ntasks-per-node=2 --output=launchers-%j.out
t() { date +%s.%N; }
a=\$(t); srun build/bin/train --backend tcp $job > tcp.log 2>&1; echo "tcp rc \$? \$a \$(t)"
a=\$(t); srun --mpi=pmix build/bin/train --backend mpi $job > pmix.log 2>&1; echo "pmix rc \$? \$a \$(t)"
a=\$(t); mpirun build/bin/train --backend mpi $job > mpirun.log 2>&1; echo "mpirun rc \$? \$a \$(t)"
EOF
id=$(submit launchers.sh)
slurm_wait_job "$id" 600 || exit 1
for l in tcp pmix mpirun; do
  line=$(grep "^$l rc" "$work/launchers-$id.out")
  read -r _ _ rc a b <<< "$line"
  layout=$(grep -m1 "world size" "$work/$l.log" | sed 's/.*| *\([0-9].*[a-z)]\) *|.*/\1/')
  final=$(grep -m1 -oE "test_acc=[0-9.]+ .*samples_per_s=[0-9.]+" "$work/$l.log" | awk '{print $1, $3}')
  name="srun --backend tcp"; [[ $l == pmix ]] && name="srun --mpi=pmix --backend mpi"; [[ $l == mpirun ]] && name="mpirun --backend mpi"
  echo "| \`$name\` | $layout | rc $rc, $final | $(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.1f", b - a}') |" >> "$res"
done
{
  echo
  echo "## 2. Allreduce on the nodes: what auto picks, and each algorithm's time"
  echo
  echo "| bytes | auto picks | auto us | ring us | hierarchical us |"
  echo "|---|---|---|---|---|"
} >> "$res"
cat > "$work/algos.sh" <<'EOF'
#!/bin/bash
#SBATCH --nodes=4 --ntasks-per-node=2 --output=algos-%j.out
for a in auto ring hierarchical; do
  for r in 1 2 3; do
    srun build/bin/comm_bench --backend tcp --algo $a -b 16K -e 16M -f 4 -n 10 -w 2 -z 1 > bench.$a.$r 2>&1
  done
done
EOF
id=$(submit algos.sh)
slurm_wait_job "$id" 900 || exit 1
for size in $(awk '$1 ~ /^[0-9]+$/ && NF >= 9 {print $1}' "$work/bench.auto.1"); do
  picks=$(awk -v s="$size" '$1 == s {print $5}' "$work/bench.auto.1")
  med() { for r in 1 2 3; do awk -v s="$size" '$1 == s {print $6}' "$work/bench.$1.$r"; done | sort -g | sed -n 2p; }
  echo "| $size | $picks | $(med auto) | $(med ring) | $(med hierarchical) |" >> "$res"
done
{
  echo
  echo "## 3. A time limit: --time=3 --signal=B:USR1@100, requeued"
  echo
} >> "$res"
awk '/^```sbatch$/ {n++; on = (n == 4); next} /^```/ {on = 0} on' "$repo/docs/slurm.md" > "$work/preemptible.sh"
# A 3-minute limit, warned 100 s before (Slurm checks limits about once a minute, so the
# warning comes 100-160 s early); 1200 steps take two or three such runs here.
sed -i 's/--nodes=1/--nodes=4/; s/--ntasks-per-node=2/--ntasks-per-node=2\n#SBATCH --time=3/; s/--steps 200/--steps 1200/; s/--save-every 50/--save-every 500/' "$work/preemptible.sh"
sed 's/ckpt-preemptible/ckpt-reference/; s/dpt-preemptible/dpt-reference/g; /#SBATCH --time=3/d; /#SBATCH --signal/d' "$work/preemptible.sh" > "$work/reference.sh"
ref=$(submit reference.sh)
slurm_wait_job "$ref" 900 || exit 1
id=$(submit preemptible.sh)
slurm_wait_job "$id" 900 || exit 1
log=$work/dpt-preemptible-$id.out
stops=$(sed -n 's/.*stopped by a signal after step \([0-9]*\).*/\1/p' "$log" | tr '\n' ' ')
resumes=$(sed -n 's/.*auto-resume: continuing from step \([0-9]*\).*/\1/p' "$log" | tr '\n' ' ')
same="differs"
cmp -s "$work/ckpt-reference/model.safetensors" "$work/ckpt-preemptible/model.safetensors" && same="bitwise equal"
{
  echo "The preemptible job of docs/slurm.md on 4 nodes x 2 ranks, 1200 steps, checkpoints every 500,"
  echo "with \`#SBATCH --time=3\` (its USR1 comes with Slurm's up-to-60 s resolution):"
  echo
  echo '```text'
  grep -E "restart|stopped by a signal|auto-resume|srun exited" "$log" | sed 's/^\[rank 0\] //'
  echo '```'
  echo
  echo "Stopped after steps: ${stops:-none}; resumed at steps: ${resumes:-none} (each resume at the step the stop saved: 0 steps lost); final model $same to the uninterrupted job's."
} >> "$res"
cp "$res" "$out/results.md"
cp "$work"/launchers-*.out "$work"/tcp.log "$out/" 2>/dev/null
cat "$res"
