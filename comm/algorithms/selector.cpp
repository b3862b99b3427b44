#include "comm/algorithms/selector.h"

#include "comm/algorithms/registry.h"

namespace dpt::algo {

Algo select(const CollArgs& a, Algo requested, int world_size, bool native_ok, bool native_preferred,
            const AlgoThresholds& t, const Topology& topology) {
  if (requested == Algo::native) return Algo::native;  // caller checks native_ok
  if (requested == Algo::automatic && native_ok && native_preferred) return Algo::native;
  if (requested != Algo::automatic)
    if (const Algorithm* named = find(a.kind, requested.name())) return Algo::of(*named);
  // The whole buffer, as for allreduce: reduce-scatter's input, allgather's result.
  const size_t bytes = a.kind == CollKind::allgather        ? a.send.bytes() * world_size
                       : a.kind == CollKind::reduce_scatter ? a.send.bytes()
                                                            : a.recv.bytes();
  return Algo::of(auto_pick(a.kind, bytes, world_size, t, topology));
}

}  // namespace dpt::algo
