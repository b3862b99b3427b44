#!/usr/bin/env bash
# The installed package as a user meets it: `cmake --install` into a scratch prefix, then
#   1. only the public API's headers are there (include/dpt/*.h and the generated
#      version.h): no internal header (comm/, models/, ...) is installed;
#   2. each public header compiles on its own with nothing but that prefix on the include path;
#   3. the programs of docs/library.md (examples/) build with find_package(dpt) and run:
#      the tutorial's demos on 2 ranks under mpirun (where MPI is built) and under the
#      installed launch, the custom layer alone, the residual network with a backend switch,
#      and a model and data of the user's through dpt::train_main.
# Args: <build dir> <source dir> <ON|OFF: this build has the mpi backend>
set -euo pipefail
build=$1
src=$2
have_mpi=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work/install.log"

# 1. Exactly the public headers.
expected=$( (cd "$src/include" && find dpt -name '*.h'; echo dpt/version.h) | sort)
installed=$(cd "$prefix/include" && find . -type f | sed 's#^\./##' | sort)
if [[ "$installed" != "$expected" ]]; then
  echo "FAIL: the installed headers are not exactly include/dpt's:"
  diff <(echo "$expected") <(echo "$installed") | sed 's/^/  /'
  exit 1
fi
echo "installed headers ($(echo "$installed" | wc -l)), all public: $(echo $installed)"

# 2. Each alone.
for h in $installed; do
  printf '#include <%s>\nint main() { return 0; }\n' "$h" > "$work/alone.cpp"
  if ! c++ -std=c++20 -Wall -Wextra -Werror -fsyntax-only -I"$prefix/include" "$work/alone.cpp" 2> "$work/alone.log"; then
    echo "FAIL: <$h> does not compile on its own:"; sed 's/^/  /' "$work/alone.log" | head -20; exit 1
  fi
done
echo "each public header compiles on its own"

# 3. The documented programs, built against the installed package.
cmake -S "$src/examples" -B "$work/examples" -DCMAKE_PREFIX_PATH="$prefix" > "$work/configure.log"
cmake --build "$work/examples" -j2 > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
for p in ddp_basic ddp_checkpoint; do
  echo "$p.cpp: $(grep -cv '^[[:space:]]*$' "$src/examples/$p.cpp") non-blank lines"
done
export TMPDIR=$work COMM_TIMEOUT_S=60 COMM_RENDEZVOUS_TIMEOUT_S=60
run() {  # a command whose output must contain a text
  local want=$1; shift
  local out
  out=$(timeout 120 "$@" 2>&1) || { echo "FAIL: $*"; echo "$out" | tail -20; exit 1; }
  grep -q "$want" <<< "$out" || { echo "FAIL: $*: no '$want' in:"; echo "$out" | tail -20; exit 1; }
  echo "ok: $*"
}
if [[ $have_mpi == ON ]]; then
  mpi=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe --bind-to none -np 2)
  run "Finished running basic DDP example on rank 1" "${mpi[@]}" "$work/examples/ddp_basic"
  run "Finished running DDP checkpoint example on rank 1" "${mpi[@]}" "$work/examples/ddp_checkpoint"
  run "switched to tcp" "${mpi[@]}" "$work/examples/residual_ddp" --switch-to tcp
else
  echo "this build has no mpi backend: the mpirun runs are left out"
fi
run "Finished running basic DDP example on rank 1" "$prefix/bin/launch" -n 2 "$work/examples/ddp_basic"
run "Finished running DDP checkpoint example on rank 1" "$prefix/bin/launch" -n 2 "$work/examples/ddp_checkpoint"
run "gradcheck: passed" "$work/examples/custom_layer"
run "steps=5 world_size=2" "$prefix/bin/launch" -n 2 "$work/examples/train_residual" --steps 5 --max-eval-samples 64
echo "library programs: all passed"
