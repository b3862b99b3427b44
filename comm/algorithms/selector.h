#pragma once
// The selector: which algorithm runs a collective.
//   native      - when asked for (the caller checks that the backend offers it), or for
//                 `auto` when the backend offers it for these arguments and prefers it
//                 (the tcp backend's shared-memory arena when all ranks share a host).
//   a name      - the algorithm of that name for this collective (registry.h) when there
//                 is one; otherwise as `auto`.
//   auto        - the first algorithm registered for the collective whose auto_picks
//                 accepts the call (registry.cpp lists them, and says the rule), each
//                 seeing its own threshold from `t` (registry.h, "threshold").
// Measured on the 2-core development machine (bench/compare.sh): recursive doubling
// halves the tree's time at 2 ranks up to 64 KiB and loses to the ring from 256 KiB; at
// 4 ranks (more processes than cores, so a round needs every process scheduled at
// once) it loses to the tree, so `auto` keeps it to 2 ranks.
#include "comm/communicator.h"

namespace dpt::algo {

// Resolves `requested` (may be automatic) for this call. `native_ok` says whether the
// backend offers a native collective for exactly these arguments, `native_preferred`
// whether `auto` should take it. Never returns automatic.
Algo select(const CollArgs& a, Algo requested, int world_size, bool native_ok, bool native_preferred,
            const AlgoThresholds& t, const Topology& topology = Topology());

}  // namespace dpt::algo
