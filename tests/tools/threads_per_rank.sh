#!/usr/bin/env bash
# Threads per rank (issue 44), through the programs as users start them:
#   1. launch -n 2: every rank runs (host cores / 2) threads, at least 1, and the header says
#      so and why; the BLAS really runs that many (the GEMM row reads the library back);
#      launch says once what it set. A plan that ignores the ranks sharing the host gives
#      each rank every core: on 2 or more cores this fails.
#   2. The same under mpirun (no launch: the ranks plan from OMPI_COMM_WORLD_LOCAL_SIZE).
#   3. An explicit OMP_NUM_THREADS, OPENBLAS_NUM_THREADS or --threads wins, in that order
#      (--threads over both); launch leaves the user's value alone; where the ranks then
#      share cores, the threads wait passively: set by launch, and by the program's own
#      re-exec under mpirun.
#   4. A malformed value is refused before any work, naming the variable.
#   5. launch's own affinity mask is its ranks' pool: under `taskset -c C` (one CPU) a
#      process runs 1 thread, launch plans 1 core for its 2 ranks; `launch --bind cores`
#      gives each rank its own block of launch's CPUs (disjoint, as many each as fit, all
#      ranks on C under taskset -c C), and its threads fit the block.
# The expected counts are this script's, never the programs' header: host_cores.py reads
# the mask (os.sched_getaffinity) and the cgroup quota the commands run under.
#   threads_per_rank.sh <bin dir> [mpiexec]
set -uo pipefail
bin=$1
mpiexec=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fails=0
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
run() {  # run NAME PROG ARGS...: output in NAME.log, exit status checked
  local name=$1; shift
  timeout 60 "$@" > "$name.log" 2>&1
  local rc=$?
  [[ $rc == 0 ]] || { fail "$name: exit $rc: $*"; tail -20 "$name.log"; }
}
threads_row() { grep -E '^(\[rank 0\] )?\| threads ' "$1" | head -1; }
gemm_threads() {  # the BLAS's own thread count, from the GEMM row
  grep -E '^(\[rank 0\] )?\| GEMM ' "$1" | head -1 | sed -En 's/.*, ([0-9]+) threads? \[.*/\1/p'
}
plan_threads() { threads_row "$1" | sed -En 's/^(\[rank 0\] )?\| threads +\| ([0-9]+) threads? per rank.*/\2/p'; }
expect_threads() {  # NAME LOG N
  local got gemm
  got=$(plan_threads "$2") gemm=$(gemm_threads "$2")
  if [[ $got == "$3" && $gemm == "$3" ]]; then ok "$1: $3 per rank: $(threads_row "$2" | cut -c1-200)"
  else fail "$1: want $3 threads per rank, header says '$got', the BLAS runs '$gemm': $(threads_row "$2")"; fi
}
has() {  # NAME FILE REGEX
  if grep -Eq -- "$3" "$2"; then ok "$1"; else fail "$1: no /$3/ in $2:"; head -20 "$2"; fi
}
train=("$bin/train" --model mlp --steps 2 --log-every 1 --max-eval-samples 64)
host_cores() { "$@" /usr/bin/python3 "$here/host_cores.py"; }  # [taskset -c C]: the cores a process there may use

# The host's cores: what a single process may use here.
host=$(host_cores)
[[ $host =~ ^[0-9]+$ ]] || { fail "host_cores.py: '$host'"; exit 1; }
run single "${train[@]}"
expect_threads "one process owns the host's $host cores" single.log "$host"
share=$((host / 2)); ((share >= 1)) || share=1

# 1. launch -n 2.
run launch2 env -u OMP_NUM_THREADS -u OPENBLAS_NUM_THREADS -u OMP_WAIT_POLICY "$bin/launch" -n 2 "${train[@]}"
expect_threads "launch -n 2 on $host cores" launch2.log "$share"
has "launch says once what it set" launch2.log "^launch: threads: OMP_NUM_THREADS=$share for each rank \(.*/ 2 ranks on this host\)"
[[ $(grep -c '^launch: threads:' launch2.log) == 1 ]] || fail "launch printed its threads line more than once"

# 2. mpirun, no launch.
if [[ -n $mpiexec ]]; then
  run mpi2 env -u OMP_NUM_THREADS -u OPENBLAS_NUM_THREADS -u OMP_WAIT_POLICY \
    "$mpiexec" --oversubscribe --bind-to none -n 2 "${train[@]}" --backend mpi
  expect_threads "mpirun -n 2 on $host cores" mpi2.log "$share"
  has "the reason names the ranks on this host" mpi2.log '\| threads .*/ 2 ranks on this host'
fi

# 3. Explicit settings win. 2x the host's cores per rank: the ranks share cores, so passive.
many=$((host * 2))
run omp env OMP_NUM_THREADS=$many "$bin/launch" -n 2 "${train[@]}"
expect_threads "OMP_NUM_THREADS=$many wins" omp.log "$many"
has "launch leaves the user's OMP_NUM_THREADS and makes the threads wait passively" omp.log \
  "^launch: threads: $many threads per rank \(OMP_NUM_THREADS=$many\); OMP_WAIT_POLICY=PASSIVE"
