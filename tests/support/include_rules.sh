#!/usr/bin/env bash
# The layering of docs/architecture.md, checked on the sources: no arrow runs upward.
#   device/          includes nothing of the project but device/
#   comm/            nothing of backends/ and the layers above
#   backends/        nothing of models/, data/ and the layers above
#   models/, data/   nothing of comm/, backends/ or anything above them; inside models/:
#     kernels/       nothing of nn/, io/, zoo/ (how a product runs, not what a layer is)
#     kernels/cuda/  nothing of kernels/cpu/ (the CPU side calls the device, never back)
#     nn/            nothing of io/, zoo/
#     io/            nothing of zoo/
#     and no folder of models/ with more than 30 source files directly in it
#   optim/           nothing of comm/, backends/ (it knows nothing of ranks) or above
#   parallel/        no trainer (train/), no program (tools/); its root neither ddp/ nor zero/
#   train/           no program (tools/), no binding
#   PyTorch's headers (torch/, ATen/, c10/) only in bindings/
# An include counts in every spelling a compiler accepts: "comm/x.h", <comm/x.h>, relative
# ones ("../comm/x.h", "../../nn/tensor.h") and a quoted name found next to the including
# file ("layers/linear.h" from models/nn/): each is resolved to a path from the repository
# root before the rules are read. A checked folder that is missing or holds no source file
# fails too (a renamed folder must not turn a rule off).
# Usage: include_rules.sh SOURCE_DIR   prints every offending line; exit 1 if any
#        include_rules.sh --selftest   plants one forbidden include of each spelling and of
#                                      each layer in a scratch tree; each must be caught
set -u
if [[ ${1:-} == --selftest ]]; then
  self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  for d in device comm backends models/kernels/cpu models/kernels/cuda models/nn models/nn/layers \
           models/io models/zoo data optim parallel parallel/ddp parallel/zero train tools bindings; do
    mkdir -p "$tmp/$d" && echo '#include "'"$d"'/ok.h"' > "$tmp/$d/ok.cpp"
  done
  echo '#include "models/kernels/cuda/gpu_ops.h"' > "$tmp/models/kernels/cpu/calls_device.cpp"
  echo '#include "layers/ok.h"' > "$tmp/models/nn/same_dir.cpp"
  "$self" "$tmp" > "$tmp/clean.log" || { echo "selftest: a clean tree fails:"; cat "$tmp/clean.log"; exit 1; }
  bad=0
  for plant in 'models/nn/a.cpp:#include "comm/communicator.h"' 'models/zoo/b.h:#include <comm/types.h>' \
               'models/io/c.cpp:#include "../../comm/types.h"' 'data/d.cpp:  #  include "../backends/registry.h"' \
               'models/kernels/cpu/e.cpp:#include "models/nn/tensor.h"' \
               'models/kernels/cpu/e2.cpp:#include "../../nn/tensor.h"' \
               'models/kernels/cuda/e3.cu:#include <models/zoo/models.h>' \
               'models/kernels/cuda/e4.cuh:#include "../cpu/gemm.h"' \
               'models/nn/f.cpp:#include "models/zoo/gpt2.h"' 'models/nn/layers/f2.h:#include "../../io/checkpoint.h"' \
               'models/io/g.cpp:#include "models/zoo/models.h"' \
               'comm/h.cpp:#include "models/nn/tensor.h"' 'device/i.cpp:#include <comm/types.h>' \
               'parallel/j.cpp:#include "train/dist_trainer.h"' 'parallel/k.cpp:#include "parallel/zero/zero.h"' \
               'optim/l.cpp:#include "comm/communicator.h"' 'backends/m.cpp:#include "models/nn/tensor.h"' \
               'train/n.cpp:#include "api/cli/cli.h"' 'models/zoo/o.cpp:#include <torch/torch.h>'; do
    file=${plant%%:*} line=${plant#*:}
    echo "$line" > "$tmp/$file"
    if "$self" "$tmp" > "$tmp/out.log"; then echo "selftest: not caught: $file: $line"; bad=1
    else echo "selftest: caught $file: $line"; fi
    rm "$tmp/$file"
  done
  # A layer that grows past 30 files in one folder.
  for i in $(seq 1 31); do echo '#pragma once' > "$tmp/models/zoo/m$i.h"; done
  if "$self" "$tmp" > "$tmp/out.log"; then echo "selftest: 31 files in models/zoo/ not caught"; bad=1
  else echo "selftest: caught $(grep -m1 'source files' "$tmp/out.log")"; fi
  rm "$tmp"/models/zoo/m*.h
  for gone in optim models/io; do
    mv "$tmp/$gone" "$tmp/moved"
    if "$self" "$tmp" > "$tmp/out.log"; then echo "selftest: a missing folder ($gone/) is not caught"; bad=1
    else echo "selftest: caught the missing folder: $(grep -m1 "^$gone/" "$tmp/out.log")"; fi
    mv "$tmp/moved" "$tmp/$gone"
  done
  exit $bad
fi
src=${1:?usage: include_rules.sh SOURCE_DIR | --selftest}
cd "$src" || exit 1
bad=0
all=$(find . \( -path ./build -o -path ./third_party -o -path ./shared -o -path './.*' \) -prune -o \
        -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) -print | sed 's#^\./##' | sort)
