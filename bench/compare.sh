#!/usr/bin/env bash
# compare.sh: one run that benchmarks, side by side, at 2 and 4 ranks, float32 sum:
#   tcp-shm     our tcp backend, same-host peers over shared memory (COMM_TCP_SHM=1)
#   tcp-noshm   our tcp backend over loopback TCP only (COMM_TCP_SHM=0)
#   mpi-ring    our ring algorithm over the mpi backend (point-to-point only)
#   mpi-tree    our tree algorithm over the mpi backend (allreduce only)
#   mpi-native  Open MPI's own MPI_Allreduce / MPI_Reduce_scatter_block (--algo native)
#   gloo-*      Gloo over its TCP transport (bench/gloo_bench, if libgloo-dev was found):
#               ring_chunked, bcube, halving_doubling; "gloo-best" is the best per size
# for allreduce and reduce_scatter, then writes bench/results/results.md (tables and the
# issue's ratios) and bench/results/busbw.png (gnuplot). Every candidate runs in place
# (as Gloo's algorithms always do, and as DDP's gradient buckets are reduced) and
# blocking (-z 1, as Gloo's and MPI's calls are). The candidates named in ASYNC also run
# in comm_bench's default mode, as "<label>-async": all iterations issued with *_async,
# then waited, the way DDP issues its buckets. Before
# the candidates, bench/physical_limits measures memcpy and loopback TCP bandwidth, the
# ceilings the figures are read against. The candidates are interleaved
# (each repetition runs every candidate once, in turn) and the median is reported, so
# slow phases of a shared machine hit all of them alike.
#   bench/compare.sh [BUILD_DIR]          (default build-bench, then build)
# Environment: REPS (3), ITERS (10), WARMUP (3), MIN (4K), MAX (64M), NPS ("2 4"),
#   OUT (bench/results): where results.md, busbw.png and raw/ go;
#   ASYNC ("tcp-shm mpi-native"): candidates that also run in default mode;
#   ONLY (all): the labels to run, e.g. "tcp-shm tcp-noshm" (gloo's are "gloo-<algo>");
#   REF (none): a second build directory (e.g. one built before a change) whose tcp
#     candidates (REF_LABELS, default "tcp-shm tcp-noshm", and their -async rows) run
#     interleaved with this build's, labelled "<label>@ref".
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-}
if [[ -z "$BUILD" ]]; then BUILD=build-bench; [[ -x $BUILD/bin/comm_bench ]] || BUILD=build; fi
BIN=$BUILD/bin
REPS=${REPS:-3} ITERS=${ITERS:-10} WARMUP=${WARMUP:-3} MIN=${MIN:-4K} MAX=${MAX:-64M} NPS=${NPS:-"2 4"}
ASYNC=${ASYNC-"tcp-shm mpi-native"} ONLY=${ONLY:-} REF=${REF:-} REF_LABELS=${REF_LABELS:-"tcp-shm tcp-noshm"}
OUT=${OUT:-bench/results}
RAW=$OUT/raw
rm -rf "$RAW" && mkdir -p "$RAW"
for b in comm_bench launch physical_limits; do [[ -x $BIN/$b ]] || { echo "compare.sh: $BIN/$b missing (cmake --build $BUILD --target $b)"; exit 1; }; done
if [[ -n $REF ]]; then for b in comm_bench launch; do [[ -x $REF/bin/$b ]] || { echo "compare.sh: REF=$REF has no bin/$b"; exit 1; }; done; fi
HAVE_GLOO=0; [[ -x $BIN/gloo_bench ]] && HAVE_GLOO=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
MPIRUN=(mpirun --oversubscribe --bind-to none)
# -z 1: blocking calls, as Gloo's and MPI's are (nccl-tests' --blocking); every
# candidate is then timed the way a training loop calling it sees it.
SIZES=(-b "$MIN" -e "$MAX" -f 4 -n "$ITERS" -w "$WARMUP" -c 0 --inplace)

