#!/usr/bin/env bash
# Allreduce across emulated hosts (bench/cluster.sh): hierarchical vs the flat ring vs
# the tree, with block and round-robin (cyclic) rank numbering, every host's link shaped
# to RATE. For each run the bytes every host sent over its link are read from its
# interface and compared with the algorithm's formula (payload; TCP/IP headers add a
# few percent):
#   hierarchical   2 (H-1)/H x N per host, whatever the numbering
#   ring, block    2 (P-1)/P x N per host (one ring link leaves each host)
#   ring, cyclic   L x 2 (P-1)/P x N per host (every ring link leaves its host)
# --mpi adds Open MPI's own allreduce (mpi-native: comm_bench --backend mpi --algo native,
# MPI_Iallreduce) and our hierarchical one on the mpi backend (mpi-hierarchical), both
# started by mpirun across the same namespaces (cluster_mpirun), block numbering as
# --map-by slot and cyclic as --map-by node; any ALGOS entry mpi-A runs --algo A that way.
#
#   bench/hierarchical.sh [--mpi] BUILD_BIN [OUT_DIR]
#   env: HOSTS="4 8" LOCAL=2 RATE=1gbit ORDERS="block cyclic" ALGOS="hierarchical ring tree"
#        (+ "mpi-native mpi-hierarchical" with --mpi) MPIRUN=mpirun
#        MIN=4K MAX=64M ITERS=5 REPS=3 BYTES_SIZE=16M (the size of the bytes-per-host check)
# An ALGOS entry ALGO+VAR=VALUE runs --algo ALGO with VAR=VALUE in its environment (e.g.
# hierarchical+COMM_HIERARCHICAL_PIECE_BYTES=0: the hierarchical allreduce unpipelined).
# Each repetition runs every (order, algorithm) sweep in turn; the table shows the median.
# Needs root for the namespaces; exits 77 with the reason otherwise.
set -uo pipefail
with_mpi=0
[[ ${1:-} == --mpi ]] && { with_mpi=1; shift; }
bin=$(cd "${1:?usage: hierarchical.sh [--mpi] BUILD_BIN [OUT_DIR]}" && pwd)
out=${2:-$(mktemp -d /tmp/hierarchical.XXXXXX)}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
source "$here/cluster.sh"
HOSTS=${HOSTS:-4 8} LOCAL=${LOCAL:-2} RATE=${RATE:-1gbit} ORDERS=${ORDERS:-block cyclic}
ALGOS=${ALGOS:-hierarchical ring tree$( ((with_mpi)) && echo " mpi-native mpi-hierarchical")} MIN=${MIN:-4K} MAX=${MAX:-64M} ITERS=${ITERS:-5} BYTES_SIZE=${BYTES_SIZE:-16M} REPS=${REPS:-3}
export COMM_JOB_TOKEN=${COMM_JOB_TOKEN:-hierarchical-bench-$$-secret} COMM_RENDEZVOUS_TIMEOUT_S=60 COMM_TIMEOUT_S=300
port=$((20000 + $$ % 20000))
if [[ $ALGOS == *mpi-* ]] && ! command -v "${MPIRUN:-mpirun}" >/dev/null; then
  echo "hierarchical.sh: the mpi-* algorithms need Open MPI's mpirun: none on PATH (set MPIRUN)" >&2
  exit 1
fi