# FILE:LINE:TARGET for every include of every source, TARGET resolved from the repository
# root: "../x" and "./x" against the including file's folder; a quoted name that exists next
# to the including file is that file (the compiler looks there first); else as written.
index=$(echo "$all" | xargs awk -v known="$all" '
  BEGIN { n = split(known, k, "\n"); for (i = 1; i <= n; i++) have[k[i]] = 1 }
  function dir(p) { return p ~ /\// ? substr(p, 1, match(p, /\/[^\/]*$/) - 1) : "" }
  /^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]/ {
    line = $0; sub(/^[[:space:]]*#[[:space:]]*include[[:space:]]*/, "", line)
    quoted = substr(line, 1, 1) == "\""
    p = substr(line, 2); sub(/[">].*$/, "", p)
    d = dir(FILENAME)
    if (p ~ /^\.\.?\//) {
      while (p ~ /^\.\.?\//) { if (p ~ /^\.\.\//) d = dir(d); p = substr(p, index(p, "/") + 1) }
      p = (d == "" ? p : d "/" p)
    } else if (quoted && d != "" && ((d "/" p) in have)) {
      p = d "/" p
    }
    print FILENAME ":" FNR ":" p
  }')
check() {  # folder [:1 = its own files only], then a regex of the folders it must not include
  local dir=$1 depth=99
  [[ $dir == *:* ]] && { depth=${dir#*:}; dir=${dir%%:*}; }
  local mine
  if ((depth == 1)); then mine=$(echo "$all" | grep -E "^$dir/[^/]+$")
  else mine=$(echo "$all" | grep -E "^$dir/"); fi
  if [[ -z $mine ]]; then
    echo "$dir/: missing or without sources: the rules for it check nothing (renamed? update include_rules.sh)"
    bad=1
    return
  fi
  local hits
  if ((depth == 1)); then hits=$(echo "$index" | grep -E "^$dir/[^/:]+:[0-9]+:($2)/")
  else hits=$(echo "$index" | grep -E "^$dir/[^:]+:[0-9]+:($2)/"); fi
  if [[ -n $hits ]]; then
    echo "$dir/ must not include $(echo "$2" | sed 's:|:/ :g')/ (FILE:LINE:the include, resolved):"
    echo "$hits"
    bad=1
  fi
}
above_models='comm|backends|optim|parallel|train|tools|bindings'
check device 'comm|backends|models|data|optim|parallel|train|tools|bindings'
check comm 'backends|models|data|optim|parallel|train|tools|bindings'
check backends 'models|data|optim|parallel|train|tools|bindings'
check models "$above_models"
check models/kernels/cpu "models/nn|models/io|models/zoo|$above_models"
check models/kernels/cuda "models/kernels/cpu|models/nn|models/io|models/zoo|$above_models"
check models/nn "models/io|models/zoo|$above_models"
check models/io "models/zoo|$above_models"
check models/zoo "$above_models"
check data "$above_models"
check optim 'comm|backends|parallel|train|tools|bindings'
check parallel 'train|tools|bindings'
check parallel:1 'parallel/ddp|parallel/zero'
check train 'tools|bindings'
hits=$(echo "$index" | grep -vE '^(bindings|tests|bench)/' | grep -E ':[0-9]+:(torch|ATen|c10)/')
[[ -n $hits ]] && { echo "only bindings/ includes PyTorch's headers:"; echo "$hits"; bad=1; }
crowded=$(echo "$all" | grep '^models/' | xargs -n1 dirname | sort | uniq -c | awk '$1 > 30')
[[ -n $crowded ]] && { echo "a folder of models/ with more than 30 source files directly in it (split it by what changes together):"; echo "$crowded"; bad=1; }
((bad == 0)) && echo "include rules hold: device/ < comm/ < backends/; models/ (kernels/ < nn/ < io/ < zoo/, kernels/cuda/ without kernels/cpu/), data/, optim/ without comm/; parallel/ without train/, its root without ddp/ and zero/; PyTorch only in bindings/; no folder of models/ over 30 source files"
exit $bad
