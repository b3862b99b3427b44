#!/usr/bin/env bash
# bench/cluster.sh tells "cannot" from "failed": where namespaces cannot be made at all it
# returns 77 (the tests that need it skip), but once the machine can, a failure is a
# failure: a host name already taken (a namespace left by a run still alive) makes
# cluster_up return 1, not 77; a namespace left by a run that died is removed and the
# cluster comes up. Exit 77 with the reason where the machine cannot make namespaces.
set -u
source "$(cd "$(dirname "$0")" && pwd)/../../bench/cluster.sh"
why=$(cluster_probe 2>&1)
rc=$?
if ((rc != 0)); then
  echo "SKIP: this machine cannot make the emulated hosts: $why"
  exit $rc
fi
work=$(mktemp -d)
cd "$work" || exit 1
fails=0
# 1. A taken name: this shell's own tag's switch, made before cluster_up (the old cluster.sh
#    returned 77 here: the tests needing the cluster were reported skipped).
taken="dc$$-sw"
ip netns add "$taken"
( cluster_up 2 "" ) 2> taken.err
rc=$?
ip netns delete "$taken" 2>/dev/null
for ns in $(ip netns list | awk '{print $1}' | grep "^dc$$-"); do ip netns delete "$ns"; done
if ((rc == 1)) && grep -q "$taken" taken.err; then echo "ok: a taken host name fails (1): $(cat taken.err)"
else echo "FAIL: a taken host name gave $rc, want 1: $(cat taken.err)"; fails=$((fails + 1)); fi
# 2. A dead run's leftover: reaped, and the cluster comes up.
dead=999999
while [[ -d /proc/$dead ]]; do dead=$((dead - 1)); done
ip netns add "dc$dead-h0"
( cluster_up 2 "" && cluster_exec 1 true ) 2> dead.err
rc=$?
if ((rc == 0)) && ! ip netns list | grep -q "^dc$dead-h0"; then echo "ok: a dead run's namespace was removed and the cluster came up"
else echo "FAIL: with a dead run's namespace cluster_up gave $rc: $(cat dead.err)"; fails=$((fails + 1)); fi
ip netns delete "dc$dead-h0" 2>/dev/null
rm -rf "$work"
((fails == 0))
