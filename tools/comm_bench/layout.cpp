#include "tools/comm_bench/layout.h"

#include <algorithm>

namespace dpt::bench {

Layout layout_for(CollKind k, size_t requested_bytes, DType t, int n) {
  const size_t es = dtype_size(t), un = size_t(n);
  const size_t whole = requested_bytes / es;
  Layout l;
  switch (k) {
    case CollKind::reduce_scatter:
      l.piece = whole / un;
      l.send_count = l.piece * un;
      l.recv_count = l.piece;
      break;
    case CollKind::allgather:
      l.piece = whole / un;
      l.send_count = l.piece;
      l.recv_count = l.piece * un;
      break;
    case CollKind::alltoall:
      l.piece = whole / un;
      l.send_count = l.recv_count = l.piece * un;
      break;
    default:
      l.piece = l.send_count = l.recv_count = whole;
      break;
  }
  l.size_bytes = std::max(l.send_count, l.recv_count) * es;
  return l;
}

double busbw_factor(CollKind k, int n) {
  switch (k) {
    case CollKind::allreduce: return 2.0 * (n - 1) / n;
    case CollKind::reduce_scatter:
    case CollKind::allgather:
    case CollKind::alltoall: return double(n - 1) / n;
    default: return 1.0;
  }
}

}  // namespace dpt::bench
