#include "comm/traffic.h"

#include "comm/communicator.h"

namespace dpt {

std::pair<uint64_t, uint64_t> collective_payload(const CollArgs& a, int rank) {
  const bool root = rank == a.root;
  const uint64_t s = a.send.bytes(), r = a.recv.bytes();
  switch (a.kind) {
    case CollKind::allreduce:
    case CollKind::reduce_scatter:
    case CollKind::allgather:
    case CollKind::alltoall: return {s, r};
    case CollKind::reduce:
    case CollKind::gather: return {s, root ? r : 0};
    case CollKind::scatter: return {root ? s : 0, r};
    case CollKind::broadcast: return root ? std::pair<uint64_t, uint64_t>{s, 0} : std::pair<uint64_t, uint64_t>{0, r};
    case CollKind::barrier: return {0, 0};
  }
  return {0, 0};
}

}  // namespace dpt
