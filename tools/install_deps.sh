#!/usr/bin/env bash
# Installs, from Debian 12's packages, whatever the build, the tests and the data need
# and is not installed yet. Needs root (or sudo). Safe to run again.
set -euo pipefail
pkgs=(build-essential cmake pkg-config openmpi-bin libopenmpi-dev catch2 libopenblas-dev
      libboost-program-options-dev nlohmann-json3-dev zlib1g-dev libfmt-dev
      dataset-fashion-mnist fortunes gnuplot-nox libgloo-dev iproute2 procps libssl-dev
      clang libclang-rt-14-dev python3-torch libtorch-dev python3-pybind11 pybind11-dev python3-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install_deps: installing ${missing[*]}"
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install_deps: everything is installed"
fi
