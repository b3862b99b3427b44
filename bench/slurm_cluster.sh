# A real Slurm cluster on one machine, sourced by tests and benches: Debian's slurmctld,
# slurmd and munge (apt-get install slurmd slurmctld slurm-client munge; tools/install_deps.sh
# installs them) on the emulated hosts of bench/cluster.sh. Host i is Slurm node "node<i>"
# (its own network namespace, address, hostname and shaped link); node0 also runs the
# controller; every node runs its own slurmd. Names resolve inside the hosts through
# /etc/netns/<namespace>/hosts (mounted over /etc/hosts for the node's processes), as DNS would
# on a real cluster, so a job's SLURM_JOB_NODELIST names are addresses to its tasks.
#
#   source bench/slurm_cluster.sh
#   slurm_up N CPUS [RATE]   N nodes of CPUS CPUs each (Slurm's count: the 2 cores here are
#                            shared), links at RATE (e.g. 1gbit; "" = unshaped); returns
#                            77 with the reason where namespaces or the Slurm packages are
#                            missing, 1 when the daemons do not come up (their logs printed)
#   slurm_exec CMD...        CMD on node0 (the login node too) with SLURM_CONF set:
#                            slurm_exec srun -N 2 -n 4 build/bin/train ...
#   slurm_wait_job ID [S]    wait until job ID has left the queue (S seconds, default 120)
#   slurm_down               stop the daemons, remove the namespaces (also done on EXIT:
#                            slurm_up sets that trap, so a caller with cleanup of its own
#                            sets its trap after slurm_up and calls slurm_down in it)
# Proctrack linuxproc and task/none: no cgroups needed. Nothing is written outside a
# scratch folder but /etc/netns/<namespace>/, removed by slurm_down.
source "$(dirname "${BASH_SOURCE[0]}")/cluster.sh"

slurm_fail() { echo "slurm: $*" >&2; }

slurm_up() {
  local nodes=$1 cpus=$2 rate=${3:-} i rc
  for p in slurmctld slurmd munged srun sbatch scontrol sinfo; do
    command -v "$p" >/dev/null || { slurm_fail "no $p (apt-get install slurmd slurmctld slurm-client munge)"; return 77; }
  done
  cluster_up "$nodes" "$rate" || return $?
  trap slurm_down EXIT
  SLURM_DIR=$(mktemp -d /var/tmp/dpt-slurm.XXXXXX)
  chmod 755 "$SLURM_DIR"
  mkdir -p "$SLURM_DIR/state" "$SLURM_DIR/spool" "$SLURM_DIR/munge"
  # munge: its own socket and key in the scratch folder (a running system munged, if any,
  # is left alone); the daemons and clients find it through the key path in slurm.conf.
  dd if=/dev/urandom bs=1 count=1024 of="$SLURM_DIR/munge/munge.key" status=none
  chmod 600 "$SLURM_DIR/munge/munge.key"
  SLURM_MUNGE_SOCKET=$SLURM_DIR/munge/munge.socket
  munged --force --key-file="$SLURM_DIR/munge/munge.key" --socket="$SLURM_MUNGE_SOCKET" \
    --pid-file="$SLURM_DIR/munge/munged.pid" --log-file="$SLURM_DIR/munge/munged.log" \
    --seed-file="$SLURM_DIR/munge/munged.seed" 2>"$SLURM_DIR/munge/start.err" ||
    { slurm_fail "munged did not start: $(cat "$SLURM_DIR/munge/start.err")"; return 1; }
  local hosts=""
  for ((i = 0; i < nodes; i++)); do hosts+="$(cluster_addr $i) node$i"$'\n'; done
  for ((i = 0; i < nodes; i++)); do
    mkdir -p "/etc/netns/$CLUSTER_TAG-h$i"
    printf '127.0.0.1 localhost\n%s' "$hosts" > "/etc/netns/$CLUSTER_TAG-h$i/hosts"
  done
  export SLURM_CONF=$SLURM_DIR/slurm.conf
  {
    echo "ClusterName=dpt"
    echo "SlurmctldHost=node0($(cluster_addr 0))"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    # cred_expire: a job step credential's life, and so how long a requeued job waits
    # before it may start again (Slurm's default 120 s; 5 here for the tests).
    echo "AuthInfo=socket=$SLURM_MUNGE_SOCKET,cred_expire=5"
    echo "MpiDefault=none"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_CPU"
    echo "SchedulerType=sched/backfill"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "StateSaveLocation=$SLURM_DIR/state"
    echo "SlurmdSpoolDir=$SLURM_DIR/spool/%n"
    # Each node's scratch folder (PMIx keeps per-step folders there under names every
    # node would share if it were one /tmp for all).
    echo "TmpFS=$SLURM_DIR/tmp/%n"
    echo "SlurmctldPidFile=$SLURM_DIR/slurmctld.pid"
    echo "SlurmdPidFile=$SLURM_DIR/slurmd.%n.pid"
    echo "SlurmctldLogFile=$SLURM_DIR/slurmctld.log"
    echo "SlurmdLogFile=$SLURM_DIR/slurmd.%n.log"
    # A node's CPUs are what this file says (they are shared cores here), not what the
    # machine has; a restarted slurmd rejoins without an admin.
    echo "SlurmdParameters=config_overrides"
    echo "ReturnToService=2"
    # KillWait: the seconds between a time limit's SIGTERM and its SIGKILL (Slurm's
    # default 30); MinJobAge: finished jobs leave the queue quickly for the tests.
    echo "KillWait=${SLURM_KILL_WAIT:-30}"
    echo "MinJobAge=5"
    echo "InactiveLimit=0"
    echo "SlurmctldTimeout=30"
    echo "SlurmdTimeout=30"
    for ((i = 0; i < nodes; i++)); do
      echo "NodeName=node$i NodeAddr=$(cluster_addr $i) CPUs=$cpus State=UNKNOWN"
    done
    echo "PartitionName=dpt Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES"
  } > "$SLURM_CONF"
  _slurm_on 0 env SLURM_CONF="$SLURM_CONF" slurmctld -i 2>"$SLURM_DIR/slurmctld.err" ||
    { slurm_fail "slurmctld did not start: $(cat "$SLURM_DIR/slurmctld.err" "$SLURM_DIR/slurmctld.log" 2>/dev/null | tail -5)"; return 1; }
  for ((i = 0; i < nodes; i++)); do
    mkdir -p "$SLURM_DIR/spool/node$i" "$SLURM_DIR/tmp/node$i"
    _slurm_on $i env SLURM_CONF="$SLURM_CONF" slurmd -N "node$i" 2>"$SLURM_DIR/slurmd.node$i.err" ||
      { slurm_fail "slurmd on node$i did not start: $(cat "$SLURM_DIR/slurmd.node$i.err" "$SLURM_DIR/slurmd.node$i.log" 2>/dev/null | tail -5)"; return 1; }
  done
  # Every node idle before a job is submitted (registration takes a few seconds).
  local idle=0
  for ((i = 0; i < 60; i++)); do
    idle=$(slurm_exec sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)
    ((idle == nodes)) && return 0
    sleep 1
  done
  slurm_fail "$idle of $nodes nodes idle after 60 s: $(slurm_exec sinfo -N 2>&1 | tr '\n' ';')"
  tail -5 "$SLURM_DIR/slurmctld.log" >&2
  return 1
}