has "the ranks say who set the wait policy" omp.log '\| threads .*waiting passive \(OMP_WAIT_POLICY=PASSIVE, set by launch\)'
run openblas env OMP_NUM_THREADS=$many OPENBLAS_NUM_THREADS=1 "$bin/launch" -n 2 "${train[@]}"
expect_threads "OPENBLAS_NUM_THREADS=1 over OMP_NUM_THREADS" openblas.log 1
run flag env OPENBLAS_NUM_THREADS=1 "$bin/launch" -n 2 "${train[@]}" --threads 3
expect_threads "--threads 3 over the variables" flag.log 3
run active env OMP_NUM_THREADS=$many OMP_WAIT_POLICY=active "$bin/launch" -n 2 "${train[@]}"
has "the user's OMP_WAIT_POLICY is kept" active.log '\| threads .*waiting active \(OMP_WAIT_POLICY=active\)'
if [[ -n $mpiexec ]]; then
  run mpi_omp env -u OMP_WAIT_POLICY OMP_NUM_THREADS=$many \
    "$mpiexec" --oversubscribe --bind-to none -x OMP_NUM_THREADS -n 2 "${train[@]}" --backend mpi
  expect_threads "mpirun with OMP_NUM_THREADS=$many" mpi_omp.log "$many"
  has "under mpirun the program re-executes itself to wait passively" mpi_omp.log \
    '\| threads .*waiting passive \(OMP_WAIT_POLICY=PASSIVE, set by this program'
fi

# 4. Malformed values: refused before any work, naming the variable (exit 2).
for bad in "OMP_NUM_THREADS=lots" "OPENBLAS_NUM_THREADS=0" "OMP_WAIT_POLICY=sometimes"; do
  env "$bad" timeout 30 "${train[@]}" > bad.log 2>&1
  rc=$?
  if [[ $rc == 2 ]] && grep -q "${bad%%=*}='${bad#*=}'" bad.log; then ok "$bad refused: $(grep -m1 error: bad.log)"
  else fail "$bad: exit $rc (want 2) or no message naming it: $(head -3 bad.log)"; fi
done
env OMP_NUM_THREADS=lots timeout 30 "$bin/launch" -n 2 "${train[@]}" > bad_launch.log 2>&1
rc=$?
[[ $rc == 2 ]] && grep -q "OMP_NUM_THREADS='lots'" bad_launch.log && ok "launch refuses it too" ||
  fail "launch with OMP_NUM_THREADS=lots: exit $rc: $(head -3 bad_launch.log)"

# 5. launch's own mask, and --bind cores. C: the first CPU this script may use.
cpu=$(/usr/bin/python3 -c 'import os; print(min(os.sched_getaffinity(0)))')
one=$(host_cores taskset -c "$cpu")
run single_masked taskset -c "$cpu" "${train[@]}"
expect_threads "taskset -c $cpu: a process runs on its $one core" single_masked.log "$one"
run launch_masked env -u OMP_NUM_THREADS -u OPENBLAS_NUM_THREADS -u OMP_WAIT_POLICY \
  taskset -c "$cpu" "$bin/launch" -n 2 "${train[@]}"
expect_threads "taskset -c $cpu launch -n 2" launch_masked.log 1
has "launch plans its ranks from its own mask, $one core" launch_masked.log \
  "^launch: threads: OMP_NUM_THREADS=1 for each rank \($one cores? on this host .*/ 2 ranks on this host\)"
# Each rank prints its mask and OMP_NUM_THREADS: "mask 0,1 omp 1".
show=(/usr/bin/python3 -c 'import os; print("mask", ",".join(map(str, sorted(os.sched_getaffinity(0)))), "omp", os.environ.get("OMP_NUM_THREADS"))')
check_bound() {  # NAME LOG PER THREADS MUST_SHARE: each rank's block has PER CPUs of this mask, disjoint unless MUST_SHARE
  /usr/bin/python3 - "$2" "$3" "$4" "$5" <<'PY' && ok "$1: $(grep -h '^\[rank' "$2" | tr '\n' ' ')" || { fail "$1"; cat "$2"; }
import os, re, sys
log, per, threads, share = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
mine = os.sched_getaffinity(0)
ranks = dict(re.findall(r"^\[rank (\d)\] (mask [\d,]+ omp \S+)$", open(log).read(), re.M))
blocks = [set(map(int, ranks[r].split()[1].split(","))) for r in sorted(ranks)]
omps = [ranks[r].split()[3] for r in sorted(ranks)]
ok = len(blocks) == 2 and all(len(b) == per and b <= mine for b in blocks) and all(o == threads for o in omps)
ok = ok and ((blocks[0] == blocks[1]) if share else not (blocks[0] & blocks[1]))
print("" if ok else f"want 2 ranks of {per} CPUs each of {sorted(mine)}, {'shared' if share else 'disjoint'}, "
      f"OMP_NUM_THREADS={threads}; got {ranks}")
sys.exit(0 if ok else 1)
PY
}
mask=$(/usr/bin/python3 -c 'import os; print(len(os.sched_getaffinity(0)))')
per=$((mask / 2)); ((per >= 1)) || per=1
bound=$((host / 2 < per ? host / 2 : per)); ((bound >= 1)) || bound=1
run bind env -u OMP_NUM_THREADS -u OPENBLAS_NUM_THREADS "$bin/launch" -n 2 --bind cores "${show[@]}"
check_bound "launch --bind cores: $per of $mask CPUs each" bind.log "$per" "$bound" $((mask < 2))
run bind_masked env -u OMP_NUM_THREADS -u OPENBLAS_NUM_THREADS taskset -c "$cpu" "$bin/launch" -n 2 --bind cores "${show[@]}"
check_bound "taskset -c $cpu launch --bind cores: both ranks on CPU $cpu" bind_masked.log 1 1 1
has "launch says the ranks share" bind_masked.log "^launch: --bind cores: rank 0: CPU $cpu, rank 1: CPU $cpu \(more ranks than CPUs: some share\)"

echo "$fails failed"
((fails == 0))
