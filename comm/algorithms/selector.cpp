#include "comm/algorithms/selector.h"

namespace dpt::algo {

Algo select(const CollArgs& a, Algo requested, int world_size, bool native_ok, bool native_preferred,
            const AlgoThresholds& t) {
  if (requested == Algo::native) return Algo::native;  // caller checks native_ok
  if (requested == Algo::automatic && native_ok && native_preferred) return Algo::native;
  const size_t bytes = a.kind == CollKind::allgather ? a.send.bytes() * world_size : a.recv.bytes();
  switch (a.kind) {
    case CollKind::allreduce:
      if (requested == Algo::ring || requested == Algo::tree || requested == Algo::recursive_doubling) return requested;
      if (world_size == 2 && bytes <= t.rd_max_bytes) return Algo::recursive_doubling;
      return bytes <= t.tree_max_bytes ? Algo::tree : Algo::ring;
    case CollKind::reduce_scatter:
    case CollKind::allgather: return Algo::ring;
    case CollKind::broadcast:
    case CollKind::reduce: return Algo::tree;
    default: return Algo::automatic;  // the op's only algorithm (linear, pairwise, ...)
  }
}

}  // namespace dpt::algo
