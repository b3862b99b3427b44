#!/usr/bin/env bash
# Chaos on an emulated cluster (bench/cluster.sh): H hosts x 2 ranks, one elastic job
# (launch --elastic --max-restarts on every host, train --elastic, DDP or ZeRO-2), while a
# seeded fault schedule (bench/chaos_schedule.py) kills, stops, cuts links and restarts,
# with CPU-bound neighbours (nice 19) stealing the cores. Then the verdict
# (bench/chaos_verdict.py): samples dealt once, lost steps, parameters bitwise a replay
# of the same membership changes, no leftovers, every fault named in faults.log.
#   bench/chaos.sh --seed N --minutes M --hosts H --strategy ddp|zero2 [--steps S]
#                  [--batch-size B] [--neighbours K] [--save-every N] [--max-restarts R]
#                  [--replicas C] [--work DIR] [--bin DIR]
# A run may span several epochs (the sample check covers each). --max-restarts (per
# host's launcher) defaults to twice the schedule's faults, at least 4: a long run's kills
# must not use up the budget. --replicas (ZeRO-2; default 2): --elastic-snapshot-replicas,
# the ring neighbours holding a copy of each shard, so a double kill of neighbours is
# recovered in memory; losing more in a row falls back to the disk checkpoint.
# Exit 0: verdict PASS; 1: FAIL; 2: bad arguments; 77: namespaces cannot be made.
set -u
here=${CHAOS_HERE:-$(cd "$(dirname "$0")" && pwd)}
# bash reads a script as it runs it: a half-hour run of this file, edited meanwhile (a
# checkout, a pull), would go on with mixed lines. Run from a private copy instead.
# (The copy is unlinked at once: bash keeps reading it through its open descriptor.)
if [[ -z ${CHAOS_HERE:-} ]]; then
  copy=$(mktemp /tmp/chaos.sh.XXXXXX)
  cp "$0" "$copy"
  CHAOS_HERE=$here exec bash "$copy" "$@"
fi
[[ $0 == /tmp/chaos.sh.* ]] && rm -f "$0"
seed="" minutes=1 hosts=2 strategy=ddp steps=200 neighbours=2 batch=4 work="" bin=$here/../build/bin save_every=10 restarts= replicas=2
usage() { sed -n '8,16p' "$here/chaos.sh" >&2; exit 2; }
while (($#)); do
  case $1 in
    --seed) seed=$2;; --minutes) minutes=$2;; --hosts) hosts=$2;; --strategy) strategy=$2;;
    --steps) steps=$2;; --batch-size) batch=$2;; --neighbours) neighbours=$2;; --work) work=$2;; --bin) bin=$2;;
    --save-every) save_every=$2;; --max-restarts) restarts=$2;; --replicas) replicas=$2;;
    *) echo "chaos.sh: unknown argument '$1'" >&2; usage;;
  esac
  shift 2 || usage
done
seed=${seed:-$(date +%s)}
[[ $seed =~ ^[0-9]+$ && $minutes =~ ^[0-9.]+$ && $hosts =~ ^[2-4]$ && $steps =~ ^[0-9]+$ && $batch =~ ^[1-9][0-9]*$ && $neighbours =~ ^[0-9]+$ &&
   $save_every =~ ^[1-9][0-9]*$ && $restarts =~ ^[0-9]*$ && $replicas =~ ^[1-9]$ ]] ||
  { echo "chaos.sh: want --seed N, --minutes M, --hosts 2..4, --steps S, --neighbours K, --save-every N, --max-restarts R, --replicas 1..9 (numbers)" >&2; usage; }
