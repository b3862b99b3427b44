# Sourced by elastic_kill.sh and elastic_grow.sh (after `set -euo pipefail`, with BIN_DIR
# and PYTHON as $1 and $2): bin, py, a scratch folder tmp removed at exit, the test
# program prog, a settle time that lets a stopped member's peers agree, and fail(), which
# prints the job's log.
bin=$1 py=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prog=$bin/libtorch_elastic_steps
export COMM_ELASTIC_SETTLE_S=5
fail() { echo "FAIL: $*"; cat "$tmp/log"; exit 1; }