# CMD on node I: its network namespace, hostname node<I> and /etc/hosts, nothing else of
# its own: the file system is the cluster's shared one (each node's scratch folder is
# TmpFS, below). Not `ip netns exec`, which also mounts a fresh /sys without the cgroup
# hierarchies slurmd reads at start.
_slurm_on() {
  local i=$1
  shift
  nsenter --net="/run/netns/$CLUSTER_TAG-h$i" unshare --uts --mount /bin/sh -c \
    'hostname "$0" && mount --bind "$1" /etc/hosts && shift && exec "$@"' "node$i" \
    "/etc/netns/$CLUSTER_TAG-h$i/hosts" "$@"
}

slurm_exec() { _slurm_on 0 env SLURM_CONF="$SLURM_CONF" "$@"; }

slurm_wait_job() {
  local id=$1 limit=${2:-120} t
  for ((t = 0; t < limit; t++)); do
    [[ -z $(slurm_exec squeue -h -j "$id" -o %i 2>/dev/null) ]] && return 0
    sleep 1
  done
  slurm_fail "job $id still queued or running after $limit s: $(slurm_exec squeue -j "$id" 2>&1 | tail -1)"
  return 1
}

slurm_down() {
  [[ -n ${SLURM_DIR:-} ]] || { cluster_down; return 0; }
  local f
  for f in "$SLURM_DIR"/slurmd.*.pid "$SLURM_DIR/slurmctld.pid" "$SLURM_DIR/munge/munged.pid"; do
    [[ -f $f ]] && kill "$(cat "$f")" 2>/dev/null
  done
  sleep 0.5
  for f in "$SLURM_DIR"/slurmd.*.pid "$SLURM_DIR/slurmctld.pid" "$SLURM_DIR/munge/munged.pid"; do
    [[ -f $f ]] && kill -9 "$(cat "$f")" 2>/dev/null
  done
  [[ -n ${CLUSTER_TAG:-} ]] && rm -rf /etc/netns/"$CLUSTER_TAG"-h*
  [[ -n ${SLURM_KEEP_DIR:-} ]] || rm -rf "$SLURM_DIR"
  SLURM_DIR=
  cluster_down
}
