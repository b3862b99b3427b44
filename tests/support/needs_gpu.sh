#!/usr/bin/env bash
# Runs a GPU test's command, or exits 77 (CTest: skipped) with the reason where this
# machine has no usable GPU, as build/bin/device_info reports it.
# usage: needs_gpu.sh DEVICE_INFO COMMAND [ARGS...]
info=$("$1" 2>&1)
if [[ $? -ne 0 ]]; then
  echo "skipped: needs a GPU"; echo "$info"
  exit 77
fi
shift
exec "$@"