case $strategy in ddp) zero=();; zero2) zero=(--zero 2 --elastic-snapshot-every 5 --elastic-snapshot-replicas "$replicas");; *) echo "chaos.sh: --strategy ddp|zero2, got '$strategy'" >&2; usage;; esac
[[ -x $bin/launch && -x $bin/train ]] || { echo "chaos.sh: no launch/train in $bin (build them or pass --bin)" >&2; exit 2; }
seconds=$(awk -v m="$minutes" 'BEGIN { print m * 60 }')
echo "chaos: seed=$seed minutes=$minutes hosts=$hosts strategy=$strategy steps=$steps"
echo "  replay: bench/chaos.sh --seed $seed --minutes $minutes --hosts $hosts --strategy $strategy --steps $steps --batch-size $batch --save-every $save_every${restarts:+ --max-restarts $restarts} --replicas $replicas"
source "$here/cluster.sh"
cluster_up "$hosts" "" || { rc=$?; ((rc == 77)) && echo "SKIP: emulated hosts unavailable"; exit $rc; }
work=${work:-$(mktemp -d /tmp/chaos.XXXXXX)}
mkdir -p "$work"
echo "  work: $work"
ls /dev/shm | sort > "$work/shm.before"
timeout_s=5
export COMM_JOB_TOKEN=chaos-$$-$seed-secret-token COMM_TIMEOUT_S=$timeout_s COMM_RENDEZVOUS_TIMEOUT_S=30
export COMM_ELASTIC_SETTLE_S=2 OPENBLAS_NUM_THREADS=1
args=(--backend tcp --algo ring --model mlp --optimizer adam --lr 1e-3 --lr-schedule constant --no-shuffle --epochs 1000000
      --batch-size "$batch" --log-every 1 --max-eval-samples 64 "${zero[@]}")
printf '%s\n' "${args[@]}" > "$work/train.args"
echo "$steps" > "$work/steps"
echo "$save_every" > "$work/save_every"
echo "OPENBLAS_NUM_THREADS=$OPENBLAS_NUM_THREADS" > "$work/train.env"  # the replay's GEMMs must sum alike
python3 "$here/chaos_schedule.py" --seed "$seed" --seconds "$seconds" --hosts "$hosts" --timeout $timeout_s > "$work/schedule"
restarts=${restarts:-$(awk 'END { r = 2 * NR; print r < 4 ? 4 : r }' "$work/schedule")}
echo "  max restarts per host: $restarts; checkpoint every $save_every steps"

# CPU-bound neighbours, niced and bounded by the run's length (a shared node).
nb=()
for ((i = 0; i < neighbours; i++)); do
  nice -n 19 timeout $((${seconds%.*} + 120)) sh -c 'while :; do :; done' & nb+=($!)
done
launchers=()
for ((i = 0; i < hosts; i++)); do
  cluster_exec $i "$bin/launch" --elastic -n 1:2 --max-restarts "$restarts" --nnodes "$hosts" --node-rank $i \
    --rdzv-host "$(cluster_addr 0)" --master-port $((24000 + $$ % 20000)) "$bin/train" --elastic "${args[@]}" \
    --steps "$steps" --save-every "$save_every" --checkpoint-dir "$work/ck" --metrics-out "$work/m$i.jsonl" \
    --debug-sample-log "$work/samples" > "$work/h$i.log" 2>&1 &
  launchers+=($!)
