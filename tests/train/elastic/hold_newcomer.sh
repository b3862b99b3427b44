#!/usr/bin/env bash
# hold_newcomer.sh PROGRAM ARGS...: the command elastic_grow.sh gives launch --elastic.
# The process whose DPT_ELASTIC_ID is $HOLD_NEWCOMER_ID (the restarted slot) waits until
# the file $HOLD_NEWCOMER_GO exists before it starts, so it arrives in the job at a point
# the test chose; every other process starts at once. Then it becomes PROGRAM (exec: same
# pid, so launch's signals and exit status are PROGRAM's).
if [[ -n ${HOLD_NEWCOMER_ID:-} && ${DPT_ELASTIC_ID:-} == "$HOLD_NEWCOMER_ID" ]]; then
  for _ in $(seq 1 1200); do
    [[ -e $HOLD_NEWCOMER_GO ]] && exec "$@"
    sleep 0.05
  done
  echo "hold_newcomer.sh: $HOLD_NEWCOMER_GO did not appear within 60 s; $DPT_ELASTIC_ID does not start" >&2
  exit 1
fi
exec "$@"
