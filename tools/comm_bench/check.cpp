#include "tools/comm_bench/check.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "comm/half.h"

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

void store(DType t, void* base, size_t i, double v) {
  switch (t) {
    case DType::f32: static_cast<float*>(base)[i] = float(v); break;
    case DType::f64: static_cast<double*>(base)[i] = v; break;
    case DType::f16: static_cast<uint16_t*>(base)[i] = float_to_half(float(v)); break;
    case DType::bf16: static_cast<uint16_t*>(base)[i] = float_to_bf16(float(v)); break;
    case DType::i8: static_cast<int8_t*>(base)[i] = int8_t(v); break;
    case DType::u8: static_cast<uint8_t*>(base)[i] = uint8_t(v); break;
    case DType::i32: static_cast<int32_t*>(base)[i] = int32_t(v); break;
    case DType::i64: static_cast<int64_t*>(base)[i] = int64_t(v); break;
  }
}

// The reduction over ranks of element i, stored as the dtype holds it. avg divides the
// stored sum in the dtype's own arithmetic, as the library does once at the end.
void store_reduced(DType t, void* base, size_t slot, size_t i, int n, ReduceOp op) {
  double acc = input_value(0, i, op);
  for (int r = 1; r < n; ++r) {
    double v = input_value(r, i, op);
    switch (op) {
      case ReduceOp::sum: case ReduceOp::avg: acc += v; break;
      case ReduceOp::prod: acc *= v; break;
      case ReduceOp::min: acc = std::min(acc, v); break;
      case ReduceOp::max: acc = std::max(acc, v); break;
    }
  }
  if (op != ReduceOp::avg) return store(t, base, slot, acc);
  switch (t) {
    case DType::f32: static_cast<float*>(base)[slot] = float(acc) / float(n); break;
    case DType::f64: static_cast<double*>(base)[slot] = acc / double(n); break;
    case DType::f16: static_cast<uint16_t*>(base)[slot] = float_to_half(half_to_float(float_to_half(float(acc))) / float(n)); break;
    case DType::bf16: static_cast<uint16_t*>(base)[slot] = float_to_bf16(bf16_to_float(float_to_bf16(float(acc))) / float(n)); break;
    case DType::i8: static_cast<int8_t*>(base)[slot] = int8_t(int8_t(acc) / int8_t(n)); break;
    case DType::u8: static_cast<uint8_t*>(base)[slot] = uint8_t(uint8_t(acc) / uint8_t(n)); break;
    case DType::i32: static_cast<int32_t*>(base)[slot] = int32_t(acc) / n; break;
    case DType::i64: static_cast<int64_t*>(base)[slot] = int64_t(acc) / n; break;
  }
}

}  // namespace

void fill_input(void* dst, size_t first, size_t count, DType t, int r, ReduceOp op) {
  for (size_t i = 0; i < count; ++i) store(t, dst, i, input_value(r, first + i, op));
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
      for (size_t i = 0; i < l.recv_count; ++i) { store(t, want, 0, input_value(root, i, op)); cmp(i); }
      break;
    case CollKind::reduce_scatter:
      for (size_t j = 0; j < p; ++j) { store_reduced(t, want, 0, size_t(me) * p + j, n, op); cmp(j); }
      break;
    case CollKind::allgather:
      for (int q = 0; q < n; ++q)
        for (size_t j = 0; j < p; ++j) { store(t, want, 0, input_value(q, j, op)); cmp(size_t(q) * p + j); }
      break;
    case CollKind::alltoall:
      for (int q = 0; q < n; ++q)
        for (size_t j = 0; j < p; ++j) { store(t, want, 0, input_value(q, size_t(me) * p + j, op)); cmp(size_t(q) * p + j); }
      break;
    default: break;
  }
  return wrong;
}

}  // namespace dpt::bench