# run_job H ORDER ALGO LOG ARGS...: comm_bench on every host (launch per host, or one
# mpirun for mpi-ALGO), rank 0's output to LOG; prints the bytes each host sent, space
# separated.
run_job() {
  local H=$1 order=$2 algo=$3 log=$4 i before=() after=() setting=()
  shift 4
  if [[ $algo == *+*=* ]]; then setting=("${algo#*+}"); algo=${algo%%+*}; fi
  port=$((port + 1))
  for ((i = 0; i < H; i++)); do before[i]=$(cluster_tx_bytes $i); done
  local rc=0
  if [[ $algo == mpi-* ]]; then
    local map=slot
    [[ $order == cyclic ]] && map=node
    (((${#setting[@]})) && export "${setting[@]}"
     cluster_mpirun "$LOCAL" -n $((H * LOCAL)) --map-by $map "$bin/comm_bench" --backend mpi --algo "${algo#mpi-}" "$@" \
      >"$log.h0" 2>&1) || rc=1
  else
    (((${#setting[@]})) && export "${setting[@]}"
     cluster_launch "$bin" "$LOCAL" "$order" "$port" "$log" "$bin/comm_bench" --backend tcp --algo "$algo" "$@") || rc=1
  fi
  cp "$log.h0" "$log"
  for ((i = 0; i < H; i++)); do after[i]=$(cluster_tx_bytes $i); done
  ((rc == 0)) || { echo "FAIL: $algo $order on $H hosts:"; tail -n 5 "$log".h*; return 1; }
  for ((i = 0; i < H; i++)); do printf '%s ' $((after[i] - before[i])); done
}

bytes_of() { numfmt --from=iec "$1"; }

for H in $HOSTS; do
  cluster_up "$H" "$RATE" || exit $?
  P=$((H * LOCAL))
  echo "== $H hosts x $LOCAL ranks ($P ranks), links $RATE, allreduce float sum, $ITERS iterations"
  # Interleaved: each repetition runs every (order, algo) sweep in turn.
  for ((rep = 1; rep <= REPS; rep++)); do
    for order in $ORDERS; do
      for algo in $ALGOS; do
        log=$out/sweep.h$H.$order.$algo.r$rep.txt
        run_job "$H" "$order" "$algo" "$log" -b "$MIN" -e "$MAX" -f 4 -n "$ITERS" -w 1 -c 1 >/dev/null || exit 1
      done
    done
  done
  printf '%-10s' size
  for order in $ORDERS; do for algo in $ALGOS; do printf ' %23s' "$algo/$order"; done; done
  echo "   (ms, median of $REPS; slowest rank's mean)"
  for size in $(awk '/^ *[0-9]/{print $1}' "$out/sweep.h$H.${ORDERS%% *}.${ALGOS%% *}.r1.txt"); do
    printf '%-10s' "$size"
    for order in $ORDERS; do
      for algo in $ALGOS; do
        t=$(cat "$out"/sweep.h$H.$order.$algo.r*.txt | awk -v s="$size" '$1 == s {print $6}' | sort -g |
            awk '{v[NR] = $1} END {printf "%.3f", v[int((NR + 1) / 2)] / 1000}')
        printf ' %23s' "$t"
      done
    done
    echo
  done
  # Bytes per host for one size, against the formula.
  n=$(bytes_of "$BYTES_SIZE")
  echo "bytes each host sent for $ITERS+1 allreduces of $BYTES_SIZE (measured / formula):"
  for order in $ORDERS; do
    for algo in hierarchical ring $( ((with_mpi)) && echo mpi-hierarchical mpi-native); do
      sent=$(run_job "$H" "$order" "$algo" "$out/bytes.h$H.$order.$algo.txt" -b "$BYTES_SIZE" -e "$BYTES_SIZE" -n "$ITERS" -w 1 -c 0) || exit 1
      case $algo/$order in
        mpi-native/*)  # no formula: the algorithm is Open MPI's choice
          printf '  %-23s MiB each host sent: %s\n' "$algo/$order" \
            "$(for s in $sent; do awk -v s=$s -v k=$((ITERS + 1)) 'BEGIN{printf "%.1f ", s / k / 1048576}'; done)(per allreduce)"
          continue ;;
        *hierarchical/*) want=$(awk -v n=$n -v h=$H 'BEGIN{print 2*(h-1)/h*n}') ;;
        ring/block) want=$(awk -v n=$n -v p=$P 'BEGIN{print 2*(p-1)/p*n}') ;;
        ring/cyclic) want=$(awk -v n=$n -v p=$P -v l=$LOCAL 'BEGIN{print l*2*(p-1)/p*n}') ;;
      esac
      want=$(awk -v w="$want" -v k=$((ITERS + 1)) 'BEGIN{printf "%.0f", w * k}')
      ratios=$(for s in $sent; do awk -v s=$s -v w=$want 'BEGIN{printf "%.3f ", s / w}'; done)
      printf '  %-23s formula %6.1f MiB/host; measured/formula per host: %s\n' "$algo/$order" \
        "$(awk -v w=$want 'BEGIN{print w / 1048576}')" "$ratios"
    done
  done
  cluster_down
done
echo "logs in $out"
