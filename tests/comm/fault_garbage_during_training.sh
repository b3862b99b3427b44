#!/usr/bin/env bash
# Garbage during a training run: a 2-rank tcp `train` run (under tools/launch) while this
# script sends its listening ports random bytes, HTTP requests, a port scan
# (connect/close), forged handshakes and silent connections. The run must finish with
# exit 0, every attack must have been closed by the job (counted in its log), and the
# ranks' resident memory may grow by at most 64 MiB.
# Usage: fault_garbage_during_training.sh LAUNCH TRAIN [STEPS]
set -u
launch=$1 train=$2 steps=${3:-2500}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$launch" -n 2 "$train" --backend tcp --model mlp --steps "$steps" --log-every 500 \
  >"$work/out.log" 2>&1 &
launcher=$!

ranks=()
for _ in $(seq 1 200); do  # up to 20 s for both ranks to start
  mapfile -t ranks < <(pgrep -P "$launcher")
  ((${#ranks[@]} == 2)) && grep -q "epochs / steps" "$work/out.log" && break
  sleep 0.1
done
if ((${#ranks[@]} != 2)); then cat "$work/out.log"; echo "FAIL: the ranks did not start"; exit 1; fi

# Every TCP port the ranks listen on, from the kernel's own table.
pids_re=$(IFS='|'; echo "${ranks[*]}")
mapfile -t ports < <(ss -ltnpH | grep -E "pid=($pids_re)," | awk '{ n = split($4, a, ":"); print a[n] }' | sort -u)
if ((${#ports[@]} == 0)); then echo "FAIL: found no listening port of the job (ss -ltnp)"; exit 1; fi
echo "job ranks ${ranks[*]}, listening ports: ${ports[*]}"

rss_kib() { local t=0; for p in "${ranks[@]}"; do
  v=$(awk '/^VmRSS/ { print $2 }' "/proc/$p/status" 2>/dev/null) && t=$((t + ${v:-0})); done; echo "$t"; }
base=$(rss_kib) peak=$base attacks=0
send() {  # send PORT DATA-COMMAND: connect, write what the command prints, close
  (exec 3<>"/dev/tcp/127.0.0.1/$1" && eval "$2" >&3 && sleep 0.05) 2>/dev/null
  attacks=$((attacks + 1))
}
round=0
while kill -0 "$launcher" 2>/dev/null && ((round < 40)); do
  for port in "${ports[@]}"; do
    send "$port" 'head -c 65536 /dev/urandom'
    send "$port" "printf 'GET / HTTP/1.1\r\nHost: localhost\r\n\r\n'"
    send "$port" 'true'                                              # port scan: connect, close
    send "$port" "printf 'DPTA\x01\x00\x00\x00'; head -c 64 /dev/urandom"  # forged store handshake
    send "$port" "printf 'DPTH\x02\x00\x01\x00'; head -c 120 /dev/urandom" # forged mesh hello
  done
  # A few silent connections held open (a slow scanner): they must time out, not pile up.
  for port in "${ports[@]}"; do (exec 3<>"/dev/tcp/127.0.0.1/$port"; sleep 3) 2>/dev/null & done
  r=$(rss_kib); ((r > peak)) && peak=$r
  round=$((round + 1))
  sleep 0.1
done
wait "$launcher"
rc=$?
wait 2>/dev/null
closed=$(grep -c "closing connection" "$work/out.log")
grep -E "final:|error|Error" "$work/out.log" | tail -n 5
growth=$(( (peak - base) / 1024 ))
echo "garbage during training: $attacks bad connections in $round rounds, $closed closed by the job (logged);" \
     "RSS of the 2 ranks ${base} KiB -> peak ${peak} KiB (growth ${growth} MiB, limit 64); train exit $rc"
if ((rc != 0)); then tail -n 30 "$work/out.log"; echo "FAIL: the training run failed"; exit 1; fi
if ! grep -q "final:" "$work/out.log"; then echo "FAIL: no final line"; exit 1; fi
if ((round < 3)); then echo "FAIL: the run ended before 3 attack rounds (raise STEPS)"; exit 1; fi
if ((closed < round)); then echo "FAIL: the job logged only $closed closed connections"; exit 1; fi
if ((growth > 64)); then echo "FAIL: memory grew by $growth MiB"; exit 1; fi
echo ok
