#!/bin/sh
# The layering of docs/architecture.md, checked on the sources: no arrow runs upward.
#   device/          includes nothing of the project but device/
#   comm/            nothing of backends/ and the layers above
#   models/, data/   nothing of comm/ (or anything above them)
# Usage: include_rules.sh SOURCE_DIR. Prints every offending line; exit 1 if any.
set -u
src=$1
bad=0
check() {  # folder, then a regex of the project folders it must not include
  hits=$(cd "$src" && grep -rnE "^[[:space:]]*#[[:space:]]*include[[:space:]]*\"($2)/" "$1" 2>/dev/null)
  if [ -n "$hits" ]; then
    echo "$1/ must not include $(echo "$2" | sed 's:|:/ :g')/:"
    echo "$hits"
    bad=1
  fi
}
check device 'comm|backends|models|data|optim|parallel|train|tools|bindings'
check comm 'backends|models|data|optim|parallel|train|tools|bindings'
check models 'comm|backends|optim|parallel|train|tools|bindings'
check data 'comm|backends|optim|parallel|train|tools|bindings'
[ "$bad" = 0 ] && echo "include rules hold: device/ < comm/ < backends/; models/, data/ without comm/"
exit $bad
