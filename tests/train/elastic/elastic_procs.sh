# Sourced by the elastic tests that watch a launcher's processes (the caller defines fail).
#   child_with_id LAUNCHER ID   the launcher's child with DPT_ELASTIC_ID=ID, or nothing yet
#   env_of PID NAME             a variable of that process's environment
#   stopped PID                 whether it is stopped (SIGSTOP, or a --debug-signal STOP gate)
#   wait_stopped LAUNCHER LOG WHAT ID...
#                               waits up to 30 s for each ID to stop itself; their pids in
#                               STOPPED_PIDS; fails (LOG's tail, WHAT) if the job ends first
child_with_id() {
  for p in $(pgrep -P "$1"); do grep -qx "DPT_ELASTIC_ID=$2" < <(tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null) && { echo "$p"; return; }; done
  return 0; }  # none yet: a child still between fork and exec has the launcher's environment
env_of() { tr '\0' '\n' < "/proc/$1/environ" | sed -n "s/^$2=//p"; }
stopped() { grep -q "^State:.*T (stopped)" "/proc/$1/status" 2>/dev/null; }
wait_stopped() {
  local launcher=$1 log=$2 what=$3 id pid
  shift 3
  STOPPED_PIDS=()
  for id in "$@"; do
    pid=""
    for _ in $(seq 1 600); do
      pid=$(child_with_id "$launcher" "$id")
      [[ -n $pid ]] && stopped "$pid" && break
      kill -0 "$launcher" 2>/dev/null || { tail -n 30 "$log"; fail "$what: the job ended before $id stopped"; }
      sleep 0.05
    done
    stopped "$pid" || { tail -n 30 "$log"; fail "$what: $id did not stop within 30 s"; }
    STOPPED_PIDS+=("$pid")
  done
}
