# Sourced by the straggler tests: slows the process a launch job starts as rank 1.
#
# How: a CPU limit of 20% of a core (cgroup v1's cpu controller, where it can be written:
# root), else a busy loop pinned beside rank 1's core. The limit comes first because a
# busy loop does not decide who is slower on a machine shared with other work: the
# kernel's autogroups share a core between sessions, not processes, so another session's
# build on rank 0's core slowed rank 0 as much as the loop slowed rank 1 (measured with
# --trace: 1.3x between them), and nobody, or rank 0, was named. A limit holds rank 1 to
# 20% whatever else runs.
#   slow_rank1_prepare BIN_DIR   decide how (sets slow_how); the busy loop starts here
#   slow_rank1_attach JOB_PID    cgroup: move launch's (JOB_PID's) child with RANK=1 into the group
#   slow_rank1_run LOG CMD...    runs launch's command CMD in the background (output to
#                                LOG), slows its rank 1, waits: CMD's exit status
#   slow_rank1_release           stop the loop and a running CMD, remove the group (safe to
#                                call twice: the callers' EXIT trap calls it)
slow_cg=/sys/fs/cgroup/cpu/dpt-slow-rank1-$$
slow_busy=
slow_how=
slow_job=

# The process launch (JOB_PID) starts as rank 1: its child with RANK=1 in its environment.
# Always returns 0 (the callers run under set -e): prints nothing until it exists.
slow_rank1_pid() {
  local p
  for p in $(pgrep -P "$1" || true); do
    if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx RANK=1; then echo "$p"; fi
  done
  return 0
}

slow_rank1_prepare() {
  if mkdir "$slow_cg" 2>/dev/null && echo 20000 > "$slow_cg/cpu.cfs_quota_us" 2>/dev/null; then
    slow_how="cgroup cpu quota 20000/$(cat "$slow_cg/cpu.cfs_period_us") us"
    return
  fi
  # The CPU launch will bind rank 1 to (it prints its plan before starting anything).
  local cpu1
  cpu1=$("$1/launch" -n 2 --bind cores true 2>&1 | sed -n 's/.*rank 1: CPU \([0-9]*\).*/\1/p' | head -1)
  [[ -n $cpu1 ]] || { echo "FAIL: launch did not say rank 1's CPU"; exit 1; }
  taskset -c "$cpu1" sh -c 'while :; do :; done' &
  slow_busy=$!
  slow_how="a busy loop on CPU $cpu1"
}

slow_rank1_attach() {
  [[ $slow_how == cgroup* ]] || return 0
  local pid=
  for _ in $(seq 200); do pid=$(slow_rank1_pid "$1"); [[ -n $pid ]] && break; sleep 0.05; done
  [[ -n $pid ]] || { echo "FAIL: rank 1's process not found"; exit 1; }
  echo "$pid" > "$slow_cg/cgroup.procs" || { echo "FAIL: could not move rank 1 ($pid) into $slow_cg"; exit 1; }
}

slow_rank1_run() {
  local log=$1 rc=0
  shift
  "$@" > "$log" 2>&1 &
  slow_job=$!
  slow_rank1_attach "$slow_job"
  wait "$slow_job" || rc=$?
  slow_job=
  slow_rank1_release
  return $rc
}

slow_rank1_release() {
  if [[ -n $slow_job ]]; then kill "$slow_job" 2>/dev/null; wait "$slow_job" 2>/dev/null; fi
  slow_job=
  if [[ -n $slow_busy ]]; then kill "$slow_busy" 2>/dev/null; wait "$slow_busy" 2>/dev/null; fi
  slow_busy=
  rmdir "$slow_cg" 2>/dev/null || true
}
