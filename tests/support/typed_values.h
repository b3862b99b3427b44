#pragma once
// Exact expected values for collective tests. Inputs are small integers chosen per
// (rank, index, op) so that every reduction is exact in every dtype (f16 and bf16
// included), and results are compared byte for byte.
#include <cstdint>
#include <cstring>
#include <vector>

#include "comm/half.h"
#include "comm/types.h"

namespace dpt::test {

inline void store_value(DType t, void* base, size_t i, double v) {
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

// Input element i of rank r for reduce op `op`.
inline double input_value(int r, size_t i, ReduceOp op) {
  switch (op) {
    case ReduceOp::prod: return ((i + r) % 3 == 0) ? 2.0 : 1.0;
    case ReduceOp::min:
    case ReduceOp::max: return double((i * 31 + size_t(r) * 17) % 50);
    default: return double((r + 1) * int(i % 7 + 1));
  }
}

// The exact reduction over ranks 0..n-1 of element i, as the dtype stores it.
inline void store_expected(DType t, void* base, size_t slot, size_t i, int n, ReduceOp op) {
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
  if (op != ReduceOp::avg) return store_value(t, base, slot, acc);
  // avg: the sum as stored in the dtype, divided in the dtype's own arithmetic.
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

// Index of the first differing element, or -1.
inline long first_mismatch(const std::vector<char>& got, const std::vector<char>& want, DType t) {
  size_t es = dtype_size(t);
  for (size_t i = 0; i < got.size() / es; ++i)
    if (std::memcmp(got.data() + i * es, want.data() + i * es, es) != 0) return long(i);
  return -1;
}

}  // namespace dpt::test
