#pragma once
// The selector: which algorithm runs a collective when the caller asked for `auto`.
//   allreduce: tree up to thresholds.tree_max_bytes (latency-bound), ring above
//     (bandwidth-bound); a backend's native collective when it offers one and the
//     message is large (Open MPI's tuned collectives are good there).
//   reduce_scatter, allgather: ring (there is no latency-optimal alternative here).
//   broadcast, reduce: tree. gather, scatter: linear. alltoall: pairwise. barrier:
//   dissemination.
// An explicit ring/tree request applies where that algorithm exists for the op and
// falls back to the op's only algorithm otherwise; `native` needs backend support.
#include "comm/communicator.h"

namespace dpt::algo {

// Resolves `requested` (may be automatic) for this call. `native_ok` says whether the
// backend offers a native collective for exactly these arguments.
Algo select(const CollArgs& a, Algo requested, int world_size, bool native_ok,
            const AlgoThresholds& t);

}  // namespace dpt::algo
