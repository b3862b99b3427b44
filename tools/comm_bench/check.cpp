#include "tools/comm_bench/check.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "comm/exact_values.h"

namespace dpt::bench {
namespace {

// Values stay within [0, 4] (sum), {1, 2} (prod) or [0, 49] (min/max): sums over up to
// 31 ranks fit int8, products of up to 6 ranks fit int8 exactly, and all are exact in f16.
double input_value(int r, size_t i, ReduceOp op) {
  switch (op) {
    case ReduceOp::prod: return ((i + size_t(r)) % 5 == 0) ? 2.0 : 1.0;
    case ReduceOp::min:
    case ReduceOp::max: return double((i * 31 + size_t(r) * 17) % 50);
    default: return double((i + size_t(r)) % 5);
  }
}

// The exact reduction over ranks of element i (comm/exact_values.h).
void store_reduced(DType t, void* base, size_t slot, size_t i, int n, ReduceOp op) {
  store_reduction(t, base, slot, n, op, [&](int r) { return input_value(r, i, op); });
}

}  // namespace

void fill_input(void* dst, size_t first, size_t count, DType t, int r, ReduceOp op) {
  for (size_t i = 0; i < count; ++i) store_value(t, dst, i, input_value(r, first + i, op));
}

size_t count_wrong(CollKind k, const void* recv, const Layout& l, DType t, ReduceOp op, int me, int n, int root) {
  if (k == CollKind::reduce && me != root) return 0;
  const size_t es = dtype_size(t), p = l.piece;
  unsigned char want[8];
  size_t wrong = 0;
  auto cmp = [&](size_t slot) {
    if (std::memcmp(static_cast<const char*>(recv) + slot * es, want, es) != 0) ++wrong;
  };
  switch (k) {
    case CollKind::allreduce:
    case CollKind::reduce:
      for (size_t i = 0; i < l.recv_count; ++i) { store_reduced(t, want, 0, i, n, op); cmp(i); }
      break;
    case CollKind::broadcast:
      for (size_t i = 0; i < l.recv_count; ++i) { store_value(t, want, 0, input_value(root, i, op)); cmp(i); }
      break;
    case CollKind::reduce_scatter:
      for (size_t j = 0; j < p; ++j) { store_reduced(t, want, 0, size_t(me) * p + j, n, op); cmp(j); }
      break;
    case CollKind::allgather:
      for (int q = 0; q < n; ++q)
        for (size_t j = 0; j < p; ++j) { store_value(t, want, 0, input_value(q, j, op)); cmp(size_t(q) * p + j); }
      break;
    case CollKind::alltoall:
      for (int q = 0; q < n; ++q)
        for (size_t j = 0; j < p; ++j) { store_value(t, want, 0, input_value(q, size_t(me) * p + j, op)); cmp(size_t(q) * p + j); }
      break;
    default: break;
  }
  return wrong;
}

}  // namespace dpt::bench