listed() { [[ " $1 " == *" $2 "* ]]; }
# run LABEL NP COLL REP command...: rank 0's rows go to raw/LABEL.COLL.npNP.repREP.txt
run() {
  local label=$1 np=$2 coll=$3 rep=$4; shift 4
  local base=${label%@ref}
  [[ -z $ONLY ]] || listed "$ONLY" "${base%-async}" || return 0
  local f="$RAW/$label.$coll.np$np.rep$rep.txt"
  echo "  $label $coll np$np rep$rep"
  if ! "$@" > "$f.full" 2>&1; then echo "compare.sh: $label failed:"; tail -5 "$f.full"; return 1; fi
  sed -e 's/^\[rank 0\] //' "$f.full" | grep -v '^\[rank' > "$f"
  rm -f "$f.full"
}
# bench LABEL NP COLL REP command...: the comm_bench candidate blocking (-z 1), then in
# default mode if ASYNC lists it, then both again from REF's build if REF_LABELS does.
bench() {
  local label=$1 np=$2 coll=$3 rep=$4; shift 4
  local builds=("$BIN") b
  [[ -n $REF ]] && listed "$REF_LABELS" "$label" && builds+=("$REF/bin")
  for b in "${builds[@]}"; do
    local suffix="" cmd=("${@//@BIN@/$b}")
    [[ $b != "$BIN" ]] && suffix="@ref"
    run "$label$suffix" "$np" "$coll" "$rep" "${cmd[@]}" -z 1
    listed "$ASYNC" "$label" && run "$label-async$suffix" "$np" "$coll" "$rep" "${cmd[@]}" -z 0
  done
  return 0
}

echo "compare.sh: $BIN, sizes $MIN..$MAX, $REPS repetition(s), ranks: $NPS, gloo: $HAVE_GLOO, default mode: ${ASYNC:-none}, only: ${ONLY:-all}, reference build: ${REF:-none}"
"$BIN/physical_limits" 2 | tee "$RAW/limits.txt"
for rep in $(seq 1 "$REPS"); do
  for np in $NPS; do
    for coll in allreduce reduce_scatter; do
      # @BIN@: this build's bin, or REF's for the reference rows.
      CB=("@BIN@/comm_bench" "${SIZES[@]}" --coll "$coll" -d float -o sum)
      bench tcp-shm "$np" "$coll" "$rep" env COMM_TCP_SHM=1 "@BIN@/launch" -n "$np" "${CB[@]}" --backend tcp
      bench tcp-noshm "$np" "$coll" "$rep" env COMM_TCP_SHM=0 "@BIN@/launch" -n "$np" "${CB[@]}" --backend tcp
      bench mpi-ring "$np" "$coll" "$rep" "${MPIRUN[@]}" -np "$np" "${CB[@]}" --backend mpi --algo ring
      [[ $coll == allreduce ]] && bench mpi-tree "$np" "$coll" "$rep" "${MPIRUN[@]}" -np "$np" "${CB[@]}" --backend mpi --algo tree
      bench mpi-native "$np" "$coll" "$rep" "${MPIRUN[@]}" -np "$np" "${CB[@]}" --backend mpi --algo native
      if (( HAVE_GLOO )); then
        algos=(halving_doubling)
        [[ $coll == allreduce ]] && algos=(ring_chunked bcube halving_doubling)
        for a in "${algos[@]}"; do
          store=$(mktemp -d)
          run "gloo-$a" "$np" "$coll" "$rep" "$BIN/launch" -n "$np" "$BIN/gloo_bench" --store "$store" \
            -b "$MIN" -e "$MAX" -f 4 -n "$ITERS" -w "$WARMUP" -c 0 --coll "$coll" --algo "$a"
          rm -rf "$store"
        done
      fi
    done
  done
done
python3 bench/summarize.py "$RAW" "$OUT" "$NPS"
gnuplot "$OUT/busbw.gp"
echo "compare.sh: wrote $OUT/results.md and $OUT/busbw.png"
