#pragma once
// Exact expected results for checking collectives (tests and comm_bench -c 1).
//   input: a caller-chosen small integer per (rank, element, op), picked so that every
//   reduction is exact in every dtype, f16 and bf16 included;
//   expected: the reduction over ranks, stored as the dtype holds it. `avg` divides the
//   stored sum in the dtype's own arithmetic, as the library does once at the end, so
//   results can be compared byte for byte.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "comm/half.h"
#include "comm/types.h"

namespace dpt {

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

// Stores at base[slot] the reduction by `op` over ranks 0..n-1 of input_of(rank).
template <class InputOf>
void store_reduction(DType t, void* base, size_t slot, int n, ReduceOp op, InputOf input_of) {
  double acc = input_of(0);
  for (int r = 1; r < n; ++r) {
    const double v = input_of(r);
    switch (op) {
      case ReduceOp::sum: case ReduceOp::avg: acc += v; break;
      case ReduceOp::prod: acc *= v; break;
      case ReduceOp::min: acc = std::min(acc, v); break;
      case ReduceOp::max: acc = std::max(acc, v); break;
    }
  }
  if (op != ReduceOp::avg) return store_value(t, base, slot, acc);
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

}  // namespace dpt
