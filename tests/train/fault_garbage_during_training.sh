#!/usr/bin/env bash
# Garbage during a training run: a 2-rank tcp `train` run (under tools/launch) while this
# script sends its listening ports random bytes, HTTP requests, a port scan
# (connect/close), forged handshakes and silent connections. The run must finish with
# exit 0; every bad connection (random bytes, HTTP, forged handshakes) must be closed by
# the job, as this script sees it (EOF or a reset within 5 s of sending), and logged by
# it; and the ranks' resident memory may grow by at most 64 MiB.
# Usage: fault_garbage_during_training.sh LAUNCH TRAIN [STEPS]
set -u
# A write into a connection the job already closed must fail with EPIPE (counted as
# closed below), not kill this script: bash's own printf would take the SIGPIPE.
trap '' PIPE
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
base=$(rss_kib) peak=$base attacks=0 closed_seen=0 scans=0 not_closed=()
# bad PORT DATA-COMMAND: connect, write what the command prints, then wait up to 5 s for
# the job to close the connection. A write that fails (the job closed it meanwhile), an
# EOF or a reset on read count as closed; a read still open after 5 s does not.
bad() {
  exec 3<>"/dev/tcp/127.0.0.1/$1" 2>/dev/null || return 0  # refused: the job has ended
  attacks=$((attacks + 1))
  local rc=0
  if eval "$2" >&3 2>/dev/null; then timeout 5 cat <&3 >/dev/null 2>&1; rc=$?; fi
  exec 3>&-
  if ((rc == 124)); then not_closed+=("$3"); else closed_seen=$((closed_seen + 1)); fi
}
scan() {  # connect and close at once: nothing for the job to close
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && scans=$((scans + 1))
}
round=0
while kill -0 "$launcher" 2>/dev/null && ((round < 40)); do
  for port in "${ports[@]}"; do
    bad "$port" 'head -c 65536 /dev/urandom' "random bytes"
    bad "$port" "printf 'GET / HTTP/1.1\r\nHost: localhost\r\n\r\n'" "HTTP request"
    scan "$port"
    bad "$port" "printf 'DPTA\x01\x00\x00\x00'; head -c 64 /dev/urandom" "forged store handshake"
    bad "$port" "printf 'DPTH\x02\x00\x01\x00'; head -c 120 /dev/urandom" "forged mesh hello"
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
echo "garbage during training: $attacks bad connections in $round rounds (and $scans port scans): $closed_seen closed by" \
     "the job, $closed closings logged;" \
     "RSS of the 2 ranks ${base} KiB -> peak ${peak} KiB (growth ${growth} MiB, limit 64); train exit $rc"
if ((rc != 0)); then tail -n 30 "$work/out.log"; echo "FAIL: the training run failed"; exit 1; fi
if ! grep -q "final:" "$work/out.log"; then echo "FAIL: no final line"; exit 1; fi
if ((round < 3)); then echo "FAIL: the run ended before 3 attack rounds (raise STEPS)"; exit 1; fi
# Every bad connection of every round but the last (which may meet the job's end) got through.
if ((attacks < 4 * ${#ports[@]} * (round - 1))); then echo "FAIL: only $attacks bad connections reached the job"; exit 1; fi
if ((closed_seen < attacks)); then
  echo "FAIL: $((attacks - closed_seen)) bad connection(s) still open 5 s after sending: $(printf '%s\n' "${not_closed[@]}" | sort | uniq -c | tr -s ' \n' ' ')"
  exit 1
fi
if ((closed < attacks)); then echo "FAIL: the job logged only $closed closings for $attacks bad connections"; exit 1; fi
if ((growth > 64)); then echo "FAIL: memory grew by $growth MiB"; exit 1; fi
echo ok
