# Sourced by the elastic job tests (after `here=`): a work directory removed at exit
# (kept, and named, with ELASTIC_KEEP=1), the launcher in $launcher killed at exit if it
# still runs, short communication timeouts, one BLAS thread per rank, and fail().
work=$(mktemp -d)
launcher=""
trap '[[ -n $launcher ]] && kill "$launcher" 2>/dev/null; wait; [[ -n ${ELASTIC_KEEP:-} ]] && echo "kept $work" || rm -rf "$work"' EXIT
export COMM_TIMEOUT_S=20 COMM_RENDEZVOUS_TIMEOUT_S=30 OPENBLAS_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }
