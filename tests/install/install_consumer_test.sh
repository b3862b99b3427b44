#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, builds a separate project against
# it with find_package(dpt), and runs it. Args: <build dir> <source dir of the consumer>
set -euo pipefail
build=$1
consumer=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
cmake -S "$consumer" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure.log"
cmake --build "$work/build" -j2 > "$work/build.log"
"$work/build/consumer"
