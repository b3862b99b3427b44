#!/usr/bin/env bash
# A Slurm job across hosts gets its job token from munge, with nothing set by hand
# (comm/store/munge_secret.h): two ranks started as srun starts them (SLURM_* variables,
# no COMM_JOB_TOKEN) meet at a non-loopback MASTER_ADDR, so they may not run open; rank 0
# draws a token and its store hands it out as munge credentials. Checked:
#   1. the job runs, authenticated (no "running open", no refusal);
#   2. without munge (munged stopped) rank 1 fails at once, naming munge;
#   3. another user (nobody) asking rank 0's store for the credential cannot decode it;
#   4. with munge absent from PATH the job refuses to run open, naming COMM_JOB_TOKEN
#      and COMM_RUN_OPEN; with COMM_RUN_OPEN=1 it runs and says so.
# Needs munged (Debian's munge package; exit 77 without it) and a non-loopback address.
set -u
build=$1
demo=$build/bin/demo
command -v munged >/dev/null || { echo "SKIP: no munged (apt-get install munge)"; exit 77; }
addr=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -m1 -E '^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$' | grep -v '^127\.')
[[ -n $addr ]] || { echo "SKIP: no non-loopback IPv4 address on this host"; exit 77; }
work=$(mktemp -d /tmp/dpt-munge.XXXXXX)
chmod 755 "$work"
cleanup() { [[ -f $work/munged.pid ]] && kill "$(cat "$work/munged.pid")" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

dd if=/dev/urandom bs=1 count=1024 of="$work/munge.key" status=none
chmod 600 "$work/munge.key"
start_munged() {
  munged --force --key-file="$work/munge.key" --socket="$work/munge.socket" --pid-file="$work/munged.pid" \
    --log-file="$work/munged.log" --seed-file="$work/munged.seed" 2>>"$work/munged.err" ||
    { cat "$work/munged.err"; fail "munged did not start"; }
  chmod 777 "$work/munge.socket" 2>/dev/null
}
start_munged
echo "AuthInfo=socket=$work/munge.socket" > "$work/slurm.conf"
port=$((20000 + RANDOM % 20000))

# rank R of 2 as srun starts it; extra variables and the command's prefix may follow.
run_rank() {
  local r=$1
  shift
  env -u COMM_JOB_TOKEN SLURM_CONF="$work/slurm.conf" SLURM_JOB_ID=4242 SLURM_STEP_ID=0 SLURM_PROCID="$r" \
    SLURM_NTASKS=2 SLURM_LOCALID=0 SLURM_NODEID="$r" SLURM_TASKS_PER_NODE="1(x2)" SLURM_JOB_NODELIST=n[0-1] \
    MASTER_ADDR="$addr" MASTER_PORT="$port" COMM_TCP_ADDR="$addr" COMM_TCP_SHM=0 COMM_RENDEZVOUS_TIMEOUT_S=10 "$@"
}
pair() {  # pair NAME [VAR=VALUE...]: both ranks, logs in $work/NAME.{0,1}
  local name=$1
  shift
  run_rank 0 env "$@" "$demo" --backend tcp --count 300000 > "$work/$name.0" 2>&1 &
  local p0=$!
  run_rank 1 env "$@" "$demo" --backend tcp --count 300000 > "$work/$name.1" 2>&1
  local rc1=$?
  wait $p0
  local rc0=$?
  port=$((port + 1))
  echo "$rc0 $rc1"
}

# 1. Nothing set: the token comes by munge.
read -r rc0 rc1 < <(pair munge)
[[ $rc0 == 0 && $rc1 == 0 ]] || { cat "$work/munge.0" "$work/munge.1"; fail "the job with its token by munge failed ($rc0/$rc1)"; }
grep -q "correct" "$work/munge.1" || { cat "$work/munge.1"; fail "rank 1's allreduce was not checked correct"; }
if grep -qi "running open\|refusing\|empty token" "$work/munge.0" "$work/munge.1"; then
  cat "$work/munge.0" "$work/munge.1"
  fail "the job ran open or was refused although munge was there"
fi
echo "ok   2 ranks at $addr, SLURM_* only: token by munge, allreduce correct, nothing run open"

# 2. Munged stopped: rank 1 cannot decode; it says so, naming munge.
kill "$(cat "$work/munged.pid")"
sleep 0.5
read -r rc0 rc1 < <(pair nomunged COMM_RENDEZVOUS_TIMEOUT_S=3)
[[ $rc1 != 0 ]] || fail "rank 1 ran without munged"
grep -q "munge" "$work/nomunged.1" || { cat "$work/nomunged.1"; fail "rank 1's error does not name munge"; }
echo "ok   munged down: rank 1 fails naming munge: $(grep -m1 -o 'could not mint[^(]*\|did not decode[^(]*\|munge[^.]*failed[^.]*' "$work/nomunged.0" "$work/nomunged.1" | head -1)"
start_munged

# 3. Another user asks rank 0's store for the credential: it cannot decode it.
run_rank 0 "$demo" --backend tcp --count 300000 > "$work/victim.0" 2>&1 &
victim=$!
sleep 1
if command -v setpriv >/dev/null; then
  run_rank 1 setpriv --reuid=65534 --regid=65534 --clear-groups "$demo" --backend tcp --count 300000 > "$work/thief.1" 2>&1
  rc=$?
  [[ $rc != 0 ]] || { cat "$work/thief.1"; fail "user nobody decoded the job's token"; }
  grep -q "did not decode" "$work/thief.1" || { cat "$work/thief.1"; fail "user nobody's failure does not say the credential did not decode"; }
  echo "ok   user nobody asking for the credential: $(grep -m1 -o 'did not decode: [^(]*' "$work/thief.1")"
fi
# The victim then meets its real rank 1.
run_rank 1 "$demo" --backend tcp --count 300000 > "$work/victim.1" 2>&1 || { cat "$work/victim.1"; fail "the real rank 1 failed after the attempt"; }
wait $victim || { cat "$work/victim.0"; fail "rank 0 failed after the attempt"; }
port=$((port + 1))
echo "ok   the job completes with its real rank 1 after that"

# 4. No munge on PATH: refuse to run open, unless told to.
nomunge=$work/bin
mkdir -p "$nomunge"
for t in env hostname; do ln -s "$(command -v $t)" "$nomunge/$t"; done
read -r rc0 rc1 < <(pair open PATH="$nomunge")
[[ $rc0 != 0 && $rc1 != 0 ]] || fail "a job reachable from other hosts ran open without being told to"
grep -q "refusing to run open" "$work/open.0" && grep -q "COMM_RUN_OPEN" "$work/open.0" ||
  { cat "$work/open.0"; fail "the refusal does not say why and how"; }
read -r rc0 rc1 < <(pair runopen PATH="$nomunge" COMM_RUN_OPEN=1)
[[ $rc0 == 0 && $rc1 == 0 ]] || { cat "$work/runopen.0" "$work/runopen.1"; fail "COMM_RUN_OPEN=1 did not run"; }
grep -q "running open" "$work/runopen.0" || { cat "$work/runopen.0"; fail "a job told to run open does not say so"; }
echo "ok   no munge: refused ('$(grep -m1 -o 'refusing to run open' "$work/open.0")'); COMM_RUN_OPEN=1 runs and warns"
