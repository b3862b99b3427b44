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
#   switch_traffic RUN OLD NEW AT STEPS [WIRE]
#                         the backend switch proven by the bytes each backend carried
#                         (comm/traffic.h): RUN switched from OLD to NEW after step AT of
#                         STEPS; WIRE bytes per gradient element (4 fp32, 2 bf16). OLD
#                         carried at least the first AT steps' gradients and not one byte
#                         after the switch (its count in the switch line equals the final
#                         line's); NEW carried at least the other steps' gradients, and at
#                         most 2x that plus 1 MiB (parameter refreshes, losses, evaluation).
switch_traffic() {
  local run=$1 old=$2 new=$3 at=$4 steps=$5 wire=${6:-4} log=$work/$1.log line params
  params=$(num "$(sed -En 's/.*\(([0-9]+) parameters, .*/\1/p' "$log" | head -1)" "the parameter count in $run's log")
  line=$(grep "^switched to backend $new after step $at ($old retired after carrying " "$log") ||
    { echo "FAIL: $run did not log the switch from $old to $new after step $at with $old's bytes"; cat "$log"; exit 1; }
  local old_sent_at old_recv_at old_sent old_recv new_sent
  old_sent_at=$(num "$(sed -En 's/.* carrying ([0-9]+) bytes sent, ([0-9]+) received\)$/\1/p' <<< "$line")" "$old's bytes sent at the switch")
  old_recv_at=$(num "$(sed -En 's/.* carrying ([0-9]+) bytes sent, ([0-9]+) received\)$/\2/p' <<< "$line")" "$old's bytes received at the switch")
  old_sent=$(final_field "$run" "sent_bytes_$old")
  old_recv=$(final_field "$run" "recv_bytes_$old")
  new_sent=$(final_field "$run" "sent_bytes_$new")
  echo "$run: $params parameters; $old sent $old_sent_at bytes up to step $at and $old_sent at the end (received $old_recv_at, $old_recv);" \
       "$new sent $new_sent in steps $((at + 1))-$steps (gradients alone: $((params * wire * (steps - at))))"
  [[ $old_sent == "$old_sent_at" && $old_recv == "$old_recv_at" ]] ||
    { echo "FAIL: $old carried bytes after the switch (sent $old_sent_at -> $old_sent, received $old_recv_at -> $old_recv)"; exit 1; }
  awk -v p="$params" -v w="$wire" -v a="$at" -v s="$steps" -v o="$old_sent" -v n="$new_sent" 'BEGIN {
    g = p * w; if (o < g * a) { print "FAIL: the first backend sent " o " bytes, less than " a " steps of gradients (" g * a ")"; exit 1 }
    if (n < g * (s - a)) { print "FAIL: the second backend sent " n " bytes, less than " s - a " steps of gradients (" g * (s - a) ")"; exit 1 }
    if (n > 2 * g * (s - a) + 1048576) { print "FAIL: the second backend sent " n " bytes, over 2x the gradients + 1 MiB"; exit 1 } }'
}