done
# However this script ends: the launchers (children of the background subshells; a
# launcher forwards SIGTERM to its ranks), the neighbours, then the namespaces.
# Stopped by hand (SIGTERM/SIGINT), the launchers may already have lost their parent
# subshells: they and their ranks are found by this run's metrics paths too.
chaos_cleanup() {
  local p
  for p in "${launchers[@]}"; do kill $(pgrep -P "$p") 2>/dev/null; done
  pkill -TERM -f -- "--metrics-out $work/m[0-9]" 2>/dev/null
  for p in "${nb[@]}"; do kill "$p" 2>/dev/null; done
  cluster_down
}
trap chaos_cleanup EXIT
trap 'exit 143' TERM INT
t0=$(date +%s.%N)
now() { awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
alive() { kill -0 "${launchers[0]}" 2>/dev/null; }
# The live process of slot H.L: the one with this job's token and DPT_ELASTIC_ID
# nH.lL.i* in its environment (the launchers run under `ip netns exec`, so they are not
# this shell's children).
job_procs() {  # PID ID for every live train process of this job
  local e p
  # (bounded, so a process in an odd state cannot hold the injector up)
  for e in $(timeout 5 grep -lsxz "COMM_JOB_TOKEN=$COMM_JOB_TOKEN" /proc/[0-9]*/environ); do
    p=${e#/proc/}; p=${p%/environ}
    timeout 2 tr '\0' '\n' 2>/dev/null < "$e" | sed -n "s/^DPT_ELASTIC_ID=/$p /p"
  done
}
slot_pid() {  # the newest incarnation of the slot
  job_procs | sort -k2,2r | awk -v re="^n${1%.*}[.]l${1#*.}[.]i[0-9]+$" '$2 ~ re { print $1; exit }'; }
slot_id() { timeout 2 tr '\0' '\n' 2>/dev/null < "/proc/$1/environ" | sed -n 's/^DPT_ELASTIC_ID=//p'; }
record_ids() { job_procs | awk '{ print $2 }' >> "$work/ran.ids"; }  # every process that ran, seen apart from its log
fault() { echo "$(now) $*" | tee -a "$work/faults.log" | sed "s/^/  fault /" >&2; }
sig() {  # sig SIGNAL KIND SLOT [ARG]: signal the slot's live process, logged by id
  local p; p=$(slot_pid "$3")
  local id; id=$(slot_id "$p")
  [[ -n $p && -n $id ]] || { fault "$2 $3 - skipped:no-live-process"; return 1; }
  fault "$2 $3 $id pid=$p ${4:-}"
  kill -"$1" "$p"; echo "$p"
}
later_cont() { (sleep "$2"; kill -CONT "$1" 2>/dev/null) & }
: > "$work/faults.log"
while read -r -u 3 t kind target arg; do
  while alive && awk -v a="$(now)" -v b="$t" 'BEGIN { exit !(a < b) }'; do record_ids; sleep 0.2; done
  alive || break
  case $kind in
    kill) sig KILL kill "$target" >/dev/null;;
    stop_short|stop_long) p=$(sig STOP "$kind" "$target" "cont_after=$arg") && later_cont "${p##*$'\n'}" "$arg";;
    link) fault "link $target host$target down_for=$arg"; ip -n "$CLUSTER_TAG-h$target" link set eth0 down
          (sleep "$arg"; ip -n "$CLUSTER_TAG-h$target" link set eth0 up) &;;
    double) sig KILL double "${target%,*}" >/dev/null; sleep "$arg"; sig KILL double "${target#*,}" >/dev/null;;
    ckpt_kill)  # kill while a checkpoint's temporary file exists (chaos_ckpt_kill.py)
      p=$(slot_pid "$target"); id=$(slot_id "$p")
      if [[ -z $p || -z $id ]]; then fault "ckpt_kill $target - skipped:no-live-process"
      else w=$(python3 "$here/chaos_ckpt_kill.py" "$work/ck" "$p" 20); fault "ckpt_kill $target $id pid=$p write=$w"; fi;;
    join_stop)  # stop one process, then kill another: its replacement joins during the stop
      p=$(sig STOP join_stop "$target" "cont_after=$arg") && later_cont "${p##*$'\n'}" "$arg"
      other=$(( (${target%.*} + 1) % hosts )).1
      sig KILL join_stop_kill "$other" >/dev/null;;
  esac
done 3< "$work/schedule"
while alive; do record_ids; sleep 0.5; done
rc=0
wait "${launchers[0]}" || rc=$?
wait_s=$(now)  # the job ends with host 0's launcher (it serves the store): faults due later are not due
for p in "${launchers[@]:1}"; do wait "$p"; done
echo "$wait_s" > "$work/job.end"
for p in "${nb[@]}"; do kill "$p" 2>/dev/null; done
wait 2>/dev/null
sort -u "$work/ran.ids" -o "$work/ran.ids"
echo "  job ended after $wait_s s (host 0's launcher exit $rc)"
# Leftovers, taken while the namespaces still exist: processes of this job, sockets in
# any host's namespace, new /dev/shm entries.
{ pgrep -af -- "$work/" | grep -v -e 'chaos\.sh' -e chaos_verdict || true; } > "$work/leftover.procs"
for ((i = 0; i < hosts; i++)); do cluster_exec $i ss -Htanp state established state listening state syn-sent 2>/dev/null; done > "$work/leftover.sockets"
# A new dpt-* segment that no live process maps (the machine is shared: another job's
# segments are mapped by its ranks while they exist).
for f in $(ls /dev/shm | sort | comm -13 "$work/shm.before" - | grep '^dpt-'); do
  grep -qsF "/dev/shm/$f" /proc/[0-9]*/maps || echo "$f"
done > "$work/leftover.shm"
cat "$work"/h*.log > "$work/job.log"
cluster_down
python3 "$here/chaos_verdict.py" "$work" --bin "$bin" --seed "$seed" --launch-rc $rc
