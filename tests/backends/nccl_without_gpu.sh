#!/usr/bin/env bash
# `--backend nccl` on a machine without a GPU must fail with a clear message naming the
# reason and a CPU backend to use instead (--backend tcp), exit code 1, no crash (a
# signal would show as 128+N) and no hang.
# Skipped (77) where a GPU exists: there the gpu.* tests cover the backend.
# usage: nccl_without_gpu.sh DEVICE_INFO DEMO LAUNCH
set -u
device_info=$1 demo=$2 launch=$3
if "$device_info" > /dev/null; then echo "skipped: a GPU exists here"; exit 77; fi
fail=0
check() {  # name, expected exit code, output
  local name=$1 want=$2 rc=$3 out=$4
  echo "--- $name: exit $rc"; echo "$out" | tail -3
  if [[ $rc -ne $want ]]; then echo "FAIL: $name exited $rc, expected $want"; fail=1; fi
  if ! grep -q "no usable CUDA device\|not built" <<<"$out"; then echo "FAIL: $name: no clear reason in the output"; fail=1; fi
  # ... and the way on: a CPU backend (the not-built message lists the built ones).
  if ! grep -q -- "--backend tcp\|built backends: .*tcp" <<<"$out"; then echo "FAIL: $name: names no CPU backend to use instead"; fail=1; fi
  if grep -qi "segmentation\|core dumped\|terminate called" <<<"$out"; then echo "FAIL: $name crashed"; fail=1; fi
}
out=$(timeout 60 "$demo" --backend nccl 2>&1); check "demo --backend nccl (1 process)" 1 $? "$out"
out=$(timeout 60 "$launch" -n 2 "$demo" --backend nccl 2>&1); check "launch -n 2 demo --backend nccl" 1 $? "$out"
exit $fail
