#!/usr/bin/env bash
# The layering of docs/architecture.md, checked on the sources: no arrow runs upward.
#   device/          includes nothing of the project but device/
#   comm/            nothing of backends/ and the layers above
#   backends/        nothing of models/, data/ and the layers above
#   models/, data/   nothing of comm/, backends/ or anything above them
#   optim/           nothing of comm/, backends/ (it knows nothing of ranks) or above
#   parallel/        no trainer (train/), no program (tools/); its root neither ddp/ nor zero/
#   train/           no program (tools/), no binding
#   PyTorch's headers (torch/, ATen/, c10/) only in bindings/
# An include counts in every spelling a compiler accepts: "comm/x.h", <comm/x.h>, and
# relative ones ("../comm/x.h", "../../comm/x.h"). A checked folder that is missing or
# holds no source file fails too (a renamed folder must not turn a rule off).
# Usage: include_rules.sh SOURCE_DIR   prints every offending line; exit 1 if any
#        include_rules.sh --selftest   plants one forbidden include of each spelling in a
#                                      scratch tree and checks that each is caught
set -u
if [[ ${1:-} == --selftest ]]; then
  self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  for d in device comm backends models data optim parallel parallel/ddp parallel/zero train tools bindings; do
    mkdir -p "$tmp/$d" && echo '#include "'"$d"'/ok.h"' > "$tmp/$d/ok.cpp"
  done
  "$self" "$tmp" > "$tmp/clean.log" || { echo "selftest: a clean tree fails:"; cat "$tmp/clean.log"; exit 1; }
  bad=0
  for plant in 'models/a.cpp:#include "comm/communicator.h"' 'models/b.h:#include <comm/types.h>' \
               'models/c.cpp:#include "../comm/types.h"' 'data/d.cpp:  #  include "../../backends/registry.h"' \
               'comm/e.cpp:#include "models/tensor.h"' 'device/f.cpp:#include <comm/types.h>' \
               'parallel/g.cpp:#include "train/dist_trainer.h"' 'parallel/h.cpp:#include "parallel/zero/zero.h"' \
               'optim/i.cpp:#include "comm/communicator.h"' 'backends/j.cpp:#include "models/tensor.h"' \
               'train/k.cpp:#include "tools/cli.h"' 'models/l.cpp:#include <torch/torch.h>'; do
    file=${plant%%:*} line=${plant#*:}
    echo "$line" > "$tmp/$file"
    if "$self" "$tmp" > "$tmp/out.log"; then echo "selftest: not caught: $file: $line"; bad=1
    else echo "selftest: caught $file: $line"; fi
    rm "$tmp/$file"
  done
  rm -rf "$tmp/optim"
  if "$self" "$tmp" > "$tmp/out.log"; then echo "selftest: a missing folder (optim/) is not caught"; bad=1
  else echo "selftest: caught the missing folder: $(grep -m1 optim "$tmp/out.log")"; fi
  exit $bad
fi
src=${1:?usage: include_rules.sh SOURCE_DIR | --selftest}
bad=0
sources() { find "$1" -maxdepth "${2:-99}" -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \); }
check() {  # folder [depth], then a regex of the folders its sources must not include
  local dir=$1 depth=99
  [[ $dir == *:* ]] && { depth=${dir#*:}; dir=${dir%%:*}; }
  if [[ ! -d $src/$dir ]] || [[ -z $(cd "$src" && sources "$dir" "$depth" | head -1) ]]; then
    echo "$dir/: missing or without sources: the rules for it check nothing (renamed? update include_rules.sh)"
    bad=1
    return
  fi
  local hits
  hits=$(cd "$src" && sources "$dir" "$depth" | xargs grep -nE "^[[:space:]]*#[[:space:]]*include[[:space:]]*[\"<](\.\./)*($2)/" /dev/null)
  if [[ -n $hits ]]; then
    echo "$dir/ must not include $(echo "$2" | sed 's:|:/ :g')/:"
    echo "$hits"
    bad=1
  fi
}
above_models='comm|backends|optim|parallel|train|tools|bindings'
check device 'comm|backends|models|data|optim|parallel|train|tools|bindings'
check comm 'backends|models|data|optim|parallel|train|tools|bindings'
check backends 'models|data|optim|parallel|train|tools|bindings'
check models "$above_models"
check data "$above_models"
check optim 'comm|backends|parallel|train|tools|bindings'
check parallel 'train|tools|bindings'
check parallel:1 'parallel/ddp|parallel/zero'
check train 'tools|bindings'
for d in device comm backends models data optim parallel train tools; do
  [[ -d $src/$d ]] || continue
  hits=$(cd "$src" && sources "$d" | xargs grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](torch|ATen|c10)/' /dev/null)
  [[ -n $hits ]] && { echo "only bindings/ includes PyTorch's headers:"; echo "$hits"; bad=1; }
done
((bad == 0)) && echo "include rules hold: device/ < comm/ < backends/; models/, data/, optim/ without comm/; parallel/ without train/, its root without ddp/ and zero/; PyTorch only in bindings/"
exit $bad
