#!/usr/bin/env bash
# Runs a GPU test's command where build/bin/device_info finds a usable GPU (exit 0), or
# exits 77 (CTest: skipped), with the reason, where device_info ran cleanly, reported no
# usable GPU (exit 3, with its report) and the machine agrees: no /dev/nvidia0 and no GPU
# in `nvidia-smi -L`. Anything else fails (exit 1) saying why, so that a machine with a
# GPU never reports its GPU tests as skipped:
#   - device_info missing, crashing (a signal) or exiting with any other status;
#   - a GPU present that device_info cannot use: a build without CUDA, a driver the CUDA
#     runtime refuses, DPT_EMULATE_DEVICE=1 or CUDA_VISIBLE_DEVICES hiding it (to leave
#     the GPU tests out on purpose: ctest -LE gpu).
# usage: needs_gpu.sh DEVICE_INFO COMMAND [ARGS...]
set -uo pipefail
(($# >= 2)) || { echo "FAIL: usage: needs_gpu.sh DEVICE_INFO COMMAND [ARGS...]"; exit 1; }
di=$1; shift
rc=0
info=$("$di" 2>&1) || rc=$?
case $rc in
  0) exec "$@" ;;
  3) ;;  # no usable GPU, checked below
  *) why="status $rc"
     ((rc > 128)) && why+=" (killed by signal $((rc - 128)): it crashed)"
     ((rc == 126 || rc == 127)) && why+=" (not found or not executable)"
     echo "FAIL: '$di' exited with $why, not 0 (a usable GPU) or 3 (none); its output:"
     echo "$info"
     exit 1 ;;
esac
# Exit 3 must come with device_info's report (a stray 3 from something else is no answer).
if ! grep -Eq '^cuda built : (yes|no)$' <<< "$info" || ! grep -q '^devices    : ' <<< "$info"; then
  echo "FAIL: '$di' exited with 3 but without device_info's report ('cuda built :', 'devices    :'); its output:"
  echo "$info"
  exit 1
fi
gpu=()
[[ -e /dev/nvidia0 ]] && gpu+=("/dev/nvidia0 exists")
if command -v nvidia-smi > /dev/null 2>&1; then
  listed=$(timeout 60 nvidia-smi -L 2>/dev/null | grep -E '^GPU [0-9]+:') && gpu+=("nvidia-smi -L lists: $listed")
fi
if ((${#gpu[@]})); then
  echo "FAIL: this machine has a GPU (${gpu[*]}) but device_info finds no usable one:"
  if grep -q '^cuda built : no$' <<< "$info"; then
    echo "  this build has no CUDA support: configure it where CUDA is found (docs/gpu.md) to run the GPU tests"
  fi
  echo "$info"
  exit 1
fi
echo "skipped: needs a GPU (device_info reports none, and there is no /dev/nvidia0 and no GPU from nvidia-smi -L):"
echo "$info"
exit 77
