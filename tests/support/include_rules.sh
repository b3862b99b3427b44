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
#   optim/           nothing of comm/, backends/ (it knows nothing of ranks) or above
#   parallel/        no trainer (train/), no program (tools/); its root neither ddp/ nor zero/
#   train/           no program (tools/), no binding, nothing of the public API (api/, dpt/)
#   api/             no program, no binding (the public API's implementation, above train/)
#   include/dpt/     the public headers: nothing of the project's folders (self-contained);
#                    examples/, tests/library/ and tools/train.cpp likewise (users of it alone)
#   PyTorch's headers (torch/, ATen/, c10/) only in bindings/ (and the tests, benchmarks and
#   examples/libtorch/ programs written with libtorch)
#   every folder of the sources (the tree but build/, third_party/, shared/ and hidden
#   folders; tests/ and bench/ included): at most 30 source files (.h .cpp .cu .cuh and
#   CMakeLists.txt) directly in it; a fuller one is split by what changes together
# An include counts in every spelling a compiler accepts: "comm/x.h", <comm/x.h>, relative
# ones ("../comm/x.h", "../../nn/tensor.h") and a quoted name found next to the including
# file ("layers/linear.h" from models/nn/): each is resolved to a path from the repository
# root before the rules are read. A checked folder that is missing or holds no source file
# fails too (a renamed folder must not turn a rule off).
# Usage: include_rules.sh SOURCE_DIR   prints every offending line; exit 1 if any
#        include_rules.sh --selftest   plants one forbidden include of each spelling and of
#                                      each layer, a missing folder and 31-file folders
#                                      (models/zoo/, comm/, comm/launch/) in a scratch tree;
#                                      each must be caught (and 30 files must pass)
set -u
if [[ ${1:-} == --selftest ]]; then
  self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  for d in device comm backends models/kernels/cpu models/kernels/cuda models/nn models/nn/layers \
           models/io models/zoo data optim parallel parallel/ddp parallel/zero train api include/dpt examples \
           tests/library tools bindings; do
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
               'train/n.cpp:#include "tools/launch/job.h"' 'models/zoo/o.cpp:#include <torch/torch.h>' 'examples/o2.cpp:#include <torch/torch.h>' \
               'include/dpt/p.h:#include "comm/communicator.h"' 'include/dpt/p2.h:#include "api/model_impl.h"' \
               'examples/q.cpp:#include "models/nn/module.h"' 'tests/library/q2.cpp:#include "train/dist_trainer.h"' \
               'tools/train.cpp:#include "train/dist_trainer.h"' 'models/nn/r.cpp:#include <dpt/nn.h>' \
               'train/r2.cpp:#include "api/user_module.h"' 'api/s.cpp:#include "tools/launch/job.h"'; do
    file=${plant%%:*} line=${plant#*:}
    echo "$line" > "$tmp/$file"
    if "$self" "$tmp" > "$tmp/out.log"; then echo "selftest: not caught: $file: $line"; bad=1
    else echo "selftest: caught $file: $line"; fi
    rm "$tmp/$file"
  done
  # A layer that grows past 30 files in one folder.
  for i in $(seq 1 31); do echo '#pragma once' > "$tmp/models/zoo/m$i.h"; done
  if "$self" "$tmp" > "$tmp/out.log"; then echo "selftest: 31 files in models/zoo/ not caught"; bad=1
  else echo "selftest: caught models/zoo/ over 30 files:$(grep -m1 ' models/zoo$' "$tmp/out.log")"; fi
  rm "$tmp"/models/zoo/m*.h
  # ...and so does every other folder: comm/ with 29 headers, ok.cpp and a CMakeLists.txt
  # (which counts), 30 without the CMakeLists.txt (passes), and a new subfolder of comm/.
  for i in $(seq 1 29); do echo '#pragma once' > "$tmp/comm/c$i.h"; done
  echo 'add_library(x)' > "$tmp/comm/CMakeLists.txt"
  if "$self" "$tmp" > "$tmp/out.log"; then echo "selftest: 31 files in comm/ not caught"; bad=1
  else echo "selftest: caught 31 files in comm/:$(grep -m1 ' comm$' "$tmp/out.log")"; fi
  rm "$tmp/comm/CMakeLists.txt"
  "$self" "$tmp" > "$tmp/out.log" || { echo "selftest: 30 files in comm/ fail:"; cat "$tmp/out.log"; bad=1; }
  rm "$tmp"/comm/c*.h
  mkdir "$tmp/comm/launch"
  for i in $(seq 1 31); do echo '#pragma once' > "$tmp/comm/launch/l$i.h"; done
  if "$self" "$tmp" > "$tmp/out.log"; then echo "selftest: 31 files in comm/launch/ not caught"; bad=1
  else echo "selftest: caught 31 files in comm/launch/:$(grep -m1 ' comm/launch$' "$tmp/out.log")"; fi
  rm -r "$tmp/comm/launch"
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
# The public API (include/dpt, its implementation api/) sits above train/: nothing below
# includes it (a public header, "dpt/...", resolves to the folder dpt).
above_models='comm|backends|optim|parallel|train|api|dpt|tools|bindings'
check device 'comm|backends|models|data|optim|parallel|train|api|dpt|tools|bindings'
check comm 'backends|models|data|optim|parallel|train|api|dpt|tools|bindings'
check backends 'models|data|optim|parallel|train|api|dpt|tools|bindings'
check models "$above_models"
check models/kernels/cpu "models/nn|models/io|models/zoo|$above_models"
check models/kernels/cuda "models/kernels/cpu|models/nn|models/io|models/zoo|$above_models"
check models/nn "models/io|models/zoo|$above_models"
check models/io "models/zoo|$above_models"
check models/zoo "$above_models"
check data "$above_models"
check optim 'comm|backends|parallel|train|api|dpt|tools|bindings'
check parallel 'train|api|dpt|tools|bindings'
check parallel:1 'parallel/ddp|parallel/zero'
check train 'api|dpt|tools|bindings'
check api 'tools|bindings'
# The public line: the installed headers include each other and the standard library only,
# and the code written as a user writes it (examples/, tests/library/, train's main)
# includes nothing else of the project either.
internal='device|comm|backends|models|data|optim|parallel|train|api|tools|bindings'
check include/dpt "$internal"
check examples "$internal"
check tests/library "$internal|tests/support"
hits=$(echo "$index" | grep -E "^tools/train\.cpp:[0-9]+:($internal)/")
[[ -n $hits ]] && { echo "tools/train.cpp is a user of the public API: it includes <dpt/...> only:"; echo "$hits"; bad=1; }
hits=$(echo "$index" | grep -vE '^(bindings|tests|bench|examples/libtorch)/' | grep -E ':[0-9]+:(torch|ATen|c10)/')
[[ -n $hits ]] && { echo "only bindings/ includes PyTorch's headers:"; echo "$hits"; bad=1; }
# Every folder of the sources: at most 30 source files directly in it, CMakeLists.txt included.
counted=$(find . \( -path ./build -o -path ./third_party -o -path ./shared -o -path './.*' \) -prune -o -type f \
            \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' -o -name CMakeLists.txt \) -print | sed 's#^\./##')
crowded=$(echo "$counted" | awk 'NF { d = $0; if (!sub(/\/[^\/]*$/, "", d)) d = "."; n[d]++ }
                                 END { for (d in n) if (n[d] > 30) printf "%7d %s\n", n[d], d }' | sort -k2)
[[ -n $crowded ]] && { echo "a folder with more than 30 source files (.h .cpp .cu .cuh, CMakeLists.txt) directly in it (split it by what changes together):"; echo "$crowded"; bad=1; }
((bad == 0)) && echo "include rules hold: device/ < comm/ < backends/; models/ (kernels/ < nn/ < io/ < zoo/, kernels/cuda/ without kernels/cpu/), data/, optim/ without comm/; parallel/ without train/, its root without ddp/ and zero/; PyTorch only in bindings/; the public API (include/dpt) above train/, self-contained, and examples/, tests/library/ and train's main on it alone; no folder over 30 source files"
exit $bad
