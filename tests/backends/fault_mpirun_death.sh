#!/usr/bin/env bash
# Under mpirun, a rank that dies (SIGKILL mid-run) must end the whole job non-zero
# within 10 s. Usage: fault_mpirun_death.sh MPIEXEC HELPER BACKEND
# Prints the measured time from the kill to the job's end.
set -u
mpiexec=$1 helper=$2 backend=$3
log=$(mktemp)
start=$(date +%s%N)
# Rank 1 kills itself at iteration 200 of a loop that would otherwise run for minutes.
timeout -k 5 60 "$mpiexec" --oversubscribe --bind-to none -n 3 "$helper" --backend "$backend" \
  --iters 100000000 --count 1024 --die-rank 1 --die-at 200 >"$log" 2>&1
rc=$?
end=$(date +%s%N)
secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
sed 's/^/  | /' "$log" | tail -n 20
rm -f "$log"
echo "mpirun death ($backend): job ended with exit code $rc after $secs s (includes start-up)"
if [[ $rc -eq 0 ]]; then echo "FAIL: the job exited 0 although a rank died"; exit 1; fi
if [[ $rc -eq 124 ]]; then echo "FAIL: the job did not end by itself within 60 s"; exit 1; fi
if awk -v s="$secs" 'BEGIN { exit !(s >= 10) }'; then echo "FAIL: took $secs s (limit 10 s)"; exit 1; fi
echo "ok"
