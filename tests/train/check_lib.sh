# Shared by the distributed-training check scripts (ddp_check.sh, bn_check.sh); sourced
# after `bin` (the build's bin folder) is set. A scratch folder, and:
#   mpi NP ARGS...        train at NP ranks under mpiexec
#   run NAME CMD...       CMD with --metrics-out/--checkpoint-dir under $work/NAME; its log
#                         is shown and the script fails when it fails
#   cmp_runs A B ARGS...  compare_runs on two runs' losses and final models
#   num TEXT WHAT         TEXT if it is a number, else a failure naming WHAT
#   final_field RUN KEY   KEY=value from RUN's final line (a number)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
mpi() { local np=$1; shift; mpiexec --oversubscribe --bind-to none -n "$np" "$bin/train" "$@"; }
run() { local name=$1; shift; "$@" --metrics-out "$work/$name.jsonl" --checkpoint-dir "$work/$name" > "$work/$name.log" 2>&1 || { cat "$work/$name.log"; exit 1; }; }
cmp_runs() { "$bin/compare_runs" --metrics "$work/$1.jsonl" "$work/$2.jsonl" --model "$work/$1/model.safetensors" "$work/$2/model.safetensors" "${@:3}"; }
# A number read from a log, or a failure naming what is missing (an empty value must
# never pass a comparison).
num() { [[ $1 =~ ^-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$ ]] || { echo "FAIL: $2: '$1' is not a number" >&2; exit 1; }; echo "$1"; }
final_field() { num "$(sed -En "s/^(\[rank 0\] )?final:.* $2=([0-9.eE+-]+).*/\2/p" "$work/$1.log")" "$2 in the final line of $1"; }
