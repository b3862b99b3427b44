#pragma once
// The selector: which algorithm runs a collective when the caller asked for `auto`.
//   any op: the backend's native collective when it offers one and prefers it (the tcp
//     backend's shared-memory arena when all ranks share a host).
//   allreduce: on 2 ranks recursive doubling (one exchange) up to thresholds.rd_max_bytes;
//     otherwise tree up to thresholds.tree_max_bytes (latency-bound), ring above
//     (bandwidth-bound). Measured on the 2-core development machine: recursive doubling
//     halves the tree's time at 2 ranks up to 64 KiB and loses to the ring from 256 KiB;
//     at 4 ranks (more processes than cores, so a round needs every process scheduled
//     at once) it loses to the tree, so `auto` keeps it to 2 ranks there.
//   reduce_scatter, allgather: ring (there is no latency-optimal alternative here).
//   broadcast, reduce: tree. gather, scatter: linear. alltoall: pairwise. barrier:
//   dissemination.
// An explicit ring/tree request applies where that algorithm exists for the op and
// falls back to the op's only algorithm otherwise; `native` needs backend support.
#include "comm/communicator.h"

namespace dpt::algo {

// Resolves `requested` (may be automatic) for this call. `native_ok` says whether the
// backend offers a native collective for exactly these arguments, `native_preferred`
// whether `auto` should take it.
Algo select(const CollArgs& a, Algo requested, int world_size, bool native_ok, bool native_preferred,
            const AlgoThresholds& t);

}  // namespace dpt::algo
